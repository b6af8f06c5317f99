"""REST handlers for schedules: list them (``schedules?query=``), describe one with the
latest rows of its action log (``schedules/{id}``), trigger, pause, unpause, delete.

``routes()`` in :mod:`kernel_ext.server.handlers` mounts them under ``/durable/api/v1/``,
with the REST conventions of that module (``{"error": {"code", "message"}}``; 400 naming
the field for bad input, a List Filter the engine cannot read included; 404 for an unknown
schedule or namespace; Jupyter's authentication and XSRF checks). Times are ISO 8601 in
UTC, durations in seconds.

Every action time a schedule came to is in its log, with what became of it: started,
skipped because a run it started was still open (``skipped_overlap``), missed because the
service came back after the catch-up window (``missed_catchup_window``), and the rest;
each row says which kind of mark the ScheduleView widget draws it as (``kind``), so the
web UI and the widget name them alike.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from engine.client import (
    Client,
    ScheduleActionLogEntry,
    ScheduleDescription,
    ScheduleListDescription,
    ScheduleNotFoundError,
    ScheduleOverlapPolicy,
    ScheduleSpec,
)
from engine.exceptions import InvalidArgumentError
from widgets.schedule_view import KINDS, mark_kind
from widgets.search_attributes import attribute_values

from .handlers import BadRequest, DurableAPIHandler

#: How many schedules a list answers at most (``limit``), and by default.
MAX_SCHEDULES = 1000
DEFAULT_SCHEDULES = 100
#: How many of the action log's latest rows a description carries (``log_limit``).
DEFAULT_LOG_LIMIT = 50
MAX_LOG_LIMIT = 1000
#: How many of a schedule's runs are looked up for the status of the rows shown.
MAX_RUN_LOOKUP = 1000
OVERLAP_NAMES = [p.name for p in ScheduleOverlapPolicy]


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _secs(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def span_text(seconds: float) -> str:
    """``45 s``, ``1 min``, ``3 h``, ``7 d`` (exact in the largest unit dividing it)."""
    value = abs(seconds)
    for unit, name in ((86400, "d"), (3600, "h"), (60, "min")):
        if value >= unit and value % unit == 0:
            return f"{value / unit:.0f} {name}"
    return f"{value:g} s"


def _ranges(ranges: Any) -> list[dict[str, int]]:
    return [{"start": r.start, "end": r.end, "step": r.step} for r in ranges]


def _calendar(cal: Any) -> dict[str, Any]:
    fields = ("second", "minute", "hour", "day_of_month", "month", "year", "day_of_week")
    out: dict[str, Any] = {f: _ranges(getattr(cal, f)) for f in fields}
    out["comment"] = cal.comment
    return out


def spec_text(spec: ScheduleSpec) -> str:
    """One line: ``every 1 min``, the cron strings, how many calendars, the zone."""
    parts = []
    for i in spec.intervals:
        text = f"every {span_text(i.every.total_seconds())}"
        if i.offset:
            text += f" (offset {span_text(i.offset.total_seconds())})"
        parts.append(text)
    parts += [f"cron {c}" for c in spec.cron_expressions]
    if spec.calendars:
        n = len(spec.calendars)
        parts.append(f"{n} calendar spec{'s' if n != 1 else ''}")
    text = ", ".join(parts) or "no times"
    if spec.time_zone_name:
        text += f" in {spec.time_zone_name}"
    return text


def spec_json(spec: ScheduleSpec) -> dict[str, Any]:
    """A spec as JSON, with its one-line ``text``."""
    return {
        "text": spec_text(spec),
        "intervals": [
            {"every_seconds": _secs(i.every), "offset_seconds": _secs(i.offset)}
            for i in spec.intervals
        ],
        "cron_expressions": list(spec.cron_expressions),
        "calendars": [_calendar(c) for c in spec.calendars],
        "skip": [_calendar(c) for c in spec.skip],
        "start_at": _iso(spec.start_at),
        "end_at": _iso(spec.end_at),
        "jitter_seconds": _secs(spec.jitter),
        "time_zone_name": spec.time_zone_name,
    }


def _value_text(converter: Any, payload: Any) -> Any:
    """An action's argument decoded (a Payload read back from the service), else text."""
    try:
        value = converter.from_payload(payload)
    except Exception:
        return repr(payload)
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)


def _action_json(converter: Any, action: Any) -> dict[str, Any]:
    return {
        "workflow_type": str(getattr(action, "workflow", "") or ""),
        "workflow_id": getattr(action, "id", None),
        "task_queue": getattr(action, "task_queue", None),
        "args": [_value_text(converter, a) for a in getattr(action, "args", [])],
        "execution_timeout_seconds": _secs(getattr(action, "execution_timeout", None)),
        "run_timeout_seconds": _secs(getattr(action, "run_timeout", None)),
    }


def _result_json(result: Any) -> dict[str, Any]:
    return {
        "scheduled_at": _iso(result.scheduled_at),
        "started_at": _iso(result.started_at),
        "workflow_id": getattr(result.action, "workflow_id", None),
        "run_id": getattr(result.action, "first_execution_run_id", None),
    }


def _execution_json(execution: Any) -> dict[str, Any]:
    return {
        "workflow_id": getattr(execution, "workflow_id", None),
        "run_id": getattr(execution, "first_execution_run_id", None),
    }


def entry_json(entry: ScheduleActionLogEntry, status: str | None = None) -> dict[str, Any]:
    """One row of the action log: its times, outcome (and the kind of mark the widget
    draws it as, with that kind's label and meaning), source, overlap policy, run and
    detail; ``run_status`` of the run it started, when known."""
    kind = mark_kind(entry.outcome)
    return {
        "id": entry.id,
        "nominal_time": _iso(entry.nominal_time),
        "scheduled_time": _iso(entry.scheduled_time),
        "decided_time": _iso(entry.decided_time),
        "outcome": entry.outcome,
        "kind": kind,
        "label": KINDS[kind]["label"],
        "source": entry.source,
        "overlap": entry.overlap.name,
        "workflow_id": entry.workflow_id,
        "run_id": entry.run_id,
        "run_status": status,
        "detail": entry.detail,
    }


def description_json(description: ScheduleDescription) -> dict[str, Any]:
    """``describe()`` as JSON: action, spec, policy, state and info (no payloads: the
    action's arguments decoded as values or text)."""
    schedule = description.schedule
    policy = schedule.policy
    state = schedule.state
    info = description.info
    window = policy.catchup_window
    return {
        "id": description.id,
        "workflow_type": str(getattr(schedule.action, "workflow", "") or ""),
        "action": _action_json(description.data_converter, schedule.action),
        "spec": spec_json(schedule.spec),
        "policy": {
            "overlap": policy.overlap.name,
            "catchup_window_seconds": _secs(window),
            "catchup_window_text": span_text(window.total_seconds())
            if window
            else "1 year (default)",
            "pause_on_failure": bool(policy.pause_on_failure),
        },
        "state": {
            "paused": bool(state.paused),
            "note": state.note or "",
            "limited_actions": bool(state.limited_actions),
            "remaining_actions": state.remaining_actions,
        },
        "info": {
            "num_actions": info.num_actions,
            "num_actions_skipped_overlap": info.num_actions_skipped_overlap,
            "num_actions_missed_catchup_window": info.num_actions_missed_catchup_window,
            "running_actions": [_execution_json(e) for e in info.running_actions],
            "recent_actions": [_result_json(r) for r in info.recent_actions],
            "next_action_times": [_iso(t) for t in info.next_action_times],
            "buffered_actions": [_iso(t) for t in info.buffered_actions],
            "created_at": _iso(info.created_at),
            "last_updated_at": _iso(info.last_updated_at),
            "invalid_schedule_error": info.invalid_schedule_error,
        },
        "search_attributes": attribute_values(description),  # type: ignore[arg-type]
    }


def list_entry_json(entry: ScheduleListDescription) -> dict[str, Any]:
    """One listed schedule: id, workflow type, paused, note, spec, next action times,
    recent actions."""
    sched = entry.schedule
    info = entry.info
    return {
        "id": entry.id,
        "workflow_type": str(getattr(sched.action, "workflow", "") or "") if sched else "",
        "paused": bool(sched.state.paused) if sched else False,
        "note": (sched.state.note or "") if sched else "",
        "spec": spec_text(sched.spec) if sched else "",
        "next_action_times": [_iso(t) for t in info.next_action_times] if info else [],
        "recent_actions": [_result_json(r) for r in info.recent_actions] if info else [],
        "search_attributes": attribute_values(entry),  # type: ignore[arg-type]
    }


def _quoted(value: str) -> str:
    """``value`` as a List Filter string."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


class ScheduleBase(DurableAPIHandler):
    """What the schedule endpoints share. Each also answers as ``schedule/...`` with the
    id in the query (``?schedule_id=``), for the ids ``.`` and ``..`` that cannot travel
    as a path segment."""

    async def prepare(self) -> None:
        await super().prepare()
        if self.path_kwargs.get("schedule_id") == "":
            values = self.get_query_arguments("schedule_id", strip=False)
            if len(values) != 1 or not values[0]:
                raise BadRequest("give the schedule id once, as ?schedule_id=...")
            self.path_kwargs["schedule_id"] = values[0]

    async def handle_of(self, schedule_id: str) -> Any:
        client = await self.client()
        return client.get_schedule_handle(schedule_id)

    def note_arg(self) -> str | None:
        data = self.body_object(allow_empty=True)
        unknown = sorted(set(data) - {"note"})
        if unknown:
            raise BadRequest(f"unknown field(s) {', '.join(unknown)}; expected: note")
        note = data.get("note")
        if note is not None and not isinstance(note, str):
            raise BadRequest("field 'note' must be a string")
        return note or None


class SchedulesHandler(ScheduleBase):
    """``GET schedules?query=&limit=``: ``{schedules, truncated}``, the namespace's
    schedules by id matching the List Filter ``query`` (over ``ScheduleId``,
    ``TemporalSchedulePaused`` and the schedules' custom search attributes), each with
    its id, workflow type, paused state and note, spec, next action times, recent actions
    and ``counts`` (``started``: actions taken; ``skipped_overlap``;
    ``missed_catchup_window``: describe()'s counters). A filter the engine cannot read is
    a 400 with its message."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        query = self.get_query_argument("query", "").strip() or None
        limit = self.int_arg("limit", DEFAULT_SCHEDULES, 1, MAX_SCHEDULES)
        client = await self.client()
        try:
            listing = await client.list_schedules(query, page_size=min(limit + 1, 1000))
            entries: list[ScheduleListDescription] = []
            truncated = False
            async for entry in listing:
                if len(entries) >= limit:
                    truncated = True
                    break
                entries.append(entry)
        except InvalidArgumentError as err:  # the List Filter's error, with its column
            raise BadRequest(f"query: {err}") from err
        out = []
        for entry in entries:
            data = list_entry_json(entry)
            try:
                info = (await client.get_schedule_handle(entry.id).describe()).info
            except ScheduleNotFoundError:
                continue  # deleted since it was listed
            data["counts"] = {
                "started": info.num_actions,
                "skipped_overlap": info.num_actions_skipped_overlap,
                "missed_catchup_window": info.num_actions_missed_catchup_window,
                "running": len(info.running_actions),
                "buffered": len(info.buffered_actions),
            }
            out.append(data)
        self.write_json({"schedules": out, "limit": limit, "truncated": truncated})


class ScheduleHandler(ScheduleBase):
    """``GET schedules/{id}?log_limit=``: the description (``schedule``), the latest
    ``log_limit`` rows of the action log oldest first (``actions``: each with its
    outcome, the kind of mark and its label, the detail saying why, the run it started
    and that run's status now), the log's size and its count by outcome (``logged``,
    ``by_outcome``), and the legend of the kinds (``kinds``). ``DELETE schedules/{id}``
    deletes it (the runs it started go on)."""

    @web.authenticated
    @authorized
    async def get(self, schedule_id: str) -> None:
        log_limit = self.int_arg("log_limit", DEFAULT_LOG_LIMIT, 0, MAX_LOG_LIMIT)
        client = await self.client()
        handle = client.get_schedule_handle(schedule_id)
        description = await handle.describe()
        entries: list[ScheduleActionLogEntry] = []
        by_outcome: Counter[str] = Counter()
        logged = 0
        after = 0
        while True:
            page = await handle.actions(after=after, limit=1000)
            if not page:
                break
            logged += len(page)
            by_outcome.update(e.outcome for e in page)
            entries = (entries + page)[-log_limit:] if log_limit else []
            after = page[-1].id
            if len(page) < 1000:
                break
        statuses = await self._statuses(client, schedule_id, entries)
        self.write_json(
            {
                "schedule": description_json(description),
                "actions": [entry_json(e, statuses.get(e.run_id or "")) for e in entries],
                "logged": logged,
                "shown": len(entries),
                "by_outcome": dict(by_outcome),
                "kinds": KINDS,
                "now": _iso(datetime.fromtimestamp(client.clock.now(), UTC)),
            }
        )

    @staticmethod
    async def _statuses(
        client: Client, schedule_id: str, entries: list[ScheduleActionLogEntry]
    ) -> dict[str, str]:
        wanted = {e.run_id for e in entries if e.run_id}
        if not wanted:
            return {}
        found: dict[str, str] = {}
        query = f"TemporalScheduledById = {_quoted(schedule_id)}"
        async for wf in client.list_workflows(query, limit=MAX_RUN_LOOKUP):
            if wf.run_id in wanted:
                found[wf.run_id] = wf.status.name if wf.status else ""
        return found

    @web.authenticated
    @authorized
    async def delete(self, schedule_id: str) -> None:
        handle = await self.handle_of(schedule_id)
        await handle.delete()
        self.write_json({"ok": True})


class TriggerHandler(ScheduleBase):
    """``POST schedules/{id}/trigger`` with an optional ``{"overlap": "SKIP" | ...}``
    (the schedule's policy if none): an action now, even while paused."""

    @web.authenticated
    @authorized
    async def post(self, schedule_id: str) -> None:
        data = self.body_object(allow_empty=True)
        unknown = sorted(set(data) - {"overlap"})
        if unknown:
            raise BadRequest(f"unknown field(s) {', '.join(unknown)}; expected: overlap")
        overlap = None
        raw = data.get("overlap")
        if raw is not None:
            if not isinstance(raw, str) or raw.strip().upper() not in OVERLAP_NAMES:
                raise BadRequest(
                    f"field 'overlap': {raw!r} is not an overlap policy; one of "
                    + ", ".join(OVERLAP_NAMES)
                )
            overlap = ScheduleOverlapPolicy[raw.strip().upper()]
        handle = await self.handle_of(schedule_id)
        before = await handle.describe()
        last = await handle.actions(limit=1, newest=True)
        await handle.trigger(overlap=overlap)
        after = await handle.describe()
        # What became of it, said: a trigger skipped under SKIP must not look done.
        added = await handle.actions(after=last[-1].id if last else 0, limit=1000)
        tail = [e for e in added if e.source == "trigger"]
        if len(after.info.buffered_actions) > len(before.info.buffered_actions):
            outcome, detail = "buffered", "it starts when the open run closes"
        elif tail:
            entry = tail[-1]
            outcome = entry.outcome
            detail = (entry.workflow_id if outcome == "started" else entry.detail) or ""
        else:
            outcome, detail = "not_taken", ""
        self.write_json({"ok": True, "outcome": outcome, "detail": detail}, 202)


class PauseHandler(ScheduleBase):
    """``POST schedules/{id}/pause`` with an optional ``{"note": ...}``."""

    @web.authenticated
    @authorized
    async def post(self, schedule_id: str) -> None:
        note = self.note_arg()
        handle = await self.handle_of(schedule_id)
        await handle.pause(note=note)
        self.write_json({"ok": True})


class UnpauseHandler(ScheduleBase):
    """``POST schedules/{id}/unpause`` with an optional ``{"note": ...}``."""

    @web.authenticated
    @authorized
    async def post(self, schedule_id: str) -> None:
        note = self.note_arg()
        handle = await self.handle_of(schedule_id)
        await handle.unpause(note=note)
        self.write_json({"ok": True})
