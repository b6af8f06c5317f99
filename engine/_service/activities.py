"""Activity state transitions: schedule, dispatch, complete, fail, retry, time out, cancel.

Retries happen here, inside the service, as in Temporal: between attempts nothing is
written to history; the final attempt's ``ActivityTaskStarted`` carries its attempt number
and the previous failure. Every attempt is also kept in ``dn_activity_attempts``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from .._ids import random_uuid
from .._json import loads as json_loads
from .._model import commands as cmd
from .._store.schema import ACT_BACKOFF, ACT_SCHEDULED, ACT_STARTED
from .._store.tx import Row, StoreTx
from ..common import RetryPolicy, duration_to_json
from ..exceptions import ActivityNotFoundError, RetryState, TimeoutType
from .state import (
    TIMER_HORIZON,
    TIMERS_CHANNEL,
    RunState,
    activity_channel,
    add_timer,
    dumps,
    task_queue_json,
)
from .types import ActivityTask

JsonDict = dict[str, Any]

PER_ATTEMPT_TIMERS = ("act_start_to_close", "act_heartbeat")
ALL_ACTIVITY_TIMERS = (
    "act_start_to_close",
    "act_heartbeat",
    "act_schedule_to_start",
    "act_schedule_to_close",
    "act_retry",
)


def _dur(seconds: float | None) -> str:
    return duration_to_json(seconds or 0.0)


def schedule(
    rs: RunState, c: cmd.ScheduleActivityTask, wtc: str, start_for: str | None = None
) -> ActivityTask | None:
    """Record ActivityTaskScheduled and queue the first attempt.

    With ``start_for`` (a worker identity), the first attempt is started for that worker at
    once (eager dispatch) and returned, instead of waiting in the queue.
    """
    start_to_close = c.start_to_close or c.schedule_to_close
    schedule_to_start = c.schedule_to_start or c.schedule_to_close
    attrs: JsonDict = {
        "activityId": c.activity_id,
        "activityType": {"name": c.activity_type},
        "taskQueue": task_queue_json(c.task_queue),
        "header": {},
        "input": {"payloads": c.input},
        "scheduleToCloseTimeout": _dur(c.schedule_to_close),
        "scheduleToStartTimeout": _dur(schedule_to_start),
        "startToCloseTimeout": _dur(start_to_close),
        "heartbeatTimeout": _dur(c.heartbeat_timeout),
        "workflowTaskCompletedEventId": wtc,
        "retryPolicy": c.retry_policy,
    }
    sched = rs.add_event("ActivityTaskScheduled", attrs, user_metadata=c.user_metadata)
    c.scheduled_event_id = sched
    now = rs.now
    values: dict[str, Any] = dict(
        run_id=rs.run_id,
        scheduled_event_id=sched,
        namespace=rs.namespace,
        workflow_id=rs.workflow_id,
        workflow_type=rs.row.workflow_type,
        activity_id=c.activity_id,
        activity_type=c.activity_type,
        task_queue=c.task_queue,
        input=dumps(c.input),
        state=ACT_SCHEDULED,
        attempt=1,
        visible_at=now,
        scheduled_time=now,
        attempt_scheduled_time=now,
        started_time=None,
        identity=None,
        request_id=None,
        schedule_to_close=c.schedule_to_close,
        schedule_to_start=schedule_to_start,
        start_to_close=start_to_close,
        heartbeat_timeout=c.heartbeat_timeout,
        retry_policy=dumps(c.retry_policy),
        heartbeat_details=None,
        last_heartbeat_time=None,
        last_failure=None,
        cancel_requested=False,
        timeout_at=None,
    )
    started: ActivityTask | None = None
    if start_for is not None:
        # Written as started straight away: one insert instead of insert, read, update.
        values.update(
            state=ACT_STARTED,
            started_time=now,
            identity=start_for,
            timeout_at=now + start_to_close if start_to_close else None,
        )
        values["request_id"] = random_uuid()
        rs.tx.insert_activity_task(**values)
        started = start_attempt(
            rs.tx, SimpleNamespace(**values), start_for, now, marked=True, payloads=c.input
        )
    else:
        rs.tx.insert_activity_task(**values)
    if c.schedule_to_close:
        add_timer(
            rs.tx,
            rs.now,
            rs.run_id,
            "act_schedule_to_close",
            sched,
            1,
            now + c.schedule_to_close,
            None,
        )
    if schedule_to_start and started is None:
        add_timer(
            rs.tx,
            rs.now,
            rs.run_id,
            "act_schedule_to_start",
            sched,
            1,
            now + schedule_to_start,
            None,
        )
    if started is None:
        rs.tx.wake(activity_channel(rs.namespace, c.task_queue))
    return started


def request_cancel(rs: RunState, c: cmd.RequestCancelActivityTask, wtc: str, identity: str) -> None:
    """Record the cancel request; an activity not yet running is cancelled at once."""
    requested = rs.add_event(
        "ActivityTaskCancelRequested",
        {"scheduledEventId": str(c.scheduled_event_id), "workflowTaskCompletedEventId": wtc},
    )
    act = rs.tx.get_activity_task(rs.run_id, c.scheduled_event_id)
    if act is None:
        return
    if act.state == ACT_STARTED:
        # Only a heartbeat can tell the running attempt; the worker reports back.
        rs.tx.update_activity_task(rs.run_id, c.scheduled_event_id, cancel_requested=True)
        return
    rs.add_event(
        "ActivityTaskCanceled",
        {
            "latestCancelRequestedEventId": str(requested),
            "scheduledEventId": str(c.scheduled_event_id),
            "identity": identity,
        },
    )
    _forget(rs, act)
    rs.wft_wanted = True


def _forget(rs: RunState, act: Row) -> None:
    rs.tx.delete_activity_task(rs.run_id, act.scheduled_event_id)
    if _may_have_timers(act):
        rs.tx.delete_timers(rs.run_id, ALL_ACTIVITY_TIMERS, act.scheduled_event_id)


def _may_have_timers(act: Row) -> bool:
    """Whether timer rows may exist for the activity. A started attempt whose only
    timeout is start-to-close has none: its deadline is on its own row (``timeout_at``),
    except for attempts started before migration 8 (a deadline but no ``timeout_at``)."""
    return bool(
        act.state != ACT_STARTED
        or act.schedule_to_close
        or act.heartbeat_timeout
        or (act.start_to_close and act.timeout_at is None)
    )


# -- dispatch -----------------------------------------------------------------------------


def claim(
    tx: StoreTx, namespace: str, task_queue: str, identity: str, now: float, limit: int
) -> list[ActivityTask]:
    """Start up to ``limit`` ready activity attempts of a queue."""
    tasks = []
    for act in tx.next_activity_tasks(namespace, task_queue, now, limit):
        tasks.append(start_attempt(tx, act, identity, now))
    return tasks


def start_attempt(
    tx: StoreTx,
    act: Row,
    identity: str,
    now: float,
    *,
    marked: bool = False,
    payloads: list[JsonDict] | None = None,
) -> ActivityTask:
    """Mark an attempt started (unless the row already says so), record it, and arm its
    timeouts. ``payloads``: the input, if at hand (else read from the row's JSON)."""
    deadline = now + act.start_to_close if act.start_to_close else None
    if marked:
        request_id = str(act.request_id)
    else:
        request_id = random_uuid()
        tx.update_activity_task(
            act.run_id,
            act.scheduled_event_id,
            state=ACT_STARTED,
            started_time=now,
            identity=identity,
            request_id=request_id,
            last_heartbeat_time=None,
            timeout_at=deadline,
        )
    if act.schedule_to_start and not marked:
        tx.delete_timers(act.run_id, ("act_schedule_to_start",), act.scheduled_event_id)
    tx.insert_attempt(
        run_id=act.run_id,
        scheduled_event_id=act.scheduled_event_id,
        attempt=act.attempt,
        activity_id=act.activity_id,
        activity_type=act.activity_type,
        identity=identity,
        scheduled_time=act.attempt_scheduled_time,
        started_time=now,
        ended_time=None,
        outcome="running",
        failure=None,
    )
    if deadline is not None and deadline <= now + TIMER_HORIZON:
        tx.wake(TIMERS_CHANNEL)  # the timer loop scans the deadline on the task row
    if act.heartbeat_timeout:
        add_timer(
            tx,
            now,
            act.run_id,
            "act_heartbeat",
            act.scheduled_event_id,
            act.attempt,
            now + act.heartbeat_timeout,
            None,
        )
    return ActivityTask(
        namespace=act.namespace,
        workflow_id=act.workflow_id,
        run_id=act.run_id,
        workflow_type=act.workflow_type,
        activity_id=act.activity_id,
        activity_type=act.activity_type,
        task_queue=act.task_queue,
        scheduled_event_id=act.scheduled_event_id,
        attempt=act.attempt,
        input=json_loads(act.input) if payloads is None else payloads,
        scheduled_time=act.scheduled_time,
        current_attempt_scheduled_time=act.attempt_scheduled_time,
        started_time=now,
        schedule_to_close=act.schedule_to_close,
        start_to_close=act.start_to_close,
        heartbeat_timeout=act.heartbeat_timeout,
        heartbeat_details=json_loads(act.heartbeat_details) if act.heartbeat_details else [],
        request_id=request_id,
        retry_policy=act.retry_policy or None,  # its JSON: read if the activity asks
    )


# -- outcomes -----------------------------------------------------------------------------


def current(rs: RunState, token: tuple[str, int, int]) -> Row:
    """The pending activity matching a started attempt's token."""
    _, sched, attempt = token
    act = rs.tx.get_activity_task(rs.run_id, sched)
    if act is None or act.attempt != attempt or act.state != ACT_STARTED:
        raise ActivityNotFoundError(
            f"activity attempt {attempt} of scheduled event {sched} in run {rs.run_id} is no "
            "longer current"
        )
    return act


def _started_event(rs: RunState, act: Row) -> int | None:
    attrs: JsonDict = {
        "scheduledEventId": str(act.scheduled_event_id),
        "identity": act.identity or "",
        "requestId": act.request_id or "",
        "attempt": int(act.attempt),
    }
    if act.last_failure:
        attrs["lastFailure"] = json_loads(act.last_failure)
    # Written when the activity closes, dated when its last attempt started (as Temporal).
    return rs.record("ActivityTaskStarted", attrs, act.started_time)


def _end_attempt(rs: RunState, act: Row, outcome: str, failure: JsonDict | None) -> None:
    rs.tx.end_attempt(
        rs.run_id,
        act.scheduled_event_id,
        act.attempt,
        ended_time=rs.now,
        outcome=outcome,
        failure=dumps(failure) if failure else None,
    )


def complete(rs: RunState, act: Row, result: list[JsonDict]) -> None:
    """The attempt succeeded: record Started + Completed."""
    started = _started_event(rs, act)
    rs.record(
        "ActivityTaskCompleted",
        {
            "result": {"payloads": result},
            "scheduledEventId": str(act.scheduled_event_id),
            "startedEventId": str(started or 0),
            "identity": act.identity or "",
        },
    )
    _end_attempt(rs, act, "completed", None)
    _forget(rs, act)


def canceled(rs: RunState, act: Row, details: list[JsonDict]) -> None:
    """The attempt stopped because cancellation was requested."""
    started = _started_event(rs, act)
    attrs: JsonDict = {}
    if details:
        attrs["details"] = {"payloads": details}
    requested = [
        e.event_id
        for e in rs.tx.events_of_type(rs.run_id, "ActivityTaskCancelRequested")
        if json_loads(e.attributes).get("scheduledEventId") == str(act.scheduled_event_id)
    ]
    if requested:
        attrs["latestCancelRequestedEventId"] = str(requested[-1])
    attrs["scheduledEventId"] = str(act.scheduled_event_id)
    attrs["startedEventId"] = str(started or 0)
    attrs["identity"] = act.identity or ""
    rs.record("ActivityTaskCanceled", attrs)
    _end_attempt(rs, act, "canceled", None)
    _forget(rs, act)


def failed(
    rs: RunState,
    act: Row,
    failure: JsonDict,
    *,
    timeout_type: TimeoutType | None = None,
) -> None:
    """The attempt failed or timed out: retry per policy, or record the final outcome."""
    policy = RetryPolicy.from_json(json_loads(act.retry_policy))
    info = failure.get("applicationFailureInfo") or {}
    error_type = info.get("type") if info else None
    if timeout_type is not None:
        error_type = None
    _end_attempt(rs, act, "timed_out" if timeout_type is not None else "failed", failure)

    state: RetryState
    server = failure.get("serverFailureInfo")
    if (
        info.get("nonRetryable")
        or (server is not None and server.get("nonRetryable"))
        or not policy.is_retryable(error_type)
    ):
        state = RetryState.NON_RETRYABLE_FAILURE
    elif act.cancel_requested:
        state = RetryState.CANCEL_REQUESTED
    elif policy.maximum_attempts and act.attempt >= policy.maximum_attempts:
        state = RetryState.MAXIMUM_ATTEMPTS_REACHED
    else:
        delay = policy.delay_for_attempt(act.attempt).total_seconds()
        explicit = info.get("nextRetryDelay")
        if explicit:
            from ..common import duration_from_json

            delay = duration_from_json(explicit).total_seconds()
        deadline = act.scheduled_time + act.schedule_to_close if act.schedule_to_close else None
        if deadline is not None and rs.now + delay >= deadline:
            state = RetryState.TIMEOUT
        else:
            _backoff(rs, act, failure, delay)
            return
    started = _started_event(rs, act)
    close: JsonDict
    if timeout_type is not None:
        close = {
            "failure": failure,
            "scheduledEventId": str(act.scheduled_event_id),
            "startedEventId": str(started or 0),
            "retryState": "RETRY_STATE_" + state.name,
        }
        rs.record("ActivityTaskTimedOut", close)
    else:
        close = {
            "failure": failure,
            "scheduledEventId": str(act.scheduled_event_id),
            "startedEventId": str(started or 0),
            "identity": act.identity or "",
            "retryState": "RETRY_STATE_" + state.name,
        }
        rs.record("ActivityTaskFailed", close)
    _forget(rs, act)


def _backoff(rs: RunState, act: Row, failure: JsonDict, delay: float) -> None:
    next_attempt = int(act.attempt) + 1
    visible = rs.now + delay
    rs.tx.update_activity_task(
        rs.run_id,
        act.scheduled_event_id,
        state=ACT_BACKOFF if delay > 0 else ACT_SCHEDULED,
        attempt=next_attempt,
        visible_at=visible,
        attempt_scheduled_time=visible,
        started_time=None,
        last_failure=dumps(failure),
        timeout_at=None,  # no deadline until the next attempt starts
    )
    rs.tx.delete_timers(rs.run_id, PER_ATTEMPT_TIMERS, act.scheduled_event_id)
    if delay > 0:
        add_timer(
            rs.tx,
            rs.now,
            rs.run_id,
            "act_retry",
            act.scheduled_event_id,
            next_attempt,
            visible,
            None,
        )
    else:
        rs.tx.wake(activity_channel(rs.namespace, act.task_queue))


def timeout_failure(timeout_type: TimeoutType, act: Row, cause: JsonDict | None = None) -> JsonDict:
    """Temporal's TimeoutFailure JSON for an activity timeout."""
    words = {
        TimeoutType.START_TO_CLOSE: "StartToClose",
        TimeoutType.SCHEDULE_TO_START: "ScheduleToStart",
        TimeoutType.SCHEDULE_TO_CLOSE: "ScheduleToClose",
        TimeoutType.HEARTBEAT: "Heartbeat",
    }
    info: JsonDict = {"timeoutType": "TIMEOUT_TYPE_" + timeout_type.name}
    if act.heartbeat_details:
        info["lastHeartbeatDetails"] = {"payloads": json_loads(act.heartbeat_details)}
    failure: JsonDict = {
        "message": f"activity {words[timeout_type]} timeout",
        "source": "Server",
        "timeoutFailureInfo": info,
    }
    if cause:
        failure["cause"] = cause
    return failure


def timed_out(rs: RunState, act: Row, timeout_type: TimeoutType) -> None:
    """A timeout timer fired for a current activity."""
    last = json_loads(act.last_failure) if act.last_failure else None
    if timeout_type in (TimeoutType.START_TO_CLOSE, TimeoutType.HEARTBEAT):
        failed(rs, act, timeout_failure(timeout_type, act), timeout_type=timeout_type)
        return
    # Schedule-to-start and schedule-to-close are final: never retried.
    if act.state == ACT_STARTED:
        _end_attempt(rs, act, "timed_out", timeout_failure(timeout_type, act))
        started = _started_event(rs, act)
    else:
        started = None
    rs.record(
        "ActivityTaskTimedOut",
        {
            "failure": timeout_failure(timeout_type, act, last),
            "scheduledEventId": str(act.scheduled_event_id),
            "startedEventId": str(started or 0),
            "retryState": "RETRY_STATE_"
            + (
                RetryState.NON_RETRYABLE_FAILURE.name
                if timeout_type == TimeoutType.SCHEDULE_TO_START
                else RetryState.TIMEOUT.name
            ),
        },
    )
    _forget(rs, act)


def heartbeat(
    tx: StoreTx, token: tuple[str, int, int], details: list[JsonDict] | None, now: float
) -> bool:
    """Record a heartbeat; return whether cancellation was requested.

    Raises :class:`ActivityNotFoundError` when the attempt is no longer current, which the
    worker turns into a cancellation of the attempt.
    """
    run_id, sched, attempt = token
    act = tx.get_activity_task(run_id, sched)
    if act is None or act.attempt != attempt or act.state != ACT_STARTED:
        raise ActivityNotFoundError(f"activity attempt {attempt} of event {sched} is gone")
    values: dict[str, Any] = {"last_heartbeat_time": now}
    if details is not None:
        values["heartbeat_details"] = dumps(details)
    tx.update_activity_task(run_id, sched, **values)
    return bool(act.cancel_requested)
