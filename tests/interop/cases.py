"""The interop and golden cases: which workflow of ``engine_code`` runs with what input, and
what the client does while it runs. :func:`record` runs one case on our engine and
returns the history of the run it is about.

Used by ``test_temporalio_replay.py`` (histories replayed by temporalio) and by
``tests/replay/record_golden.py`` (the golden histories of ``tests/replay/histories``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engine import Client, Worker, WorkflowFailureError, WorkflowHandle, WorkflowHistory

from . import engine_code as code

Drive = Callable[[WorkflowHandle], Awaitable[None]]


async def wait_for_event(handle: WorkflowHandle, event_type: str, count: int = 1) -> None:
    """Poll the history until it holds ``count`` events of ``event_type`` (10 s at most)."""
    for _ in range(1000):
        events = (await handle.fetch_history()).events
        if sum(e.event_type == event_type for e in events) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the run never recorded {count} x {event_type}")


async def _send_two_signals(handle: WorkflowHandle) -> None:
    # One signal per workflow task, as in Temporal's sample of the same workflow.
    await wait_for_event(handle, "WorkflowTaskCompleted")
    await handle.signal(code.SignalWF.add_message, "first")
    await wait_for_event(handle, "WorkflowTaskCompleted", 2)
    await handle.signal(code.SignalWF.add_message, "second")


async def _cancel_while_sleeping(handle: WorkflowHandle) -> None:
    await wait_for_event(handle, "TimerStarted")
    await handle.cancel()


@dataclass(frozen=True)
class Case:
    """One workflow run on our engine: its feature name is its golden history's file stem."""

    feature: str
    workflow: type
    arg: Any
    closes: str  # the closing event type of the run whose history is kept
    drive: Drive | None = None
    #: The run's result, when the case checks it.
    result: Any = None
    #: Needs real time (the heartbeat must reach the service before the attempt fails).
    real_time: bool = False


CASES: list[Case] = [
    Case("one_activity", code.HelloWF, "Temporal", "WorkflowExecutionCompleted"),
    Case("sequential_activities", code.SeqActivitiesWF, 3, "WorkflowExecutionCompleted"),
    Case("timer", code.TimerWF, 0.5, "WorkflowExecutionCompleted"),
    Case("signals", code.SignalWF, 2, "WorkflowExecutionCompleted", drive=_send_two_signals),
    Case("retried_activity", code.RetryWF, "retry-me", "WorkflowExecutionCompleted"),
    Case("caught_activity_failure", code.CaughtFailureWF, "doomed", "WorkflowExecutionCompleted"),
    Case("failed_workflow", code.FailedActivityWF, "doomed", "WorkflowExecutionFailed"),
    Case(
        "cancelled_with_cleanup",
        code.CancelCleanupWF,
        "the lock",
        "WorkflowExecutionCanceled",
        drive=_cancel_while_sleeping,
    ),
    Case("continue_as_new", code.CountdownWF, 1, "WorkflowExecutionContinuedAsNew"),
    Case("patched", code.PatchedWF, "Temporal", "WorkflowExecutionCompleted"),
    Case(
        "patches_with_change_version",
        code.PatchesWF,
        "Temporal",
        "WorkflowExecutionCompleted",
        result="Hello, Temporal! then slept",
    ),
    Case(
        "activity_method_and_class",
        code.MethodActivitiesWF,
        "Temporal",
        "WorkflowExecutionCompleted",
        result="HOWDY, TEMPORAL!",
    ),
    Case(
        "wait_and_as_completed",
        code.WaitManyWF,
        "Temporal",
        "WorkflowExecutionCompleted",
        result=["fast", "middle", "slow", "Hello, Temporal!"],
    ),
    Case(
        "child_workflow",
        code.ParentWF,
        "Temporal",
        "WorkflowExecutionCompleted",
        result="child said: Hello, Temporal!",
    ),
    Case(
        "heartbeat_details",
        code.HeartbeatWF,
        10,
        "WorkflowExecutionCompleted",
        result="resumed at step 5 of 10 on attempt 2",
        real_time=True,
    ),
]

BY_FEATURE = {c.feature: c for c in CASES}


async def record(client: Client, case: Case) -> WorkflowHistory:
    """Run ``case`` on ``client``'s engine; return the history of its first run.

    The first run is the one the case is about (for continue-as-new, the run that
    continued). Raises AssertionError when the run did not close as the case expects.
    """
    task_queue = f"interop-{case.feature}-{uuid.uuid4().hex[:8]}"
    workflow_id = f"{case.feature}-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=code.ALL_WORKFLOWS, activities=code.ALL_ACTIVITIES
    ):
        handle = await client.start_workflow(
            case.workflow, case.arg, id=workflow_id, task_queue=task_queue
        )
        if case.drive is not None:
            await case.drive(handle)
        try:
            result = await asyncio.wait_for(handle.result(), 20)
        except WorkflowFailureError:
            result = None
    if case.result is not None and result != case.result:
        raise AssertionError(f"{case.feature}: the run returned {result!r}, not {case.result!r}")
    first = client.get_workflow_handle(workflow_id, run_id=handle.first_execution_run_id)
    history = await first.fetch_history()
    closing = history.events[-1].event_type
    if closing != case.closes:
        raise AssertionError(f"{case.feature}: the run closed with {closing}, not {case.closes}")
    return history
