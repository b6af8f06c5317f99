"""Schedules between the client's classes (``engine._schedule_types``) and the service's
JSON (``engine._service.schedule_pass``), both ways; types are checked on the way in, each
wrong field named.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._model.schedule_spec import CALENDAR_FIELDS, ScheduleSpecError
from ._model.schedules import (
    LISTED_RECENT_ACTION_COUNT,
    RECENT_ACTION_COUNT,
    ScheduleOverlapPolicy,
)
from ._schedule_types import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleInfo,
    ScheduleIntervalSpec,
    ScheduleListActionStartWorkflow,
    ScheduleListDescription,
    ScheduleListInfo,
    ScheduleListSchedule,
    ScheduleListState,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from ._search_attributes import decode as decode_search_attributes
from ._search_attributes import decode_typed
from ._search_attributes import encode as encode_search_attributes
from ._service.schedules import Backfill, ScheduleRecord
from .common import (
    RetryPolicy,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from .converter import Payload
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:
    from .client import Client

JsonDict = dict[str, Any]

_CAL_FIELDS = CALENDAR_FIELDS


# -- to the service's JSON ------------------------------------------------------------------


def _epoch(value: datetime | None, name: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgumentError(f"{name} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None:  # as temporalio's protobuf conversion: a naive time is UTC
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _seconds(value: timedelta | None, name: str, *, required: bool = False) -> float | None:
    if value is None:
        if required:
            raise InvalidArgumentError(f"{name} is required")
        return None
    if not isinstance(value, timedelta):
        raise InvalidArgumentError(f"{name} must be a timedelta, not {type(value).__name__}")
    return value.total_seconds()


def _ranges(values: Sequence[ScheduleRange], name: str) -> list[list[int]]:
    out = []
    for i, r in enumerate(values):
        if not isinstance(r, ScheduleRange):
            raise InvalidArgumentError(
                f"{name}[{i}] must be a ScheduleRange, not {type(r).__name__}"
            )
        out.append([int(r.start), int(r.end), int(r.step)])
    return out


def _calendar_json(cal: ScheduleCalendarSpec, name: str) -> JsonDict:
    if not isinstance(cal, ScheduleCalendarSpec):
        raise InvalidArgumentError(
            f"{name} must be a ScheduleCalendarSpec, not {type(cal).__name__}"
        )
    out: JsonDict = {f: _ranges(getattr(cal, f), f"{name}.{f}") for f in _CAL_FIELDS}
    out["comment"] = cal.comment or ""
    return out


def spec_json(spec: ScheduleSpec) -> JsonDict:
    """A :class:`ScheduleSpec` as the service's JSON (types checked, fields named)."""
    if not isinstance(spec, ScheduleSpec):
        raise InvalidArgumentError(
            f"Schedule.spec must be a ScheduleSpec, not {type(spec).__name__}"
        )
    intervals = []
    for i, iv in enumerate(spec.intervals):
        if not isinstance(iv, ScheduleIntervalSpec):
            raise InvalidArgumentError(
                f"ScheduleSpec.intervals[{i}] must be a ScheduleIntervalSpec, not "
                f"{type(iv).__name__}"
            )
        every = _seconds(iv.every, f"ScheduleSpec.intervals[{i}].every", required=True)
        if every is not None and every <= 0:
            raise ScheduleSpecError(
                f"interval is too small (ScheduleSpec.intervals[{i}].every is {iv.every}; "
                "it must be at least a second)"
            )
        offset = _seconds(iv.offset, f"ScheduleSpec.intervals[{i}].offset") or 0.0
        intervals.append({"every": every, "offset": offset})
    crons = []
    for i, cron in enumerate(spec.cron_expressions):
        if not isinstance(cron, str):
            raise InvalidArgumentError(
                f"ScheduleSpec.cron_expressions[{i}] must be a string, not {type(cron).__name__}"
            )
        crons.append(cron)
    if isinstance(spec.cron_expressions, str):
        raise InvalidArgumentError(
            "ScheduleSpec.cron_expressions takes a list of strings, not one string"
        )
    zone = spec.time_zone_name
    if zone is not None and not isinstance(zone, str):
        raise InvalidArgumentError("ScheduleSpec.time_zone_name must be a string (IANA name)")
    return {
        "calendars": [
            _calendar_json(c, f"ScheduleSpec.calendars[{i}]") for i, c in enumerate(spec.calendars)
        ],
        "intervals": intervals,
        "cron": crons,
        "skip": [_calendar_json(c, f"ScheduleSpec.skip[{i}]") for i, c in enumerate(spec.skip)],
        "start_at": _epoch(spec.start_at, "ScheduleSpec.start_at"),
        "end_at": _epoch(spec.end_at, "ScheduleSpec.end_at"),
        "jitter": _seconds(spec.jitter, "ScheduleSpec.jitter") or 0.0,
        "time_zone": zone or "",
    }


def _payload_json(client: Client, value: Any) -> JsonDict:
    if isinstance(value, Payload):
        return value.to_json()
    return client.data_converter.to_payload(value).to_json()  # type: ignore[no-any-return]


def action_json(client: Client, action: Any) -> JsonDict:
    """A :class:`ScheduleActionStartWorkflow` as the service's JSON, encoded with the
    client's data converter and checked as ``start_workflow`` checks its options."""
    if not isinstance(action, ScheduleActionStartWorkflow):
        raise InvalidArgumentError(
            f"Schedule.action must be a ScheduleActionStartWorkflow, not {type(action).__name__}"
        )
    if action.retry_policy is not None and not isinstance(action.retry_policy, RetryPolicy):
        raise InvalidArgumentError("ScheduleActionStartWorkflow.retry_policy must be a RetryPolicy")
    request, _ = client._start_request(
        action.workflow,
        None,
        id=action.id,
        task_queue=action.task_queue,
        args=[],
        execution_timeout=action.execution_timeout,
        run_timeout=action.run_timeout,
        task_timeout=action.task_timeout,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.UNSPECIFIED,
        retry_policy=action.retry_policy,
        memo=None,
        start_delay=None,
        result_type=None,
        request_id=None,
        static_summary=action.static_summary,
        static_details=action.static_details,
        search_attributes=action.typed_search_attributes or None,
    )
    attributes = dict(request.search_attributes or {})
    for name, values in (action.untyped_search_attributes or {}).items():
        if name not in attributes:
            attributes.update(encode_search_attributes({name: values}))
    memo = {str(k): _payload_json(client, v) for k, v in (action.memo or {}).items()}
    return {
        "workflow_id": request.workflow_id,
        "workflow_type": request.workflow_type,
        "task_queue": request.task_queue,
        "input": [_payload_json(client, a) for a in action.args],
        "execution_timeout": request.execution_timeout,
        "run_timeout": request.run_timeout,
        "task_timeout": _seconds(action.task_timeout, "ScheduleActionStartWorkflow.task_timeout"),
        "retry_policy": request.retry_policy,
        "memo": {"fields": memo} if memo else None,
        "search_attributes": attributes or None,
        "user_metadata": request.user_metadata,
    }


def _overlap(value: Any, name: str) -> int:
    if value is None:
        return 0
    try:
        return int(ScheduleOverlapPolicy(int(value)))
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"{name} must be a ScheduleOverlapPolicy ({', '.join(p.name for p in ScheduleOverlapPolicy)}), "
            f"not {value!r}"
        ) from None


def definition_json(client: Client, schedule: Schedule) -> JsonDict:
    """A whole :class:`Schedule` as the service's JSON."""
    if not isinstance(schedule, Schedule):
        raise InvalidArgumentError(f"expected a Schedule, not {type(schedule).__name__}")
    policy = schedule.policy or SchedulePolicy()
    state = schedule.state or ScheduleState()
    window = _seconds(policy.catchup_window, "SchedulePolicy.catchup_window")
    if window is not None and window < 0:
        raise InvalidArgumentError("SchedulePolicy.catchup_window cannot be negative")
    if not isinstance(state.remaining_actions, int) or state.remaining_actions < 0:
        raise InvalidArgumentError("ScheduleState.remaining_actions must be a whole number >= 0")
    return {
        "spec": spec_json(schedule.spec),
        "action": action_json(client, schedule.action),
        "policies": {
            "overlap": _overlap(policy.overlap, "SchedulePolicy.overlap") or 1,
            "catchup_window": window,
            "pause_on_failure": bool(policy.pause_on_failure),
        },
        "state": {
            "note": state.note or "",
            "paused": bool(state.paused),
            "limited_actions": bool(state.limited_actions),
            "remaining_actions": int(state.remaining_actions),
        },
    }


def check_new_state(schedule: Schedule) -> None:
    """What ``temporalio``'s ``create_schedule`` checks of the state (its messages)."""
    state = schedule.state or ScheduleState()
    if state.limited_actions and not state.remaining_actions:
        raise InvalidArgumentError(
            "Must set limited actions to false if there are no remaining actions set"
        )
    if not state.limited_actions and state.remaining_actions:
        raise InvalidArgumentError(
            "Must set limited actions to true if there are remaining actions set"
        )


def backfills_of(backfills: Sequence[ScheduleBackfill]) -> tuple[Backfill, ...]:
    out = []
    for i, b in enumerate(backfills):
        if not isinstance(b, ScheduleBackfill):
            raise InvalidArgumentError(f"backfill[{i}] must be a ScheduleBackfill")
        start = _epoch(b.start_at, f"backfill[{i}].start_at")
        end = _epoch(b.end_at, f"backfill[{i}].end_at")
        assert start is not None and end is not None
        out.append(Backfill(start, end, _overlap(b.overlap, f"backfill[{i}].overlap")))
    return tuple(out)


# -- back from it --------------------------------------------------------------------------


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _calendar(c: JsonDict) -> ScheduleCalendarSpec:
    return ScheduleCalendarSpec(
        **{f: tuple(ScheduleRange(*r) for r in c.get(f, ())) for f in _CAL_FIELDS},
        comment=c.get("comment") or None,
    )


def spec_of(spec: JsonDict) -> ScheduleSpec:
    """The service's spec JSON as a :class:`ScheduleSpec`. Cron strings come back as the
    calendars and intervals they stand for, as Temporal's server describes them."""
    calendars = [_calendar(c) for c in spec.get("calendars", ())]
    intervals = [
        ScheduleIntervalSpec(
            timedelta(seconds=i["every"]),
            timedelta(seconds=i["offset"]) if i.get("offset") else None,
        )
        for i in spec.get("intervals", ())
    ]
    zone = spec.get("time_zone") or None
    if spec.get("cron"):
        from ._service.schedule_pass import compile_definition_spec

        compiled = compile_definition_spec({**spec, "calendars": [], "intervals": [], "skip": []})
        for cal in compiled.cron_calendars:
            calendars.append(
                ScheduleCalendarSpec(
                    **{
                        f: tuple(ScheduleRange(r.start, r.end, r.step) for r in getattr(cal, f))
                        for f in _CAL_FIELDS
                    },
                    comment=cal.comment or None,
                )
            )
        for iv in compiled.cron_intervals:
            intervals.append(
                ScheduleIntervalSpec(
                    timedelta(seconds=iv.every),
                    timedelta(seconds=iv.offset) if iv.offset else None,
                )
            )
        zone = zone or (compiled.zone.key if compiled.zone is not None else None)
    return ScheduleSpec(
        calendars=calendars,
        intervals=intervals,
        cron_expressions=[],
        skip=[_calendar(c) for c in spec.get("skip", ())],
        start_at=_dt(spec["start_at"]) if spec.get("start_at") is not None else None,
        end_at=_dt(spec["end_at"]) if spec.get("end_at") is not None else None,
        jitter=timedelta(seconds=spec["jitter"]) if spec.get("jitter") else None,
        time_zone_name=zone,
    )


def _td(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def action_of(action: JsonDict) -> ScheduleActionStartWorkflow:
    """The service's action JSON as a :class:`ScheduleActionStartWorkflow` (args and memo
    values as raw :class:`Payload` objects, as ``temporalio`` gives them)."""
    attributes = action.get("search_attributes") or {}
    typed = decode_typed(attributes)
    typed_names = {pair.key.name for pair in typed}
    untyped = {
        k: v for k, v in decode_search_attributes(attributes).items() if k not in typed_names
    }
    memo = (action.get("memo") or {}).get("fields") or None
    metadata = action.get("user_metadata") or {}
    out = ScheduleActionStartWorkflow(
        action["workflow_type"],
        args=[Payload.from_json(p) for p in action.get("input") or []],
        id=action["workflow_id"],
        task_queue=action["task_queue"],
        execution_timeout=_td(action.get("execution_timeout")),
        run_timeout=_td(action.get("run_timeout")),
        task_timeout=_td(action.get("task_timeout")),
        retry_policy=RetryPolicy.from_json(action["retry_policy"])
        if action.get("retry_policy")
        else None,
        memo={k: Payload.from_json(v) for k, v in memo.items()} if memo else None,
        typed_search_attributes=typed,
        untyped_search_attributes=untyped,
    )
    out.static_summary = _metadata_text(metadata.get("summary"))
    out.static_details = _metadata_text(metadata.get("details"))
    return out


def _metadata_text(payload: JsonDict | None) -> str | None:
    if not payload:
        return None
    from .converter import DataConverter

    value = DataConverter.default.from_payload(Payload.from_json(payload))
    return value if isinstance(value, str) else None


def schedule_of(definition: JsonDict) -> Schedule:
    """The service's definition JSON as a :class:`Schedule`."""
    policies = definition["policies"]
    state = definition["state"]
    return Schedule(
        action=action_of(definition["action"]),
        spec=spec_of(definition["spec"]),
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy(int(policies.get("overlap") or 1)),
            catchup_window=_td(policies.get("catchup_window")),
            pause_on_failure=bool(policies.get("pause_on_failure")),
        ),
        state=ScheduleState(
            note=state.get("note") or None,
            paused=bool(state.get("paused")),
            limited_actions=bool(state.get("limited_actions")),
            remaining_actions=int(state.get("remaining_actions") or 0),
        ),
    )


def _recent(info: JsonDict, count: int = RECENT_ACTION_COUNT) -> list[ScheduleActionResult]:
    return [
        ScheduleActionResult(
            scheduled_at=_dt(r["scheduled"]),
            started_at=_dt(r["started"]),
            action=ScheduleActionExecutionStartWorkflow(r["workflow_id"], r["run_id"]),
        )
        for r in list(info.get("recent", ()))[-count:]
    ]


def info_of(rec: ScheduleRecord) -> ScheduleInfo:
    """A record's state as :class:`ScheduleInfo`."""
    info = rec.info
    return ScheduleInfo(
        num_actions=int(info.get("num_actions", 0)),
        num_actions_missed_catchup_window=int(info.get("missed_catchup", 0)),
        num_actions_skipped_overlap=int(info.get("skipped_overlap", 0)),
        running_actions=[
            ScheduleActionExecutionStartWorkflow(r["workflow_id"], r["first_run_id"])
            for r in info.get("running", ())
        ],
        recent_actions=_recent(info),
        next_action_times=[_dt(t) for t in rec.next_action_times],
        created_at=_dt(rec.created_at),
        last_updated_at=_dt(rec.updated_at) if rec.updated_at is not None else None,
        buffered_actions=[_dt(b["nominal"]) for b in info.get("buffer", ())],
        invalid_schedule_error=rec.invalid_spec,
    )


def description_of(client: Client, rec: ScheduleRecord) -> ScheduleDescription:
    own = rec.search_attributes or {}
    return ScheduleDescription(
        id=rec.schedule_id,
        schedule=schedule_of(rec.definition),
        info=info_of(rec),
        typed_search_attributes=decode_typed(own),
        search_attributes=decode_search_attributes(own),
        data_converter=client.data_converter,
        raw_description=rec,
    )


def list_entry_of(client: Client, rec: ScheduleRecord) -> ScheduleListDescription:
    own = rec.search_attributes or {}
    state = rec.definition["state"]
    return ScheduleListDescription(
        id=rec.schedule_id,
        schedule=ScheduleListSchedule(
            action=ScheduleListActionStartWorkflow(rec.definition["action"]["workflow_type"]),
            spec=spec_of(rec.definition["spec"]),
            state=ScheduleListState(state.get("note") or None, bool(state.get("paused"))),
        ),
        info=ScheduleListInfo(
            recent_actions=_recent(rec.info, LISTED_RECENT_ACTION_COUNT),
            next_action_times=[_dt(t) for t in rec.next_action_times],
        ),
        typed_search_attributes=decode_typed(own),
        search_attributes=decode_search_attributes(own),
        data_converter=client.data_converter,
        raw_entry=rec,
    )
