"""Firing durable timers: user timers, workflow-task and activity timeouts, retry backoffs.

Timers are claimed one at a time inside a transaction that first locks the run, so two
hosts never fire the same timer twice (the loser finds it already deleted).
"""

from __future__ import annotations

import logging

from .._store.schema import ACT_BACKOFF, ACT_SCHEDULED, ACT_STARTED, WFT_STARTED
from .._store.tx import Row, StoreTx
from ..common import WorkflowExecutionStatus
from ..exceptions import TimeoutType
from . import activities
from .state import RunState, activity_channel, add_timer, wft_channel

log = logging.getLogger("engine.service")

_ACTIVITY_TIMEOUTS = {
    "act_start_to_close": TimeoutType.START_TO_CLOSE,
    "act_schedule_to_start": TimeoutType.SCHEDULE_TO_START,
    "act_schedule_to_close": TimeoutType.SCHEDULE_TO_CLOSE,
}


def fire_due(tx: StoreTx, timer_id: int, run_id: str, now: float) -> RunState | None:
    """Fire one due timer (the caller runs this in its own transaction). Returns the
    run's state, for the caller to flush, or None when there is nothing to write."""
    rs = RunState.lock(tx, run_id, now, timer=timer_id)
    timer = tx.take_timer(timer_id)
    if timer is None:
        return None  # another host fired it
    if rs is None or not rs.is_open:
        return None
    _fire(rs, timer)
    return rs


def _fire(rs: RunState, timer: Row) -> None:
    kind = timer.kind
    if kind == "user":
        rs.record("TimerFired", {"timerId": timer.data, "startedEventId": str(timer.ref)})
    elif kind == "wft_timeout":  # written by databases from before migration 4
        _workflow_task_timed_out(rs, int(timer.ref))
    elif kind == "wft_retry":
        rs.tx.wake(wft_channel(rs.namespace, rs.task_queue))
    elif kind == "start_delay":
        rs.schedule_workflow_task()
    elif kind == "run_timeout":
        rs.flush_buffered()
        rs.add_event("WorkflowExecutionTimedOut", {"retryState": "RETRY_STATE_TIMEOUT"})
        rs.close(WorkflowExecutionStatus.TIMED_OUT)
    elif kind == "act_retry":
        act = rs.tx.get_activity_task(rs.run_id, timer.ref)
        if act is not None and act.state == ACT_BACKOFF and act.attempt == timer.attempt:
            rs.tx.update_activity_task(rs.run_id, timer.ref, state=ACT_SCHEDULED)
            rs.tx.wake(activity_channel(rs.namespace, act.task_queue))
    elif kind == "act_heartbeat":
        _heartbeat_due(rs, timer)
    elif kind in _ACTIVITY_TIMEOUTS:
        act = rs.tx.get_activity_task(rs.run_id, timer.ref)
        if act is None:
            return
        if kind == "act_start_to_close" and (
            act.state != ACT_STARTED or act.attempt != timer.attempt
        ):
            return
        if kind == "act_schedule_to_start" and act.state == ACT_STARTED:
            return
        activities.timed_out(rs, act, _ACTIVITY_TIMEOUTS[kind])
    else:
        log.warning("ignoring timer of unknown kind %r for run %s", kind, rs.run_id)


def _heartbeat_due(rs: RunState, timer: Row) -> None:
    act = rs.tx.get_activity_task(rs.run_id, timer.ref)
    if act is None or act.state != ACT_STARTED or act.attempt != timer.attempt:
        return
    last = act.last_heartbeat_time or act.started_time
    deadline = float(last) + float(act.heartbeat_timeout)
    if deadline > rs.now:
        # A heartbeat came in since the timer was armed: wait for the new deadline.
        add_timer(
            rs.tx, rs.now, rs.run_id, "act_heartbeat", timer.ref, timer.attempt, deadline, None
        )
        return
    activities.timed_out(rs, act, TimeoutType.HEARTBEAT)


def activity_deadline(
    tx: StoreTx, run_id: str, scheduled_event_id: int, attempt: int, now: float
) -> None:
    """A started activity attempt passed its start-to-close deadline."""
    row = tx.lock_execution(run_id)
    if row is None or row.status != WorkflowExecutionStatus.RUNNING:
        tx.delete_activity_task(run_id, scheduled_event_id)  # left over: never scan it again
        return
    act = tx.get_activity_task(run_id, scheduled_event_id)
    if (
        act is None
        or act.state != ACT_STARTED
        or act.attempt != attempt
        or act.timeout_at is None
        or float(act.timeout_at) > now
    ):
        return  # it ended, or another host handled it, meanwhile
    rs = RunState(tx, row, now)
    activities.timed_out(rs, act, TimeoutType.START_TO_CLOSE)
    rs.flush()


def workflow_task_deadline(tx: StoreTx, run_id: str, started_event_id: int, now: float) -> None:
    """A started workflow task passed its deadline (the worker crashed or is too slow)."""
    row = tx.lock_execution(run_id)
    if row is None or row.status != WorkflowExecutionStatus.RUNNING:
        return
    rs = RunState(tx, row, now)
    _workflow_task_timed_out(rs, started_event_id)
    rs.flush()


def _workflow_task_timed_out(rs: RunState, started_event_id: int) -> None:
    from .workflow_tasks import wft_retry_delay

    wft = rs.workflow_task()
    if wft is None or wft.state != WFT_STARTED or wft.started_event_id != started_event_id:
        return
    attempt = int(wft.attempt)
    if wft.scheduled_event_id is not None:
        rs.add_event(
            "WorkflowTaskTimedOut",
            {
                "scheduledEventId": str(wft.scheduled_event_id),
                "startedEventId": str(wft.started_event_id),
                "timeoutType": "TIMEOUT_TYPE_START_TO_CLOSE",
            },
        )
    rs.forget_workflow_task()
    rs.flush_buffered()
    # A timed-out task (often a crashed worker) is retried at once.
    rs.schedule_workflow_task(attempt=attempt + 1, delay=wft_retry_delay(attempt - 1))
