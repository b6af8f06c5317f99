"""Every service operation that writes is a pure transaction function: run twice, in a
SQLite batch where another change fails (the batch is rolled back and each change run
again on its own), it leaves the world as one run alone does.

Each case sets up the same scenario on two databases, runs the operation alone on one and
inside a failing batch on the other, and compares: every table (uuids masked: they are
random), the operation's result, the wake-ups and messages the notifier was given, and the
clock. The cases are checked against the service's operation registry
(``engine._service.operation.OPERATIONS``): a new writing operation without a case fails
:func:`test_every_writing_operation_has_a_case`.

SQLite only: PostgreSQL's retry path (a serialization failure, a deadlock or a lost
connection runs the transaction again, up to five times) asks the same property of the
same functions, and the batch is the way to force a second run deterministically.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import engine._store.gateway as gateway
import engine._store.sqlite_writer as sqlite_writer
from engine import Client
from engine._model import commands as cmd
from engine._service.clock import Clock
from engine._service.operation import OPERATIONS
from engine._service.service import Service
from engine._service.types import ActivityTask, StartWorkflowRequest, WorkflowTask
from engine._store.commit_at import CommitAt
from engine._store.tx import StoreTx

NS, QUEUE, WORKER = "default", "q", "worker-1"
T0 = 1_800_000_000.0
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

#: Writing operations that have no case here, with the reason. (None today.)
EXCLUDED: dict[str, str] = {}


class FrozenClock(Clock):
    """Time stands still unless a test moves it: both twins read the same times."""

    skipping = True
    auto_skip = True

    def __init__(self) -> None:
        self.t = T0

    def now(self) -> float:
        return self.t

    def advance_to(self, target: float) -> None:
        self.t = max(self.t, target)


# -- scenarios ------------------------------------------------------------------------------

Op = Callable[[], Awaitable[Any]]
Setup = Callable[[Service, FrozenClock], Awaitable[Op]]


def _request(workflow_id: str = "wf-1", **fields: Any) -> StartWorkflowRequest:
    return StartWorkflowRequest(
        namespace=NS,
        workflow_id=workflow_id,
        workflow_type="Flow",
        task_queue=QUEUE,
        input=[{"data": "MQ=="}],
        **fields,
    )


async def _started(svc: Service, workflow_id: str = "wf-1", **fields: Any) -> str:
    return (await svc.start_workflow(_request(workflow_id, **fields))).run_id


async def _workflow_task(svc: Service, workflow_id: str = "wf-1") -> WorkflowTask:
    await _started(svc, workflow_id)
    tasks = await svc.poll_workflow_tasks(NS, QUEUE, WORKER, {}, 1)
    task = tasks[0]
    assert isinstance(task, WorkflowTask)
    return task


def _activity(seq: int = 1, **fields: Any) -> cmd.ScheduleActivityTask:
    values: dict[str, Any] = dict(
        seq=seq,
        activity_id=str(seq),
        activity_type="act",
        task_queue=QUEUE,
        input=[],
        schedule_to_close=None,
        schedule_to_start=60.0,
        start_to_close=30.0,
        heartbeat_timeout=None,
        retry_policy={"initialInterval": "1s", "maximumAttempts": 3},
    )
    values.update(fields)
    return cmd.ScheduleActivityTask(**values)


async def _activity_task(svc: Service, **fields: Any) -> ActivityTask:
    task = await _workflow_task(svc)
    await svc.complete_workflow_task(task, [_activity(**fields)], WORKER)
    (act,) = await svc.poll_activity_tasks(NS, QUEUE, WORKER, 1)
    return act


async def start_workflow(svc: Service, clock: FrozenClock) -> Op:
    return lambda: svc.start_workflow(_request(memo={"m": 1}, run_timeout=100.0))


async def start_workflow_over_a_running_one(svc: Service, clock: FrozenClock) -> Op:
    from engine.common import WorkflowIDConflictPolicy

    await _workflow_task(svc)  # a run with a started workflow task, terminated below
    policy = WorkflowIDConflictPolicy.TERMINATE_EXISTING
    return lambda: svc.start_workflow(_request(id_conflict_policy=policy))


def _reservation(kind: str, cached: dict[str, int]) -> Any:
    """A hand-off reservation as a worker of this process gives it (never settled here:
    the operation under test only reads it)."""
    from engine._service.handoff import Reservation

    return Reservation(None, kind, QUEUE, WORKER, cached)  # type: ignore[arg-type]


async def start_workflow_eagerly(svc: Service, clock: FrozenClock) -> Op:
    eager = _reservation("start", {})
    return lambda: svc.start_workflow(_request(), eager)


async def signal_workflow(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc)
    return lambda: svc.signal_workflow(NS, "wf-1", None, "sig", [{"data": "Mg=="}], "me")


async def request_cancel(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc)
    return lambda: svc.request_cancel(NS, "wf-1", None, "enough", "me")


async def terminate(svc: Service, clock: FrozenClock) -> Op:
    await _workflow_task(svc)
    return lambda: svc.terminate(NS, "wf-1", None, "stop", [{"data": "Mw=="}], "me")


async def request_update(svc: Service, clock: FrozenClock) -> Op:
    await _workflow_task(svc)  # a task is running: the update waits for the next one
    return lambda: svc.request_update(NS, "wf-1", None, "upd", [], "u-1", "me")


async def request_update_sent_before(svc: Service, clock: FrozenClock) -> Op:
    await _workflow_task(svc)
    await svc.request_update(NS, "wf-1", None, "upd", [], "u-1", "me")
    return lambda: svc.request_update(NS, "wf-1", None, "upd", [], "u-1", "me")


async def update_with_start(svc: Service, clock: FrozenClock) -> Op:
    return lambda: svc.update_with_start(_request(), "upd", [{"data": "MQ=="}], "u-1")


async def update_with_start_of_a_running_one(svc: Service, clock: FrozenClock) -> Op:
    from engine.common import WorkflowIDConflictPolicy

    await _workflow_task(svc)
    policy = WorkflowIDConflictPolicy.USE_EXISTING
    return lambda: svc.update_with_start(_request(id_conflict_policy=policy), "upd", [], "u-2")


async def close_abandoning_updates(svc: Service, clock: FrozenClock) -> Op:
    await _workflow_task(svc)
    await svc.request_update(NS, "wf-1", None, "upd", [], "u-1", "me")
    return lambda: svc.terminate(NS, "wf-1", None, "stop", None, "me")


async def _ask_query(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc)
    return lambda: svc._ask_query(NS, "wf-1", None, "state", [])


async def _forget_query(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc)
    query_id, _ = await svc._ask_query(NS, "wf-1", None, "state", [])
    return lambda: svc._forget_query(query_id)


async def answer_query(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc)
    query_id, _ = await svc._ask_query(NS, "wf-1", None, "state", [])
    return lambda: svc.answer_query(query_id, [{"data": "NA=="}], None)


async def poll_workflow_tasks(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc, "wf-1")
    await _started(svc, "wf-2")
    await svc._ask_query(NS, "wf-1", None, "state", [])
    return lambda: svc.poll_workflow_tasks(NS, QUEUE, WORKER, {}, 2)


async def complete_workflow_task(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    child = cmd.StartChildWorkflowExecution(
        seq=3, workflow_id="child-1", workflow_type="Child", task_queue=QUEUE, input=[]
    )
    commands: list[cmd.Command] = [
        _activity(1),
        _activity(2, task_queue="other"),
        cmd.StartTimer(seq=1, timer_id="t1", duration=5.0),
        cmd.RecordMarker(marker_name="m", details={"k": {"data": "NQ=="}}),
        child,
    ]
    return lambda: svc.complete_workflow_task(task, commands, WORKER, 1)


async def complete_workflow_task_continuing_as_new(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    commands: list[cmd.Command] = [
        cmd.ContinueAsNewWorkflowExecution(workflow_type="Flow", task_queue=QUEUE, input=[])
    ]
    return lambda: svc.complete_workflow_task(task, commands, WORKER)


async def fail_workflow_task(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    return lambda: svc.fail_workflow_task(task, "CAUSE", {"message": "boom"}, WORKER)


async def retry_workflow_tasks_now(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    await svc.fail_workflow_task(task, "CAUSE", {"message": "boom"}, WORKER)
    clock.t += 1.0  # the first retry's backoff
    (again,) = await svc.poll_workflow_tasks(NS, QUEUE, WORKER, {}, 1)
    assert isinstance(again, WorkflowTask)
    await svc.fail_workflow_task(again, "CAUSE", {"message": "boom"}, WORKER)  # backs off
    return lambda: svc.retry_workflow_tasks_now(NS, "Flow")


async def poll_activity_tasks(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    await svc.complete_workflow_task(task, [_activity(1), _activity(2)], WORKER)
    return lambda: svc.poll_activity_tasks(NS, QUEUE, WORKER, 2)


async def complete_activity(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc)
    eager = _reservation("next", {act.run_id: 1})
    return lambda: svc.complete_activity(act, [{"data": "Ng=="}], eager)


async def fail_activity(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc)  # retried after a backoff
    return lambda: svc.fail_activity(act, {"message": "no", "applicationFailureInfo": {}})


async def cancel_activity(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc)
    return lambda: svc.cancel_activity(act, [])


async def heartbeat_activity(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc, heartbeat_timeout=10.0)
    return lambda: svc.heartbeat_activity(act, [{"data": "Nw=="}])


def _ref(act: Any, *, by_token: bool) -> Any:
    from engine._service.types import ActivityRef

    if by_token:
        return ActivityRef.from_token(act.task_token)
    return ActivityRef(NS, act.workflow_id, None, act.activity_id)


async def settle_activity_by_token(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc)
    ref = _ref(act, by_token=True)
    return lambda: svc.settle_activity_by_ref(ref, "completed", [{"data": "Ng=="}])


async def fail_activity_by_ids(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc)  # retried after a backoff, with heartbeat details
    ref = _ref(act, by_token=False)
    failure = {"message": "no", "applicationFailureInfo": {}}
    return lambda: svc.settle_activity_by_ref(ref, "failed", failure, [{"data": "Nw=="}])


async def heartbeat_activity_by_ref(svc: Service, clock: FrozenClock) -> Op:
    act = await _activity_task(svc, heartbeat_timeout=10.0)
    ref = _ref(act, by_token=False)
    return lambda: svc.heartbeat_activity_by_ref(ref, [{"data": "Nw=="}])


async def fire_due_timers(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    await svc.complete_workflow_task(
        task,
        [cmd.StartTimer(seq=1, timer_id="t1", duration=5.0), _activity(1, start_to_close=3.0)],
        WORKER,
    )
    await svc.poll_activity_tasks(NS, QUEUE, WORKER, 1)
    await _workflow_task(svc, "wf-2")  # its workflow task times out
    clock.t += 20.0
    return lambda: svc.fire_due_timers()


async def fire_due_timers_eager(svc: Service, clock: FrozenClock) -> Op:
    """A timer whose run the worker holds starts the run's next task for it in the same
    write; a second run's timer (not held) schedules its task on the queue."""
    held = await _workflow_task(svc)
    await svc.complete_workflow_task(
        held, [cmd.StartTimer(seq=1, timer_id="t1", duration=5.0)], WORKER
    )
    other = await _workflow_task(svc, "wf-2")
    await svc.complete_workflow_task(
        other, [cmd.StartTimer(seq=1, timer_id="t2", duration=5.0)], WORKER
    )
    eager = {
        held.run_id: _reservation("next", {held.run_id: 5}),
        other.run_id: _reservation("next", {}),
    }
    clock.t += 10.0
    # The timer loop's look-ahead: both runs are locked with the first read (PostgreSQL).
    _, upcoming = await svc.next_timers(10)
    expected = [(timer_id, run_id) for run_id, _, timer_id, _ in upcoming]
    assert len(expected) == 2
    return lambda: svc.fire_due_timers_eager(eager, expected)


async def fire_timers_at(svc: Service, clock: FrozenClock) -> Op:
    """The pass a timer loop starts ahead of its timers: it fires as of a time 10 ms
    ahead of the clock, and its commit waits for it (``test_timer_prefire`` has more)."""
    held = await _workflow_task(svc)
    await svc.complete_workflow_task(
        held, [cmd.StartTimer(seq=1, timer_id="t1", duration=5.0)], WORKER
    )
    eager = {held.run_id: _reservation("next", {held.run_id: 5})}
    clock.t += 10.0
    _, upcoming = await svc.next_timers(10)
    expected = [(timer_id, run_id) for run_id, _, timer_id, _ in upcoming]
    at = clock.t + 0.01
    return lambda: svc.fire_timers_at(at, CommitAt(time.monotonic() + 0.01), eager, expected)


async def skip_to_next_timer(svc: Service, clock: FrozenClock) -> Op:
    task = await _workflow_task(svc)
    await svc.complete_workflow_task(
        task, [cmd.StartTimer(seq=1, timer_id="t1", duration=500.0)], WORKER
    )
    return lambda: svc.skip_to_next_timer()


#: A Keyword search attribute's value ("c1"), as payload JSON.
_KEYWORD = {
    "metadata": {"encoding": "anNvbi9wbGFpbg==", "type": "S2V5d29yZA=="},
    "data": "ImMxIg==",
}


async def start_workflow_with_search_attributes(svc: Service, clock: FrozenClock) -> Op:
    await svc.add_search_attributes(NS, {"CustomerId": 2})
    return lambda: svc.start_workflow(_request(search_attributes={"CustomerId": _KEYWORD}))


async def complete_workflow_task_upserting(svc: Service, clock: FrozenClock) -> Op:
    await svc.add_search_attributes(NS, {"CustomerId": 2})
    task = await _workflow_task(svc)
    upsert = cmd.UpsertWorkflowSearchAttributes({"CustomerId": _KEYWORD})
    return lambda: svc.complete_workflow_task(task, [upsert], WORKER)


async def complete_workflow_task_with_a_bad_search_attribute(
    svc: Service, clock: FrozenClock
) -> Op:
    task = await _workflow_task(svc)
    upsert = cmd.UpsertWorkflowSearchAttributes({"NotRegistered": _KEYWORD})
    return lambda: svc.complete_workflow_task(task, [upsert], WORKER)


async def add_search_attributes(svc: Service, clock: FrozenClock) -> Op:
    await svc.add_search_attributes(NS, {"Region": 2})
    return lambda: svc.add_search_attributes(NS, {"CustomerId": 2, "Region": 2, "Amount": 3})


async def remove_search_attributes(svc: Service, clock: FrozenClock) -> Op:
    await svc.add_search_attributes(NS, {"CustomerId": 2})
    await _started(svc, search_attributes={"CustomerId": _KEYWORD})
    return lambda: svc.remove_search_attributes(NS, ["CustomerId"])


async def register_namespace(svc: Service, clock: FrozenClock) -> Op:
    return lambda: svc.register_namespace("orders", 3 * 86400.0, "shop", "a@b.c", {"k": "v"})


async def ensure_namespace(svc: Service, clock: FrozenClock) -> Op:
    return lambda: svc.ensure_namespace("elsewhere")


async def update_namespace(svc: Service, clock: FrozenClock) -> Op:
    await svc.register_namespace("orders", 3 * 86400.0, "shop", "", {"k": "v"})
    return lambda: svc.update_namespace("orders", 2 * 86400.0, "store", None, {"x": "y"})


async def delete_closed_runs(svc: Service, clock: FrozenClock) -> Op:
    await _started(svc, "kept-open")
    await _started(svc, "closed-long-ago")
    await svc.terminate(NS, "closed-long-ago", None, "stop", [], "me")
    clock.t += 8 * 86400  # past the default namespace's week
    await _started(svc, "closed-recently")
    await svc.terminate(NS, "closed-recently", None, "stop", [], "me")
    expired = await svc.find_expired_runs()
    assert len(expired) == 1
    return lambda: svc.delete_closed_runs([*expired, "no-such-run"])


def _definition(overlap: int = 1) -> dict[str, Any]:
    return {
        "spec": {"intervals": [{"every": 60.0, "offset": 0.0}]},
        "action": {
            "workflow_id": "sched-wf",
            "workflow_type": "Flow",
            "task_queue": QUEUE,
            "input": [{"data": "MQ=="}],
        },
        "policies": {"overlap": overlap, "catchup_window": None, "pause_on_failure": False},
        "state": {"note": "", "paused": False, "limited_actions": False, "remaining_actions": 0},
    }


async def create_schedule(svc: Service, clock: FrozenClock) -> Op:
    return lambda: svc.create_schedule(
        NS, "s1", _definition(), trigger_immediately=True, request_id="r1"
    )


async def patch_schedule_terminating(svc: Service, clock: FrozenClock) -> Op:
    await svc.create_schedule(NS, "s1", _definition(5), trigger_immediately=True)
    clock.t += 1
    return lambda: svc.patch_schedule(NS, "s1", trigger=0, pause="hold", request_id="r2")


async def update_schedule(svc: Service, clock: FrozenClock) -> Op:
    await svc.create_schedule(NS, "s1", _definition(3), trigger_immediately=True)
    clock.t += 150  # two action times pass while the run is open: both buffered
    # One dict for both runs of the function, as a caller hands it over: a limited action
    # taken by the update's pass must not be taken from it twice.
    limited = _definition(6)
    limited["state"].update(limited_actions=True, remaining_actions=5)
    return lambda: svc.update_schedule(NS, "s1", limited, request_id="r3")


async def delete_schedule(svc: Service, clock: FrozenClock) -> Op:
    await svc.create_schedule(NS, "s1", _definition(), trigger_immediately=True)
    return lambda: svc.delete_schedule(NS, "s1")


async def fire_schedule(svc: Service, clock: FrozenClock) -> Op:
    await svc.create_schedule(NS, "s1", _definition(3), trigger_immediately=True)
    clock.t += 200  # three action times while the triggered run is open: all buffered
    [(timer_id, key)] = await svc.due_schedule_timers()
    return lambda: svc.fire_schedule(timer_id, key)


async def postpone_schedule(svc: Service, clock: FrozenClock) -> Op:
    await svc.create_schedule(NS, "s1", _definition())
    clock.t += 61
    [(_, key)] = await svc.due_schedule_timers()
    return lambda: svc.postpone_schedule(key, clock.t + 60)


CASES: dict[str, list[Setup]] = {
    "start_workflow": [
        start_workflow,
        start_workflow_over_a_running_one,
        start_workflow_eagerly,
        start_workflow_with_search_attributes,
    ],
    "signal_workflow": [signal_workflow],
    "request_cancel": [request_cancel],
    "terminate": [terminate, close_abandoning_updates],
    "request_update": [request_update, request_update_sent_before],
    "update_with_start": [update_with_start, update_with_start_of_a_running_one],
    "_ask_query": [_ask_query],
    "_forget_query": [_forget_query],
    "answer_query": [answer_query],
    "poll_workflow_tasks": [poll_workflow_tasks],
    "complete_workflow_task": [
        complete_workflow_task,
        complete_workflow_task_continuing_as_new,
        complete_workflow_task_upserting,
        complete_workflow_task_with_a_bad_search_attribute,
    ],
    "fail_workflow_task": [fail_workflow_task],
    "retry_workflow_tasks_now": [retry_workflow_tasks_now],
    "poll_activity_tasks": [poll_activity_tasks],
    "complete_activity": [complete_activity],
    "fail_activity": [fail_activity],
    "cancel_activity": [cancel_activity],
    "heartbeat_activity": [heartbeat_activity],
    "settle_activity_by_ref": [settle_activity_by_token, fail_activity_by_ids],
    "heartbeat_activity_by_ref": [heartbeat_activity_by_ref],
    "fire_due_timers": [fire_due_timers],
    "fire_due_timers_eager": [fire_due_timers_eager],
    "fire_timers_at": [fire_timers_at],
    "skip_to_next_timer": [skip_to_next_timer],
    "add_search_attributes": [add_search_attributes],
    "remove_search_attributes": [remove_search_attributes],
    "register_namespace": [register_namespace],
    "ensure_namespace": [ensure_namespace],
    "update_namespace": [update_namespace],
    "delete_closed_runs": [delete_closed_runs],
    "create_schedule": [create_schedule],
    "patch_schedule": [patch_schedule_terminating],
    "update_schedule": [update_schedule],
    "delete_schedule": [delete_schedule],
    "fire_schedule": [fire_schedule],
    "postpone_schedule": [postpone_schedule],
}


def _writing_operations() -> set[str]:
    return {op.name.rsplit(".", 1)[1] for op in OPERATIONS if not op.read}


def test_every_writing_operation_has_a_case() -> None:
    ops = _writing_operations()
    assert ops, "the registry is empty: is engine._service.service imported?"
    missing = ops - set(CASES) - set(EXCLUDED)
    assert not missing, f"writing operations without a purity case: {sorted(missing)}"
    assert not (set(CASES) - ops), "cases for operations that no longer exist"


# -- running a case twice -------------------------------------------------------------------


def _fail(tx: StoreTx) -> None:
    raise ValueError("this change fails, so its batch runs again change by change")


def _mask(value: Any) -> Any:
    return UUID.sub("<uuid>", value) if isinstance(value, str) else value


def _dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r[0] != "dn_schema_versions"  # dated by the wall clock
        ]
        dumped = {
            t: sorted(
                (tuple(_mask(v) for v in row) for row in conn.execute(f'SELECT * FROM "{t}"')),
                key=repr,
            )
            for t in tables
        }
        # The default namespace is made by the migration, dated by the wall clock.
        dumped["dn_namespaces"] = [
            (r[0], r[1], "<migrated>", *r[3:7], "<migrated>") if r[0] == "default" else r
            for r in dumped["dn_namespaces"]
        ]
        return dumped
    finally:
        conn.close()


class _World:
    """One twin: a database, its service, and what the service told the notifier."""

    def __init__(self, client: Client, clock: FrozenClock, path: Path) -> None:
        self.client, self.clock, self.path = client, clock, path
        self.wakeups: list[tuple[list[str], list[tuple[str, str]]]] = []
        notifier = client.store.notifier
        original = notifier.notify_many

        def record(channels: set[str], messages: dict[str, Any] | None = None) -> None:
            if channels:
                self.wakeups.append(
                    (
                        sorted(_mask(c) for c in channels),
                        sorted((_mask(k), _mask(repr(v))) for k, v in (messages or {}).items()),
                    )
                )
            original(channels, messages)

        notifier.notify_many = record  # type: ignore[method-assign]

    def state(self, result: Any) -> dict[str, Any]:
        return {
            "tables": _dump(self.path),
            "result": _mask(repr(result)),
            "wakeups": sorted(self.wakeups),
            "clock": self.clock.now(),
            "namespaces": sorted(self.client.service._namespaces),
        }


async def _world(path: Path, setup: Setup) -> tuple[_World, Op]:
    clock = FrozenClock()
    client = await Client.connect(f"sqlite:///{path}", clock=clock)
    op = await setup(client.service, clock)
    world = _World(client, clock, path)
    return world, op


async def _in_failing_batch(store: gateway.Store, op: Op) -> tuple[Any, Any]:
    """Run ``op`` and a failing change as one SQLite batch: queued while the writer is held
    busy (as in test_after_commit)."""
    assert store._writer is not None
    hold, holding = threading.Event(), threading.Event()

    def block(tx: StoreTx) -> None:
        holding.set()
        hold.wait(10)

    blocker = asyncio.ensure_future(store.transaction(block))
    while not holding.is_set():
        await asyncio.sleep(0.001)
    jobs = [asyncio.ensure_future(op()), asyncio.ensure_future(store.transaction(_fail))]
    await asyncio.sleep(0.05)  # both are queued behind the blocker
    hold.set()
    await blocker
    result, failed = await asyncio.gather(*jobs, return_exceptions=True)
    return result, failed


@pytest.mark.parametrize(
    "setup",
    [setup for setups in CASES.values() for setup in setups],
    ids=lambda setup: setup.__name__.lstrip("_"),
)
async def test_an_operation_run_again_in_a_failing_batch_leaves_what_one_run_leaves(
    tmp_path: Path, setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone, alone_op = await _world(tmp_path / "alone.db", setup)
    twice, twice_op = await _world(tmp_path / "twice.db", setup)
    try:
        assert alone.state(None) == twice.state(None), "the scenarios differ before the call"
        result = await alone_op()

        runs = []
        original = sqlite_writer.StoreTx

        def counted(*args: Any, **kwargs: Any) -> StoreTx:
            runs.append(threading.current_thread().name)
            return original(*args, **kwargs)

        monkeypatch.setattr(sqlite_writer, "StoreTx", counted)
        result_twice, failed = await _in_failing_batch(twice.client.store, twice_op)
        monkeypatch.undo()

        assert isinstance(failed, ValueError)
        if isinstance(result_twice, BaseException):
            raise result_twice
        # The blocker; then the operation and the failing change in one batch; then each
        # again on its own.
        assert len(runs) == 5, runs
        assert twice.state(result_twice) == alone.state(result)
    finally:
        await alone.client.close()
        await twice.client.close()
