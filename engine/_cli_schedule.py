"""``durable schedule list|describe|create|trigger|pause|unpause|backfill|delete``: schedules,
as ``temporal schedule ...`` (registered by :mod:`engine.cli`).

The flags are Temporal's CLI's where they fit (``-s/--schedule-id``, ``--interval 5m/1m``,
``--cron``, ``--calendar JSON``, ``--overlap-policy BufferOne``, ...). ``describe`` shows
what Temporal's does and the action log besides: every action time and what became of it,
skipped and missed ones with their reason (the newest 2,000 per schedule are kept). Every bad value is refused naming its flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from ._model.schedules import ScheduleOverlapPolicy
from ._service.visibility import parse_go_duration
from .client import (
    Client,
    Schedule,
    ScheduleActionLogEntry,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleListDescription,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from .converter import Payload
from .exceptions import ScheduleAlreadyRunningError

#: How many of the action log's last rows ``describe`` shows by default.
LOG_ROWS = 20

_POLICY_NAMES = "Skip, BufferOne, BufferAll, CancelOther, TerminateOther, AllowAll"

_HOSTING = (
    "This command only records the schedule in the database: its actions are taken by "
    "a process hosting the service's background duties on the same database (the "
    "Jupyter server extension, any running Worker, or a program that called "
    "client.start_service()). trigger and backfill take their actions at once."
)


def add_schedule_commands(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]  # argparse's own type
    common: argparse.ArgumentParser,
) -> None:
    """Add ``durable schedule ...``."""
    group = commands.add_parser(
        "schedule",
        parents=[common],
        help="create, inspect, trigger, pause, backfill and delete schedules",
        description="Schedules start a workflow at the times of their spec. Under the "
        "default overlap policy (Skip) an action that comes while the previous run is still "
        "open is skipped: 'describe' shows each skipped and missed action with its reason.",
    )
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    def command(name: str, help_text: str, **kw: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, parents=[common], help=help_text, **kw)
        if name != "list":
            p.add_argument("--schedule-id", "-s", required=True, help="the schedule id")
        return p

    p = command("list", "the namespace's schedules, by id")
    p.add_argument(
        "--query",
        "-q",
        help="a List Filter over ScheduleId, TemporalSchedulePaused and the schedules' custom "
        'search attributes, e.g. "TemporalSchedulePaused = true"',
    )
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.set_defaults(func=_cmd_list)

    p = command("describe", "spec, policy, state, counters, upcoming actions and the action log")
    p.add_argument("--output", "-o", choices=["text", "json"], default="text")
    p.add_argument(
        "--log-rows",
        type=int,
        default=LOG_ROWS,
        metavar="N",
        help=f"how many of the action log's last rows to show ({LOG_ROWS}; 0: none)",
    )
    p.set_defaults(func=_cmd_describe)

    p = command("create", "create a schedule (see the note on hosting below)", epilog=_HOSTING)
    p.add_argument("--workflow-id", required=True, help="each run's id is this plus its time")
    p.add_argument("--type", "-t", required=True, help="the workflow type name")
    p.add_argument("--task-queue", required=True, help="the task queue its workers poll")
    p.add_argument(
        "--input", "-i", action="extend", nargs="+", metavar="JSON", help="an argument as JSON"
    )
    _spec_flags(p)
    p.add_argument("--overlap-policy", metavar="POLICY", help=f"{_POLICY_NAMES} (default: Skip)")
    p.add_argument(
        "--catchup-window", metavar="DURATION", help="how late an action may still be taken"
    )
    p.add_argument("--pause-on-failure", action="store_true", help="pause when a run fails")
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.add_argument("--notes", help="the state's note")
    p.add_argument(
        "--remaining-actions",
        type=int,
        metavar="N",
        help="take only N more actions (0 or not given: no limit)",
    )
    p.set_defaults(func=_cmd_create)

    p = command("trigger", "take an action now (even while paused)")
    p.add_argument("--overlap-policy", metavar="POLICY", help="instead of the schedule's")
    p.set_defaults(func=_cmd_trigger)

    p = command("backfill", "take the action times of a past period as if they were now")
    p.add_argument("--start-time", required=True, metavar="TIME", help="RFC 3339 (inclusive)")
    p.add_argument("--end-time", required=True, metavar="TIME", help="RFC 3339 (inclusive)")
    p.add_argument("--overlap-policy", metavar="POLICY", help="instead of the schedule's")
    p.set_defaults(func=_cmd_backfill)

    for name, verb in (("pause", "pause"), ("unpause", "unpause")):
        p = command(name, f"{verb} the schedule")
        p.add_argument("--reason", default="(no reason provided)", help="the note it keeps")
        p.set_defaults(func=_cmd_pause, pause=name == "pause")

    p = command("delete", "delete the schedule (the runs it started go on)")
    p.set_defaults(func=_cmd_delete)


def _spec_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--interval",
        action="append",
        default=[],
        metavar="EVERY[/OFFSET]",
        help="every this long (5m, 1h30m, 2d), optionally shifted: 1d/2h (repeatable)",
    )
    p.add_argument(
        "--cron",
        action="append",
        default=[],
        metavar="EXPR",
        help="a cron string, '0 12 * * MON-FRI', '@daily', 'CRON_TZ=Europe/Paris 0 9 * * *' "
        "(repeatable)",
    )
    p.add_argument(
        "--calendar",
        action="append",
        default=[],
        metavar="JSON",
        help='a calendar, e.g. \'{"dayOfWeek": "Fri", "hour": 17, "minute": "0,30"}\' '
        "(repeatable; fields second, minute, hour, dayOfMonth, month, year, dayOfWeek, "
        "comment; missing ones as Temporal: 0 for times, every day)",
    )
    p.add_argument("--start-time", metavar="TIME", help="no action before (RFC 3339)")
    p.add_argument("--end-time", metavar="TIME", help="no action after (RFC 3339)")
    p.add_argument("--jitter", metavar="DURATION", help="move each action later by up to this")
    p.add_argument("--time-zone", metavar="ZONE", help="IANA zone for calendars and crons")


# -- parsing flags ----------------------------------------------------------------------


def _error(message: str) -> Exception:
    from .cli import CommandError

    return CommandError(message)


def _duration(text: str, flag: str, *, zero: bool = False) -> timedelta:
    value = text.strip()
    seconds: float | None = None
    days = re.fullmatch(r"(\d+(?:\.\d+)?)d(.*)", value)
    if days:
        rest = parse_go_duration(days[2]) if days[2] else 0.0
        seconds = None if rest is None else float(days[1]) * 86400 + rest
    else:
        seconds = parse_go_duration(value)
    if seconds is None:
        raise _error(f"{flag} {text!r} is not a duration: give e.g. 30s, 5m, 1h30m or 2d")
    if seconds < 0 or (seconds == 0 and not zero):
        raise _error(f"{flag} {text!r} must be {'at least 0' if zero else 'more than 0'}")
    return timedelta(seconds=seconds)


def _interval(text: str) -> ScheduleIntervalSpec:
    every, sep, offset = text.partition("/")
    spec = ScheduleIntervalSpec(every=_duration(every, "--interval"))
    if sep:
        spec.offset = _duration(offset, "--interval (its offset, after /)", zero=True)
    return spec


def _time(text: str, flag: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise _error(
            f"{flag} {text!r} is not an RFC 3339 time with a zone: give e.g. "
            "2026-12-01T09:00:00Z or 2026-12-01T10:00:00+01:00"
        )
    return value.astimezone(UTC)


def _overlap(text: str | None, flag: str = "--overlap-policy") -> ScheduleOverlapPolicy | None:
    if text is None:
        return None
    wanted = re.sub(r"[\s_-]", "", text).lower()
    for policy in ScheduleOverlapPolicy:
        if policy.name.replace("_", "").lower() == wanted:
            return policy
    raise _error(f"{flag} {text!r} is not an overlap policy: give one of {_POLICY_NAMES}")


#: (lowest, highest) of each calendar field; names for months and days of the week.
_BOUNDS = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day_of_month": (1, 31),
    "month": (1, 12),
    "year": (1970, 9999),
    "day_of_week": (0, 6),
}
_NAMES = {
    "month": {
        m: i + 1
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        )
    },
    "day_of_week": {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
}


def _calendar_value(field: str, item: str, where: str) -> int:
    text = item.strip().lower()
    names = _NAMES.get(field, {})
    if text[:3] in names and text.isalpha():
        return names[text[:3]]
    if not text.isdigit():
        raise _error(f"{where}: {item!r} is not a number" + (" or a name" if names else ""))
    return int(text)


def _calendar_ranges(field: str, value: Any, where: str) -> list[ScheduleRange]:
    low, high = _BOUNDS[field]
    if isinstance(value, bool):
        raise _error(f"{where}: {value!r} is not a value")
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                try:
                    out.append(ScheduleRange(**item))
                except TypeError:
                    raise _error(f"{where}[{i}]: a range has start, end and step") from None
            else:
                out.extend(_calendar_ranges(field, item, f"{where}[{i}]"))
        return out
    if not isinstance(value, str) or not value.strip():
        raise _error(f"{where}: give a number, a string such as '1-5' or '*/15', or a list")
    out = []
    for part in value.split(","):
        span, _, step = part.partition("/")
        if span.strip() == "*" and field == "year":
            continue  # no year range: every year
        if span.strip() == "*":
            start, end = low, high
        else:
            first, dash, last = span.partition("-")
            start = _calendar_value(field, first, where)
            # "5/15" runs from 5 to the field's end, as in cron.
            end = _calendar_value(field, last, where) if dash else (high if step else start)
        if not low <= start <= high or not low <= end <= high:
            raise _error(f"{where}: {part.strip()!r} is outside {low}-{high}")
        if end < start:
            raise _error(
                f"{where}: {part.strip()!r} ends before it starts: write it as two ranges "
                f"('{start}-{high},{low}-{end}')"
            )
        if step and not step.strip().isdigit():
            raise _error(f"{where}: the step in {part.strip()!r} is not a number")
        out.append(ScheduleRange(start, end, int(step) if step else 0))
    return out


def _calendar(text: str, index: int) -> ScheduleCalendarSpec:
    from .cli import _parse_json_inputs

    [raw] = _parse_json_inputs([text], "--calendar")
    if not isinstance(raw, dict):
        raise _error(f"--calendar {text[:100]!r} must be a JSON object")
    cal = ScheduleCalendarSpec()
    for key, value in raw.items():
        field = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
        where = f"--calendar #{index + 1} {key}"
        if field == "comment":
            cal.comment = str(value)
        elif field in _BOUNDS:
            setattr(cal, field, _calendar_ranges(field, value, where))
        else:
            raise _error(
                f"--calendar #{index + 1}: unknown field {key!r} (second, minute, hour, "
                "dayOfMonth, month, year, dayOfWeek, comment)"
            )
    return cal


def _spec(args: argparse.Namespace) -> ScheduleSpec:
    return ScheduleSpec(
        intervals=[_interval(t) for t in args.interval],
        cron_expressions=list(args.cron),
        calendars=[_calendar(t, i) for i, t in enumerate(args.calendar)],
        start_at=_time(args.start_time, "--start-time") if args.start_time else None,
        end_at=_time(args.end_time, "--end-time") if args.end_time else None,
        jitter=_duration(args.jitter, "--jitter", zero=True) if args.jitter else None,
        time_zone_name=args.time_zone or None,
    )


def _with(args: argparse.Namespace, fn: Callable[[Client], Awaitable[Any]], **kw: Any) -> Any:
    from .cli import _with_client

    return _with_client(args.db, fn, namespace=args.namespace, **kw)


# -- plain values (JSON output) ---------------------------------------------------------


def plain(value: Any, converter: Any = None) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, times in ISO 8601, durations
    in seconds, enums by name, payloads decoded with ``converter``."""
    if isinstance(value, Payload):
        try:
            return plain(converter.from_payload(value), converter)
        except Exception:
            return "(encoded)"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), converter) for f in dataclasses.fields(value)}
    if isinstance(value, ScheduleActionStartWorkflow):
        return {k: plain(v, converter) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {str(k): plain(v, converter) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, converter) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# -- text output ------------------------------------------------------------------------


def _seconds_text(value: timedelta | None) -> str:
    if value is None:
        return "-"
    total = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total >= size and total % size == 0:
            return f"{total / size:g}{unit}"
    return f"{total:g}s"


def _ranges_text(ranges: Sequence[ScheduleRange]) -> str:
    parts = []
    for r in ranges:
        text = str(r.start) if r.end == r.start else f"{r.start}-{r.end}"
        parts.append(text + (f"/{r.step}" if r.step != 1 else ""))
    return ",".join(parts) or "*"


def _calendar_text(cal: ScheduleCalendarSpec) -> str:
    fields = ("second", "minute", "hour", "day_of_month", "month", "year", "day_of_week")
    text = " ".join(f"{f}={_ranges_text(getattr(cal, f))}" for f in fields)
    return text + (f" ({cal.comment})" if cal.comment else "")


def _spec_lines(spec: ScheduleSpec) -> list[str]:
    lines = [
        f"  Interval      every {_seconds_text(i.every)}"
        + (f", offset {_seconds_text(i.offset)}" if i.offset else "")
        for i in spec.intervals
    ]
    lines += [f"  Cron          {c}" for c in spec.cron_expressions]
    lines += [f"  Calendar      {_calendar_text(c)}" for c in spec.calendars]
    lines += [f"  Skip          {_calendar_text(c)}" for c in spec.skip]
    from .cli import _time as time_text

    for label, value in (
        ("Start time", time_text(spec.start_at) if spec.start_at else None),
        ("End time", time_text(spec.end_at) if spec.end_at else None),
        ("Jitter", _seconds_text(spec.jitter) if spec.jitter else None),
        ("Time zone", spec.time_zone_name),
    ):
        if value:
            lines.append(f"  {label:<14}{value}")
    return lines or ["  (none: only triggers and backfills take actions)"]


def _policy_name(policy: ScheduleOverlapPolicy | int) -> str:
    name = ScheduleOverlapPolicy(int(policy)).name
    return "".join(w.capitalize() for w in name.split("_"))


def _log_rows(log: Sequence[ScheduleActionLogEntry]) -> list[list[str]]:
    from .cli import _time as time_text

    return [
        [
            time_text(e.nominal_time),
            e.outcome,
            e.source,
            _policy_name(e.overlap),
            e.workflow_id or "-",
            e.detail or "",
        ]
        for e in log
    ]


def _describe_text(d: ScheduleDescription, log: Sequence[ScheduleActionLogEntry]) -> list[str]:
    from .cli import _table
    from .cli import _time as time_text

    sched, info = d.schedule, d.info
    action = sched.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    policy, state = sched.policy, sched.state
    converter = d.data_converter
    args = json.dumps(plain(list(action.args), converter), default=str)
    lines = [
        f"Schedule ID:    {d.id}",
        f"Workflow:       {action.workflow} (id {action.id}, task queue {action.task_queue})",
        f"Input:          {args}",
        "Spec:",
        *_spec_lines(sched.spec),
        f"Overlap policy: {_policy_name(policy.overlap)}",
        "Catch-up window: "
        + (_seconds_text(policy.catchup_window) if policy.catchup_window else "1 year (default)"),
        f"Pause on failure: {'yes' if policy.pause_on_failure else 'no'}",
        f"State:          {'PAUSED' if state.paused else 'active'}"
        + (f" ({state.note})" if state.note else ""),
    ]
    if state.limited_actions:
        lines.append(f"Remaining actions: {state.remaining_actions}")
    if info.invalid_schedule_error:
        lines.append(f"INVALID SPEC:   {info.invalid_schedule_error}")
    lines += [
        f"Created:        {time_text(info.created_at)}",
        f"Updated:        {time_text(info.last_updated_at) if info.last_updated_at else '-'}",
        f"Actions taken:  {info.num_actions}",
        f"Skipped (overlap): {info.num_actions_skipped_overlap}",
        f"Missed (catch-up window): {info.num_actions_missed_catchup_window}",
        f"Running actions: {len(info.running_actions)}",
        *(f"  {getattr(r, 'workflow_id', r)}" for r in info.running_actions),
        f"Recent actions: {len(info.recent_actions)}",
        *(
            f"  {time_text(r.scheduled_at)}  started {time_text(r.started_at)}  "
            f"{getattr(r.action, 'workflow_id', '')}  run {getattr(r.action, 'first_execution_run_id', '')}"
            for r in info.recent_actions
        ),
        f"Next action times: {len(info.next_action_times)}",
        *(f"  {time_text(t)}" for t in info.next_action_times),
        f"Buffered starts: {len(info.buffered_actions)}",
        *(f"  {time_text(t)}" for t in info.buffered_actions),
    ]
    if log:
        lines.append(f"Action log (last {len(log)}):")
        headers = ["NOMINAL TIME", "OUTCOME", "SOURCE", "OVERLAP", "WORKFLOW ID", "DETAIL"]
        lines += ["  " + line for line in _table(headers, _log_rows(log), 60).splitlines()]
    else:
        lines.append("Action log: empty")
    return lines


# -- commands ---------------------------------------------------------------------------


async def _last_log(client: Client, schedule_id: str, rows: int) -> list[ScheduleActionLogEntry]:
    """The last ``rows`` entries of the action log, oldest first."""
    if rows <= 0:
        return []
    return await client.get_schedule_handle(schedule_id).actions(limit=rows, newest=True)


def _cmd_describe(args: argparse.Namespace) -> int:
    from .cli import _out

    if args.log_rows < 0:
        raise _error(f"--log-rows must be at least 0 (got {args.log_rows})")

    async def fetch(client: Client) -> tuple[ScheduleDescription, list[ScheduleActionLogEntry]]:
        description = await client.get_schedule_handle(args.schedule_id).describe()
        return description, await _last_log(client, args.schedule_id, args.log_rows)

    d, log = _with(args, fetch)
    if args.output == "json":
        out = {
            "id": d.id,
            "schedule": plain(d.schedule, d.data_converter),
            "info": plain(d.info),
            "search_attributes": plain(d.search_attributes),
            "action_log": [plain(e) for e in log],
        }
        _out(json.dumps(out, indent=2))
    else:
        _out("\n".join(_describe_text(d, log)))
    return 0


def _list_json(e: ScheduleListDescription) -> dict[str, Any]:
    sched, info = e.schedule, e.info
    return {
        "id": e.id,
        "workflow_type": getattr(sched.action, "workflow", None) if sched else None,
        "paused": sched.state.paused if sched else None,
        "note": sched.state.note if sched else None,
        "spec": plain(sched.spec) if sched else None,
        "recent_actions": plain(info.recent_actions) if info else [],
        "next_action_times": plain(info.next_action_times) if info else [],
        "search_attributes": plain(e.search_attributes),
    }


def _cmd_list(args: argparse.Namespace) -> int:
    from .cli import _err, _out, _table
    from .cli import _time as time_text

    async def fetch(client: Client) -> list[ScheduleListDescription]:
        return [e async for e in await client.list_schedules(args.query)]

    entries = _with(args, fetch)
    if args.output == "json":
        _out(json.dumps([_list_json(e) for e in entries], indent=2))
        return 0
    rows = []
    for e in entries:
        item = _list_json(e)
        recent = e.info.recent_actions if e.info else []
        upcoming = e.info.next_action_times if e.info else []
        rows.append(
            [
                e.id,
                str(item["workflow_type"] or "-"),
                "PAUSED" if item["paused"] else "active",
                time_text(recent[-1].scheduled_at) if recent else "-",
                time_text(upcoming[0]) if upcoming else "-",
                str(item["note"] or ""),
            ]
        )
    headers = ["SCHEDULE ID", "WORKFLOW TYPE", "STATE", "LAST ACTION", "NEXT ACTION", "NOTE"]
    _out(_table(headers, rows))
    if not entries:
        _err("no schedules" + (f" match {args.query!r}" if args.query else ""))
    return 0


def _cmd_create(args: argparse.Namespace) -> int:
    from .cli import _out, _parse_json_inputs
    from .cli import _time as time_text

    inputs = _parse_json_inputs(args.input, "--input")
    remaining = args.remaining_actions
    if remaining is not None and remaining < 0:
        raise _error(f"--remaining-actions must be at least 0 (got {remaining})")
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            args.type, args=inputs, id=args.workflow_id, task_queue=args.task_queue
        ),
        spec=_spec(args),
        policy=SchedulePolicy(
            overlap=_overlap(args.overlap_policy) or ScheduleOverlapPolicy.SKIP,
            catchup_window=_duration(args.catchup_window, "--catchup-window")
            if args.catchup_window
            else None,
            pause_on_failure=args.pause_on_failure,
        ),
        state=ScheduleState(
            note=args.notes,
            paused=args.paused,
            limited_actions=bool(remaining),
            remaining_actions=remaining or 0,
        ),
    )

    async def create(client: Client) -> ScheduleDescription:
        try:
            handle = await client.create_schedule(args.schedule_id, schedule)
        except ScheduleAlreadyRunningError:
            raise _error(
                f"--schedule-id {args.schedule_id!r}: a schedule with this id exists already "
                "(Schedule already running): delete it first, or give another id"
            ) from None
        return await handle.describe()

    d = _with(args, create, must_exist=False)
    upcoming = d.info.next_action_times
    _out(f"Created schedule {d.id} (workflow {args.type}, task queue {args.task_queue})")
    spec = args.interval or args.cron or args.calendar
    none = "none" if spec else "none (no --interval, --cron or --calendar: only triggers)"
    _out("Next action: " + (time_text(upcoming[0]) if upcoming else none))
    _out("Actions are taken by a process hosting the service (a Worker, the Jupyter server).")
    return 0


def _cmd_trigger(args: argparse.Namespace) -> int:
    from .cli import _out

    overlap = _overlap(args.overlap_policy)

    async def run(client: Client) -> tuple[list[ScheduleActionLogEntry], int]:
        handle = client.get_schedule_handle(args.schedule_id)
        before = await _last_log(client, args.schedule_id, 1)
        waiting = len((await handle.describe()).info.buffered_actions)
        await handle.trigger(overlap=overlap)
        added = await handle.actions(after=before[-1].id if before else 0, limit=1000)
        buffered = len((await handle.describe()).info.buffered_actions) - waiting
        return [e for e in added if e.source == "trigger"], buffered

    added, buffered = _with(args, run)
    if added:  # what became of it, said: a skipped trigger must not look like a done one
        outcome = added[-1]
        what = outcome.outcome.replace("_", " ")
        detail = f" ({outcome.detail})" if outcome.detail else ""
        run_id = f": {outcome.workflow_id}" if outcome.outcome == "started" else ""
        _out(f"Triggered schedule {args.schedule_id}: {what}{run_id}{detail}")
    elif buffered > 0:
        _out(
            f"Triggered schedule {args.schedule_id}: buffered (it starts when the open run closes)"
        )
    else:
        _out(f"Triggered schedule {args.schedule_id}")
    return 0


def _cmd_backfill(args: argparse.Namespace) -> int:
    from .cli import _out

    start = _time(args.start_time, "--start-time")
    end = _time(args.end_time, "--end-time")
    if end < start:
        raise _error("--end-time must not be before --start-time")
    backfill = ScheduleBackfill(start, end, _overlap(args.overlap_policy))

    async def run(client: Client) -> tuple[list[ScheduleActionLogEntry], int]:
        handle = client.get_schedule_handle(args.schedule_id)
        before = await _last_log(client, args.schedule_id, 1)
        waiting = len((await handle.describe()).info.buffered_actions)
        await handle.backfill(backfill)
        added = await handle.actions(after=before[-1].id if before else 0, limit=100_000)
        buffered = len((await handle.describe()).info.buffered_actions) - waiting
        return [e for e in added if e.source == "backfill"], buffered

    added, buffered = _with(args, run)
    counts: dict[str, int] = {}
    for e in added:
        counts[e.outcome] = counts.get(e.outcome, 0) + 1
    if buffered > 0:
        counts["buffered"] = buffered
    summary = ", ".join(f"{n} {o}" for o, n in counts.items()) or "no action times in it"
    _out(f"Backfilled schedule {args.schedule_id}: {summary}")
    return 0


def _cmd_pause(args: argparse.Namespace) -> int:
    from .cli import _out

    async def toggle(client: Client) -> None:
        handle = client.get_schedule_handle(args.schedule_id)
        if args.pause:
            await handle.pause(note=args.reason)
        else:
            await handle.unpause(note=args.reason)

    _with(args, toggle)
    _out(f"{'Paused' if args.pause else 'Unpaused'} schedule {args.schedule_id}")
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    from .cli import _out

    _with(args, lambda c: c.get_schedule_handle(args.schedule_id).delete())
    _out(f"Deleted schedule {args.schedule_id} (the runs it started go on)")
    return 0
