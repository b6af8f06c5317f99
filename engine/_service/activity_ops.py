"""Activity and timer operations of the service (a mixin of :class:`Service`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .._payload_size import json_payload_size
from .._store.ahead import RunLock
from .._store.commit_at import CommitAt
from .._store.gateway import Store
from .._store.queries import AHEAD_KINDS
from .._store.schema import ACT_STARTED, WFT_SCHEDULED
from .._store.shared_time import not_before as time_not_before
from .._store.shared_time import now as tx_now
from .._store.tx import Row, StoreTx
from ..common import WorkflowExecutionStatus
from ..converter import (
    MAX_PAYLOAD_BYTES,
)
from ..exceptions import ActivityNotFoundError
from . import activities, timers
from .clock import Clock
from .handoff import Reservation
from .namespaces import existing_namespace
from .operation import operation, tx_function
from .state import RunState, dumps
from .types import ActivityRef, ActivityTask, WorkflowTask

JsonDict = dict[str, Any]
S = WorkflowExecutionStatus

#: How an activity named from outside its worker may end (``settle_activity_by_ref``).
#: Temporal's server's failure message for heartbeat details over the blob size limit.
HEARTBEAT_TOO_LARGE = "Heartbeat details exceed size limit."

_OUTCOMES: dict[str, Callable[[RunState, Row, Any], None]] = {
    "completed": activities.complete,
    "failed": activities.failed,
    "canceled": activities.canceled,
}


def _attempt_locks(task: ActivityTask, *_: Any, **__: Any) -> tuple[RunLock, ...]:
    """An attempt's outcome locks its run and reads the activity's row with it."""
    return (RunLock(task.run_id, task.scheduled_event_id),)


class ActivityOps:
    """Activity operations of the service (mixed into :class:`Service`)."""

    store: Store
    clock: Clock
    _start_task: Callable[..., WorkflowTask]

    @operation
    def poll_activity_tasks(
        self, tx: StoreTx, namespace: str, task_queue: str, identity: str, limit: int
    ) -> list[ActivityTask]:
        """Claim up to ``limit`` ready activity attempts."""
        return activities.claim(tx, namespace, task_queue, identity, tx_now(self.clock), limit)

    @operation(locks=_attempt_locks, inline=True)
    def complete_activity(
        self,
        tx: StoreTx,
        task: ActivityTask,
        result: list[JsonDict],
        eager: Reservation | None = None,
    ) -> WorkflowTask | None:
        """The attempt returned a result. See :meth:`_outcome` for ``eager``."""
        return self._outcome(tx, task, eager, activities.complete, result)

    @operation(locks=_attempt_locks, inline=True)
    def fail_activity(
        self,
        tx: StoreTx,
        task: ActivityTask,
        failure: JsonDict,
        eager: Reservation | None = None,
    ) -> WorkflowTask | None:
        """The attempt raised: retry or record the failure."""
        return self._outcome(tx, task, eager, activities.failed, failure)

    @operation(locks=_attempt_locks, inline=True)
    def cancel_activity(
        self,
        tx: StoreTx,
        task: ActivityTask,
        details: list[JsonDict],
        eager: Reservation | None = None,
    ) -> WorkflowTask | None:
        """The attempt stopped after a cancellation request."""
        return self._outcome(tx, task, eager, activities.canceled, details)

    async def hold_outcome(
        self,
        record: Callable[..., Awaitable[WorkflowTask | None]],
        task: ActivityTask,
        value: Any,
        eager: Reservation,
        redo: Callable[[], Awaitable[Any]],
    ) -> WorkflowTask | None:
        """``record(task, value, eager)`` (one of :meth:`complete_activity`,
        :meth:`fail_activity`, :meth:`cancel_activity`), holding its transaction open on
        PostgreSQL when it starts the run's next workflow task for ``eager``'s worker: the
        task's completion then commits with it (``WorkflowTask.held``; see
        ``engine._store.held``). ``redo()`` records the outcome again should the held
        transaction roll back. Elsewhere, with too many held already, or when the worker
        has other workflow tasks in hand (under load the writers' group commit costs less
        per change than a transaction of its own), just ``record``."""
        fn = tx_function(record)
        if fn is None or not eager.idle:
            # The workflow code would wait its turn: group commit costs less per change.
            return await record(task, value, eager)
        holding = await self.store.hold(fn, (task, value, eager), redo, task.run_id)
        if holding is None:
            return await record(task, value, eager)
        started: WorkflowTask | None = holding[0]
        held = holding[1]
        if started is None:
            await held.commit()
            return None
        started.held = held
        return started

    def _outcome(
        self,
        tx: StoreTx,
        task: ActivityTask,
        eager: Reservation | None,
        record: Callable[[RunState, Row, Any], None],
        value: Any,
    ) -> WorkflowTask | None:
        """Record an attempt's outcome.

        With ``eager``, if the outcome scheduled a workflow task for a run that worker
        holds in its cache, the task is started for that worker in the same transaction
        and returned (no trip through the queue).
        """
        rs = self._run_for_activity(tx, task)
        record(rs, activities.current(rs, task.token), value)
        return self._start_cached(rs, eager)

    def _start_cached(self, rs: RunState, eager: Reservation | None) -> WorkflowTask | None:
        """Flush the change to ``rs``; if it scheduled a workflow task of a run the
        ``eager`` worker holds in its cache, start that task for the worker in the same
        write and return it (no trip through the queue)."""
        if eager is None or rs.run_id not in eager.cached or not rs.is_open:
            rs.flush()
            return None
        if rs.wft_wanted:
            # Schedule now (not at flush) so the task can be started in this same write.
            rs.schedule_workflow_task(defer_insert=True)
            rs.wft_wanted = False
        wft = rs.workflow_task()
        if (
            wft is None
            or wft.state != WFT_SCHEDULED
            or wft.attempt != 1
            or wft.visible_at > rs.now
            or rs.task_queue != eager.task_queue
        ):
            rs.flush()
            return None
        # Started here (its row is written started): pollers of the queue are not woken.
        return self._start_task(rs, eager.identity, eager.cached)

    @operation
    def heartbeat_activity(
        self, tx: StoreTx, task: ActivityTask, details: list[JsonDict] | None
    ) -> bool:
        """Record a heartbeat; True when cancellation has been requested."""
        if details and sum(json_payload_size(p) for p in details) > MAX_PAYLOAD_BYTES:
            return self._heartbeat_too_large(tx, task.token)
        return activities.heartbeat(tx, task.token, details, tx_now(self.clock))

    def _heartbeat_too_large(self, tx: StoreTx, token: tuple[str, int, int]) -> bool:
        """Heartbeat details over the 2 MB limit: as Temporal's server does, the attempt
        fails at once with a non-retryable server failure, and the activity is told it is
        cancelled."""
        run_id, sched, attempt = token
        rs = RunState.lock(tx, run_id, tx_now(self.clock))
        act = tx.get_activity_task(run_id, sched)
        if rs is None or act is None or act.attempt != attempt or act.state != ACT_STARTED:
            raise ActivityNotFoundError(f"activity attempt {attempt} of event {sched} is gone")
        failure = {
            "message": HEARTBEAT_TOO_LARGE,
            "source": "",
            "serverFailureInfo": {"nonRetryable": True},
        }
        activities.failed(rs, act, failure)
        rs.flush()
        return True

    # -- activities completed from outside their worker (async completion) ------------

    @operation
    def settle_activity_by_ref(
        self,
        tx: StoreTx,
        ref: ActivityRef,
        outcome: str,
        value: Any,
        heartbeat_details: list[JsonDict] | None = None,
        request_id: str = "",
    ) -> None:
        """End the current attempt of an activity named by task token or ids:
        ``outcome`` is "completed" (``value``: the result payloads), "failed" (a failure;
        ``heartbeat_details`` go to the next attempt if it is retried) or "canceled"
        (detail payloads). :class:`ActivityNotFoundError` when no attempt matches, except
        for the request (``request_id``) that ended it, run again after an ambiguous
        commit: that changes nothing and succeeds."""
        found = self._activity_by_ref(tx, ref, request_id)
        if found is None:
            return
        rs, act = found
        if heartbeat_details:
            tx.update_activity_task(
                act.run_id, act.scheduled_event_id, heartbeat_details=dumps(heartbeat_details)
            )
        _OUTCOMES[outcome](rs, act, value)
        rs.flush()

    @operation
    def heartbeat_activity_by_ref(
        self, tx: StoreTx, ref: ActivityRef, details: list[JsonDict] | None
    ) -> bool:
        """Record a heartbeat for an activity named by task token or ids; True when
        cancellation has been requested."""
        found = self._activity_by_ref(tx, ref)
        assert found is not None
        _, act = found
        token = (str(act.run_id), int(act.scheduled_event_id), int(act.attempt))
        if details and sum(json_payload_size(p) for p in details) > MAX_PAYLOAD_BYTES:
            return self._heartbeat_too_large(tx, token)
        return activities.heartbeat(tx, token, details, tx_now(self.clock))

    def _activity_by_ref(
        self, tx: StoreTx, ref: ActivityRef, request_id: str = ""
    ) -> tuple[RunState, Row] | None:
        """The run and the current attempt ``ref`` names, locked; None when ``request_id``
        was recorded on the run already (it is noted otherwise)."""
        now = tx_now(self.clock)
        what = f"activity {ref.activity_id!r} of workflow {ref.workflow_id!r}" + (
            f" (run {ref.run_id})" if ref.run_id else ""
        )
        run_id = ref.run_id
        if run_id is None:
            found = tx.find_open_run(ref.namespace, ref.workflow_id)
            if found is None and request_id:
                # The run this request was for may have closed since its first try.
                found = tx.find_latest_run(ref.namespace, ref.workflow_id)
            if found is None:
                existing_namespace(tx, ref.namespace)  # or that is why
                raise ActivityNotFoundError(f"{what}: the workflow has no open run")
            run_id = str(found.run_id)
        rs = RunState.lock(tx, run_id, now)
        if rs is None or rs.row.workflow_id != ref.workflow_id or rs.namespace != ref.namespace:
            existing_namespace(tx, ref.namespace)
            raise ActivityNotFoundError(f"{what}: no such run in namespace {ref.namespace!r}")
        if request_id and not tx.claim_request(run_id, request_id, now):
            return None
        if not rs.is_open:
            raise ActivityNotFoundError(f"{what}: the run has closed")
        if ref.scheduled_event_id is not None:
            act = tx.get_activity_task(run_id, ref.scheduled_event_id)
        else:
            act = next(
                (a for a in tx.activity_tasks_of_run(run_id) if a.activity_id == ref.activity_id),
                None,
            )
        if act is None:
            raise ActivityNotFoundError(f"{what}: it has ended (or never was)")
        if ref.attempt is not None and act.attempt != ref.attempt:
            raise ActivityNotFoundError(
                f"{what}: attempt {ref.attempt} is over (attempt {act.attempt} is current)"
            )
        if act.state != ACT_STARTED:
            raise ActivityNotFoundError(f"{what}: no attempt is running (it waits to retry)")
        return rs, act

    def _run_for_activity(self, tx: StoreTx, task: ActivityTask) -> RunState:
        rs = RunState.lock(tx, task.run_id, tx_now(self.clock), task.token[1])
        if rs is None or not rs.is_open:
            raise ActivityNotFoundError(f"run {task.run_id} is closed")
        return rs

    # -- timers -------------------------------------------------------------------------

    @operation
    def fire_due_timers(self, tx: StoreTx, limit: int = 200) -> int:
        """Fire timers that are due; return how many were looked at."""
        return self._fire_due_timers(tx, limit, {}, ())[0]

    @operation
    def fire_due_timers_eager(
        self,
        tx: StoreTx,
        eager: Mapping[str, Reservation],
        expected: Sequence[tuple[int, str]] = (),
        limit: int = 200,
    ) -> tuple[int, dict[str, WorkflowTask]]:
        """:meth:`fire_due_timers`, and where a timer schedules a workflow task of a run
        in ``eager`` (run id -> a reservation of the worker that holds it in its cache),
        start that task for the worker in the same write. ``expected``: the (timer id, run
        id) the caller expects to be due, whose runs are locked with the first read (see
        ``StoreTx.due_work``). Returns how many timers and deadlines were looked at, and
        the tasks started by run id (the caller settles every reservation: with its task,
        or empty)."""
        return self._fire_due_timers(tx, limit, eager, expected)

    @operation(alone=True)
    def fire_timers_at(
        self,
        tx: StoreTx,
        at: float,
        commit_at: CommitAt,
        eager: Mapping[str, Reservation],
        expected: Sequence[tuple[int, str]] = (),
        limit: int = 200,
    ) -> tuple[int, dict[str, WorkflowTask]]:
        """:meth:`fire_due_timers_eager` a little ahead of the due time ``at`` (clock
        time): what is due by ``at`` fires with ``at`` as its time, and the commit waits
        for ``commit_at.deadline`` (when the clock reads ``at``) holding the runs' locks (on
        SQLite, the write lock), so nothing is seen to fire early. On PostgreSQL every
        write is sent before the wait, and the pass is alone in its transaction: no other
        change of this process waits with it. Where the clock has passed ``at`` already, a
        pass as :meth:`fire_due_timers_eager` does, now."""
        return self._fire_due_timers(tx, limit, eager, expected, at, commit_at)

    def _fire_due_timers(
        self,
        tx: StoreTx,
        limit: int,
        eager: Mapping[str, Reservation],
        expected: Sequence[tuple[int, str]],
        at: float | None = None,
        commit_at: CommitAt | None = None,
    ) -> tuple[int, dict[str, WorkflowTask]]:
        started: dict[str, WorkflowTask] = {}
        # All due timers in one transaction: twenty timers due together fire together.
        now = real = tx_now(self.clock)
        if at is not None and commit_at is not None:
            if commit_at.handed_out:
                # Run again after a commit that failed: the tasks of that attempt were
                # handed to their workers, who drop them; these go through the queue.
                eager = {}
                if commit_at.on_done is not None:
                    commit_at.on_done(False)
            if at > now:
                tx.commit_not_before(commit_at)
                now = at
                time_not_before(at)  # changes batched after it commit at ``at`` too
        # Read together (one round trip on PostgreSQL, with the expected runs' locks).
        # The deadlines' handlers check each task again under its run's lock, so a timer
        # fired below that ended one of them first leaves nothing for its handler to do.
        rows, late, hung = tx.due_work(now, limit, expected, real)
        for row in rows:
            rs = timers.fire_due(tx, row.id, row.run_id, now)
            if rs is None:
                continue
            reservation = eager.get(row.run_id) if row.run_id not in started else None
            task = self._start_cached(rs, reservation)
            if task is not None:
                started[row.run_id] = task
        for task in late:
            timers.workflow_task_deadline(tx, task.run_id, task.started_event_id, now)
        for act in hung:
            timers.activity_deadline(tx, act.run_id, act.scheduled_event_id, act.attempt, now)
        if commit_at is not None:
            commit_at.payload = started  # what its on_due may hand out (a pass started ahead)
        return len(rows) + len(late) + len(hung), started

    @operation(read=True)
    def next_timer_at(self, tx: StoreTx) -> float | None:
        """When the next timer is due."""
        return tx.next_timer_at()

    @operation(read=True)
    def next_timers(
        self, tx: StoreTx, limit: int
    ) -> tuple[float | None, list[tuple[str, float, int, bool]]]:
        """When the next timer (or deadline) is due, and the first ``limit`` timers of
        runs: run id, when it is due, timer id, and whether a pass may fire it as of its
        due time, started ahead (``AHEAD_KINDS``). The timer loop reserves their workers'
        slots when they are due, and the firing transaction locks their runs ahead."""
        next_at, rows = tx.next_timers(limit)
        return next_at, [
            (str(r.run_id), float(r.fire_at), int(r.id), r.kind in AHEAD_KINDS) for r in rows
        ]

    @operation
    def skip_to_next_timer(self, tx: StoreTx) -> bool:
        """Time skipping: if no task is ready or running, move the clock to the next timer.

        The check happens inside one transaction (on SQLite it holds the write lock) and
        the jump right after its commit, before the writer's next transaction, so a timer
        or task committed meanwhile by this process cannot be jumped over. The jump is an
        after-commit effect, not done inside the transaction: a transaction function may
        run twice, and a second run would jump again, past the next timer.
        """
        tx.consistent_snapshot()
        if not getattr(self.clock, "auto_skip", False):
            return False  # nobody awaits a result any more: time runs normally
        # The first read takes the snapshot (PostgreSQL); the clock is read after it, so
        # a task committed before it, made ready at an earlier time, counts as ready.
        next_at = tx.next_timer_at()
        now = tx_now(self.clock)
        if tx.work_in_progress(now):
            return False
        if next_at is None or next_at <= now:
            return False
        clock = self.clock
        tx.after_commit(lambda: clock.advance_to(next_at))  # type: ignore[attr-defined]
        return True
