"""ScheduleView: a schedule's action times on a time axis (taken, skipped, missed, waiting,
upcoming), its runs with their status, its counters and state, live."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

import anywidget
import traitlets

from engine import WorkflowExecutionStatus
from engine.client import (
    Client,
    ScheduleActionLogEntry,
    ScheduleDescription,
    ScheduleNotFoundError,
)

from . import _live
from ._snapshot import StaticDisplay, html_table
from ._source import seconds
from ._static import CSS, esm
from .models import STATUS_COLOURS, short_id

__all__ = ["KINDS", "RunState", "ScheduleView", "mark_kind", "schedule_view_data"]

#: What each kind of mark means (the legend, and the marks' hover text), in legend order.
KINDS: dict[str, dict[str, str]] = {
    "started": {
        "label": "started",
        "colour": "#1864ab",
        "help": "the action started a run (its colour: the run's status now)",
    },
    "skipped": {
        "label": "skipped (overlap)",
        "colour": "#e8590c",
        "help": "not started: a run it started before was still open and the overlap "
        "policy says skip (SKIP, or BUFFER_ONE with one waiting already)",
    },
    "missed": {
        "label": "missed (catch-up window)",
        "colour": "#9c36b5",
        "help": "not started: the service was down at its time and came back later than "
        "the catch-up window allows",
    },
    "waiting": {
        "label": "buffered (waiting)",
        "colour": "#f08c00",
        "help": "waiting for the open run to close, then it starts (BUFFER_ONE, BUFFER_ALL, "
        "CANCEL_OTHER)",
    },
    "ended_other": {
        "label": "ended the open run",
        "colour": "#495057",
        "help": "cancelled or terminated the run still open (CANCEL_OTHER, TERMINATE_OTHER)",
    },
    "not_taken": {
        "label": "not taken",
        "colour": "#868e96",
        "help": "not started: paused, out of actions, replaced by a later action, or the "
        "start failed (the detail says which)",
    },
    "upcoming": {
        "label": "upcoming",
        "colour": "#adb5bd",
        "help": "an action time still to come (next_action_times)",
    },
}

_KIND_OF_OUTCOME = {
    "started": "started",
    "skipped_overlap": "skipped",
    "missed_catchup_window": "missed",
    "cancelled_other": "ended_other",
    "terminated_other": "ended_other",
    "superseded": "not_taken",
    "not_taken": "not_taken",
    "start_failed": "not_taken",
}

_STATUS_KEYS = {s: s.name.lower() for s in WorkflowExecutionStatus}

#: Round steps of the axis ticks, in seconds.
_STEPS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
    14 * 86400,
    30 * 86400,
    91 * 86400,
    365 * 86400,
)


def mark_kind(outcome: str) -> str:
    """The kind of mark (a key of :data:`KINDS`) an action log outcome is drawn as."""
    return _KIND_OF_OUTCOME.get(outcome, "not_taken")


@dataclass(frozen=True)
class RunState:
    """What the view knows of a run an action started: its status key (``"running"``,
    ``"completed"``...) and its start and close (epoch seconds)."""

    status: str
    start: float
    close: float | None = None


def _utc(at: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return datetime.fromtimestamp(at, UTC).strftime(fmt)


def _span(value: float) -> str:
    """``45 s``, ``1 min``, ``3 h``, ``7 d``: exact in the largest unit dividing it, else
    rounded."""
    value = abs(value)
    for unit, name in ((86400, "d"), (3600, "h"), (60, "min")):
        if value >= unit and value % unit == 0:
            return f"{value / unit:.0f} {name}"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    if value < 172800:
        return f"{value / 3600:.0f} h"
    return f"{value / 86400:.0f} d"


def time_ticks(start: float, end: float, max_ticks: int = 8) -> list[list[Any]]:
    """Ticks at round UTC times between ``start`` and ``end`` (epoch seconds), as
    ``[[epoch, label], ...]``: seconds shown only when the step is under a minute, the
    date only when it is a day or more (or the ticks cross midnight)."""
    span = max(end - start, 1.0)
    step = next((s for s in _STEPS if s * max_ticks >= span), _STEPS[-1])
    first = math.ceil(start / step) * step
    ticks: list[float] = []
    at = float(first)
    while at <= end + 1e-6 and len(ticks) <= max_ticks + 1:
        ticks.append(at)
        at += step
    days = {_utc(t, "%Y-%m-%d") for t in ticks}
    if step >= 86400:
        fmt = "%m-%d"
    elif step < 60:
        fmt = "%H:%M:%S"
    else:
        fmt = "%m-%d %H:%M" if len(days) > 1 else "%H:%M"
    return [[t, _utc(t, fmt)] for t in ticks]


def _policy_text(description: ScheduleDescription) -> dict[str, str]:
    policy = description.schedule.policy
    window = policy.catchup_window
    return {
        "overlap": policy.overlap.name,
        "catchup_window": _span(window.total_seconds()) if window else "1 year (default)",
        "pause_on_failure": "yes" if policy.pause_on_failure else "no",
    }


def _spec_text(description: ScheduleDescription) -> str:
    spec = description.schedule.spec
    parts = []
    for i in spec.intervals:
        offset = i.offset.total_seconds() if i.offset else 0.0
        every = f"every {_span(i.every.total_seconds())}"
        parts.append(f"{every} (offset {_span(offset)})" if offset else every)
    parts += list(spec.cron_expressions)
    if spec.calendars:
        parts.append(f"{len(spec.calendars)} calendar spec(s)")
    text = ", ".join(parts) or "no times"
    if spec.time_zone_name:  # calendars match the wall clock there; the axis is UTC
        text += f" in {spec.time_zone_name}"
    return text


def schedule_view_data(
    description: ScheduleDescription,
    entries: Sequence[ScheduleActionLogEntry],
    runs: Mapping[str, RunState],
    *,
    now: float,
    logged: int | None = None,
    by_outcome: Mapping[str, int] | None = None,
    upcoming: int = 5,
) -> dict[str, Any]:
    """What the ScheduleView draws, as JSON: ``marks`` on a time axis (one per action log
    entry in ``entries``, one per buffered start, one per upcoming time, the first
    ``upcoming`` of them), ``runs`` as bars from their start to their close (or now)
    coloured by status, ``ticks``, the counters, the state and the policy.

    ``runs`` maps a run id to its :class:`RunState`. ``logged`` and ``by_outcome``: how
    many entries the whole log holds and their outcomes (``entries`` may be its tail only).
    """
    info = description.info
    state = description.schedule.state
    marks: list[dict[str, Any]] = []
    bars: dict[str, dict[str, Any]] = {}
    for e in entries:
        kind = mark_kind(e.outcome)
        at = e.nominal_time.timestamp()
        run = runs.get(e.run_id or "")
        status = run.status if run and kind == "started" else ""
        colour = STATUS_COLOURS.get(status, KINDS[kind]["colour"]) if status else ""
        outcome = e.outcome.replace("_", " ")
        text = f"{_utc(at)} UTC · {outcome}"
        if e.source != "spec":
            text += f" ({e.source})"
        if status:
            text += f" · run {status.replace('_', ' ')}"
        decided = e.decided_time.timestamp()
        if kind == "started" and decided - at >= 1:
            text += f" · started {_span(decided - at)} late"
        marks.append(
            {
                "id": e.id,
                "at": at,
                "kind": kind,
                "outcome": e.outcome,
                "source": e.source,
                "overlap": e.overlap.name,
                "status": status,
                "colour": colour or KINDS[kind]["colour"],
                "time": _utc(at),
                "decided": _utc(decided),
                "workflow_id": e.workflow_id or "",
                "run_id": e.run_id or "",
                "run_id_short": short_id(e.run_id) if e.run_id else "",
                "detail": e.detail or "",
                "text": text + (f": {e.detail}" if e.detail else ""),
            }
        )
        if kind == "started" and run is not None and e.run_id:
            bars[e.run_id] = {
                "run_id": e.run_id,
                "workflow_id": e.workflow_id or "",
                "start": run.start,
                "end": run.close,
                "status": run.status,
                "colour": STATUS_COLOURS.get(run.status, STATUS_COLOURS["waiting"]),
                "text": f"{e.workflow_id} · {run.status.replace('_', ' ')} · from "
                f"{_utc(run.start)} UTC "
                + (f"to {_utc(run.close)} UTC" if run.close is not None else "(still open)"),
            }
    for t in info.buffered_actions:
        at = t.timestamp()
        marks.append(
            {
                "id": None,
                "at": at,
                "kind": "waiting",
                "outcome": "buffered",
                "colour": KINDS["waiting"]["colour"],
                "time": _utc(at),
                "text": f"{_utc(at)} UTC · buffered: starts when the open run closes",
            }
        )
    for t in list(info.next_action_times)[: max(0, upcoming)]:
        at = t.timestamp()
        marks.append(
            {
                "id": None,
                "at": at,
                "kind": "upcoming",
                "outcome": "upcoming",
                "colour": KINDS["upcoming"]["colour"],
                "time": _utc(at),
                "text": f"{_utc(at)} UTC · upcoming (in {_span(at - now)})"
                + (" · paused: it will not be taken" if state.paused else ""),
            }
        )
    times = [m["at"] for m in marks] + [b["start"] for b in bars.values()] + [now]
    start, end = min(times), max(times)
    pad = max((end - start) * 0.03, 1.0)
    start, end = start - pad, end + pad
    counts = dict(by_outcome or Counter(e.outcome for e in entries))
    return {
        "schedule_id": description.id,
        "workflow_type": _workflow_type(description),
        "spec": _spec_text(description),
        "policy": _policy_text(description),
        "paused": bool(state.paused),
        "note": state.note or "",
        "invalid": info.invalid_schedule_error or "",
        "counters": {
            "num_actions": info.num_actions,
            "num_actions_skipped_overlap": info.num_actions_skipped_overlap,
            "num_actions_missed_catchup_window": info.num_actions_missed_catchup_window,
            "running_actions": len(info.running_actions),
            "buffered_actions": len(info.buffered_actions),
        },
        "logged": len(entries) if logged is None else logged,
        "shown": len(entries),
        "by_outcome": counts,
        "now": now,
        "start": start,
        "end": end,
        "ticks": time_ticks(start, end),
        "marks": sorted(marks, key=lambda m: m["at"]),
        "runs": sorted(bars.values(), key=lambda b: b["start"]),
        "kinds": KINDS,
    }


def _workflow_type(description: ScheduleDescription) -> str:
    return str(getattr(description.schedule.action, "workflow", "") or "")


def _run_state(desc: Any) -> RunState:
    status = _STATUS_KEYS.get(desc.status, str(desc.status).lower())
    close = desc.close_time.timestamp() if desc.close_time else None
    return RunState(status, desc.start_time.timestamp(), close)


# -- the widget -------------------------------------------------------------------------


class ScheduleView(StaticDisplay, anywidget.AnyWidget):  # type: ignore[misc]
    """A schedule seen from inside, live: every action time it came to on a time axis
    (started ones in their run's status colour, skipped-by-overlap ones as orange
    crosses, missed-catch-up ones as purple squares, buffered starts as waiting rings,
    the upcoming times as grey rings), its runs as bars from start to close, the
    counters of ``describe()`` (actions, skipped, missed, running, buffered), whether it
    is paused and its note. Hovering a mark says what became of that time and why; a
    legend explains each mark; a table lists the recent ones with their detail.

    Reads ``handle.describe()`` and the new entries of ``handle.actions()`` (the action
    log) every ``refresh_interval``, and not at all while no view of it is shown; the
    last ``max_actions`` entries are drawn. A failed read shows in :attr:`error` and is
    retried after a growing pause; after five in a row (or at once, when the schedule is
    deleted) the refresh stops and says so. :meth:`stop` ends the refresh and keeps the
    widget on screen as it is; :meth:`close` also removes it.

    Its display data holds, besides the widget view, the counters and the action log
    shown as HTML (and text), so a saved notebook shows them without a kernel.
    """

    _esm = esm("schedule_view.js")
    _css = CSS

    title = traitlets.Unicode("").tag(sync=True)
    data = traitlets.Dict({}).tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        client: Client,
        schedule_id: str,
        *,
        refresh_interval: float | timedelta = 1.0,
        max_actions: int = 30,
        upcoming: int = 5,
        **kwargs: Any,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"expected an engine Client, not {type(client).__name__}")
        if not 1 <= max_actions <= 1000:
            raise ValueError(f"max_actions must be between 1 and 1000, not {max_actions}")
        self._interval = seconds(refresh_interval)
        self._client = client
        self._handle = client.get_schedule_handle(schedule_id)
        self._max = max_actions
        self._upcoming = upcoming
        self._lock = threading.RLock()
        self._entries: list[ScheduleActionLogEntry] = []
        self._after = 0
        self._logged = 0
        self._by_outcome: Counter[str] = Counter()
        self._runs: dict[str, RunState] = {}
        self._description: ScheduleDescription | None = None
        self._views = _live.Views()
        super().__init__(title=f"Schedule {schedule_id}", **kwargs)
        self._apply(_live.call(self._read()))  # raises ScheduleNotFoundError when none
        self.on_msg(self._on_message)
        self._subscription: _live.Subscription | None = _live.subscribe(
            self._refresh, f"schedule {schedule_id}"
        )
        self.live = True

    def __repr__(self) -> str:
        data = self.data
        if not data:
            return "<ScheduleView (not built)>"
        c = data["counters"]
        state = " · paused" if data["paused"] else ""
        n = c["num_actions"]
        return (
            f"<ScheduleView {data['schedule_id']} · {n} action{'' if n == 1 else 's'}, "
            f"{c['num_actions_skipped_overlap']} skipped (overlap), "
            f"{c['num_actions_missed_catchup_window']} missed (catch-up)"
            f"{state}{' · live' if self.live else ''}>"
        )

    @property
    def schedule_id(self) -> str:
        """The schedule shown."""
        return self._handle.id

    @property
    def refreshing(self) -> bool:
        """Whether the live refresh runs."""
        return self._subscription is not None and self._subscription.active

    @property
    def marks(self) -> list[dict[str, Any]]:
        """The marks drawn, oldest first (``kind``: a key of :data:`KINDS`)."""
        return list(self.data.get("marks", []))

    @property
    def description(self) -> ScheduleDescription | None:
        """The schedule's description as last read."""
        return self._description

    # -- reading ------------------------------------------------------------------------

    async def _read(self) -> tuple[ScheduleDescription, float]:
        """Describe the schedule, read the new log entries and the status of the runs
        drawn (closed runs are read once)."""
        handle, client = self._handle, self._client
        description = await handle.describe()
        new: list[ScheduleActionLogEntry] = []
        after = self._after
        while True:
            page = await handle.actions(after=after, limit=1000)
            new.extend(page)
            if page:
                after = page[-1].id
            if len(page) < 1000:
                break
        with self._lock:
            # Another read (refresh() beside the live one) may have taken some already.
            new = [e for e in new if e.id > self._after]
            self._after = max(self._after, after)
            self._logged += len(new)
            self._by_outcome.update(e.outcome for e in new)
            self._entries = (self._entries + new)[-self._max :]
            wanted = {
                e.run_id: e.workflow_id
                for e in self._entries
                if e.run_id and e.workflow_id and mark_kind(e.outcome) == "started"
            }
            open_or_new = [
                (rid, wid)
                for rid, wid in wanted.items()
                if rid not in self._runs or self._runs[rid].close is None
            ]
        for rid, wid in open_or_new:
            try:
                desc = await client.get_workflow_handle(wid, run_id=rid).describe()
            except Exception:  # gone (retention): drawn without its bar
                continue
            with self._lock:
                self._runs[rid] = _run_state(desc)
        with self._lock:
            self._runs = {rid: r for rid, r in self._runs.items() if rid in wanted}
        return description, client.clock.now()

    def _apply(self, read: tuple[ScheduleDescription, float]) -> bool:
        description, now = read
        with self._lock:
            self._description = description
            data = schedule_view_data(
                description,
                self._entries,
                self._runs,
                now=now,
                logged=self._logged,
                by_outcome=dict(self._by_outcome),
                upcoming=self._upcoming,
            )
            with self.hold_sync():
                self.data = data
        return True

    def refresh(self) -> None:
        """Read the schedule and its action log now (raises what reading raised)."""
        self._apply(_live.call(self._read()))

    async def _refresh(self) -> None:
        await _live.refresh_loop(
            self._read,
            self._apply,
            interval=self._interval,
            views=self._views,
            on_error=self._refresh_failed,
            name=f"schedule {self.schedule_id}",
            what=f"could not read schedule {self.schedule_id!r}: ",
            fatal=(ScheduleNotFoundError,),
        )
        self._publish_snapshot()  # the refresh gave up: the outputs get the last state

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        self._views.message(content)

    def _refresh_failed(self, message: str, stopped: bool) -> None:
        with self.hold_sync():
            self.error = message
            if stopped:
                self.live = False

    def _end_refresh(self) -> None:
        subscription = getattr(self, "_subscription", None)  # None: construction failed
        if subscription is not None:
            subscription.cancel()
            self.live = False

    def stop(self) -> None:
        """Stop the refresh and keep the widget on screen as it is now (no background
        thread is left once no widget is live; the saved output gets a static snapshot).
        :meth:`close` removes the widget as well."""
        self._end_refresh()
        self._publish_snapshot()

    def close(self) -> None:
        """Stop the refresh and close the widget (ipywidgets' close: every view of it
        is removed, its output goes blank; see :meth:`stop` to keep it)."""
        self._end_refresh()
        super().close()

    # -- static fallbacks ---------------------------------------------------------------

    def _summary(self) -> list[str]:
        data = self.data
        c, p = data["counters"], data["policy"]
        lines = [
            f"{data['workflow_type']} {data['spec']} · overlap {p['overlap']} · catch-up "
            f"window {p['catchup_window']} · pause on failure {p['pause_on_failure']}",
            f"{c['num_actions']} taken · {c['num_actions_skipped_overlap']} skipped "
            f"(overlap) · {c['num_actions_missed_catchup_window']} missed (catch-up window) · "
            f"{c['running_actions']} running · {c['buffered_actions']} buffered",
        ]
        if data["paused"]:
            lines.append(f"PAUSED: {data['note']}" if data["note"] else "PAUSED")
        elif data["note"]:
            lines.append(f"note: {data['note']}")
        if data["invalid"]:
            lines.append(f"invalid: {data['invalid']}")
        return lines

    def _static_html(self) -> str | None:
        data = self.data
        if not data:
            return None
        logged = [m for m in data["marks"] if m.get("id") is not None]
        rows = [
            (
                m["time"],
                KINDS[m["kind"]]["label"],
                m["status"].replace("_", " "),
                m["workflow_id"],
                m["detail"],
            )
            for m in reversed(logged)
        ]
        table = html_table(
            ["action time (UTC)", "what became of it", "run status", "workflow id", "detail"],
            rows,
            failed=[m["kind"] in ("skipped", "missed") for m in reversed(logged)],
        )
        upcoming = [m["time"] for m in data["marks"] if m["kind"] == "upcoming"]
        waiting = [m["time"] for m in data["marks"] if m["kind"] == "waiting"]
        extra = ""
        if waiting:
            extra += f"<p>buffered (waiting): {escape(', '.join(waiting))}</p>"
        if upcoming:
            extra += f"<p>upcoming (UTC): {escape(', '.join(upcoming))}</p>"
        earlier = data["logged"] - data["shown"]
        more = f"<p><em>{earlier} earlier log entries not shown</em></p>" if earlier > 0 else ""
        summary = "".join(f"<p>{escape(line)}</p>" for line in self._summary())
        return (
            f'<div class="dn-static dn-sv"><p><strong>{escape(self.title)}</strong></p>'
            f"{summary}{table}{more}{extra}</div>"
        )

    def _static_text(self) -> str:
        if not self.data:
            return repr(self)
        lines = [repr(self), *(f"  {line}" for line in self._summary())]
        for m in self.data["marks"][-20:]:
            lines.append(f"  {m['time']}  {KINDS[m['kind']]['label']:<26} {_tail(m)}")
        return "\n".join(lines)


def _tail(mark: Mapping[str, Any]) -> str:
    parts = [mark.get("status", "").replace("_", " "), mark.get("detail", "")]
    return " · ".join(p for p in parts if p)
