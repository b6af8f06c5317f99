"""The interop and golden cases: which workflow of ``engine_code`` runs with what input, and
what the client does while it runs. :func:`record` runs one case on our engine and
returns the history of the run it is about.

Used by ``test_temporalio_replay.py`` (histories replayed by temporalio), by
``tests/replay/record_golden.py`` (the golden histories of ``tests/replay/histories``) and by
``tests/replay/record_on_temporal.py`` (the same cases on Temporal's dev server). A case's
``drive`` and ``start`` are written once for both: they get the client-side names (``api``:
:data:`ENGINE_API` or ``temporal_api()``) and the workflow module (``engine_code`` or
``temporal_code``) to use.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType, SimpleNamespace
from typing import Any

import engine.client
import engine.common
import engine.operator
from engine import Client, Worker, WorkflowFailureError, WorkflowHistory

from . import engine_code as code

JsonDict = dict[str, Any]

#: What a drive does with the running case's handle: (handle, workflow module, api).
Drive = Callable[[Any, ModuleType, SimpleNamespace], Awaitable[None]]
#: How a case starts its run instead of ``start_workflow``: (client, workflow module, api,
#: task queue, workflow id) -> the run's handle.
Start = Callable[[Any, ModuleType, SimpleNamespace, str, str], Awaitable[Any]]

#: The client-side names a drive or start uses, on our engine.
ENGINE_API = SimpleNamespace(
    AddSearchAttributesRequest=engine.operator.AddSearchAttributesRequest,
    IndexedValueType=engine.operator.IndexedValueType,
    SearchAttributePair=engine.common.SearchAttributePair,
    TypedSearchAttributes=engine.common.TypedSearchAttributes,
    WithStartWorkflowOperation=engine.client.WithStartWorkflowOperation,
    WorkflowUpdateStage=engine.client.WorkflowUpdateStage,
    WorkflowIDConflictPolicy=engine.common.WorkflowIDConflictPolicy,
    Schedule=engine.client.Schedule,
    ScheduleActionStartWorkflow=engine.client.ScheduleActionStartWorkflow,
    ScheduleSpec=engine.client.ScheduleSpec,
    ScheduleState=engine.client.ScheduleState,
)


def temporal_api() -> SimpleNamespace:
    """The same names from ``temporalio`` (imported when called)."""
    import temporalio.api.enums.v1
    import temporalio.api.operatorservice.v1
    import temporalio.client
    import temporalio.common

    return SimpleNamespace(
        AddSearchAttributesRequest=temporalio.api.operatorservice.v1.AddSearchAttributesRequest,
        IndexedValueType=temporalio.api.enums.v1.IndexedValueType,
        SearchAttributePair=temporalio.common.SearchAttributePair,
        TypedSearchAttributes=temporalio.common.TypedSearchAttributes,
        WithStartWorkflowOperation=temporalio.client.WithStartWorkflowOperation,
        WorkflowUpdateStage=temporalio.client.WorkflowUpdateStage,
        WorkflowIDConflictPolicy=temporalio.common.WorkflowIDConflictPolicy,
        Schedule=temporalio.client.Schedule,
        ScheduleActionStartWorkflow=temporalio.client.ScheduleActionStartWorkflow,
        ScheduleSpec=temporalio.client.ScheduleSpec,
        ScheduleState=temporalio.client.ScheduleState,
    )


def _event_types(history: Any) -> list[str]:
    """Event type names (``WorkflowTaskCompleted``) of our history or of temporalio's."""
    if isinstance(history, WorkflowHistory):
        return [e.event_type for e in history.events]
    names = [e["eventType"] for e in json.loads(history.to_json())["events"]]
    return [
        "".join(w.capitalize() for w in n.removeprefix("EVENT_TYPE_").split("_")) for n in names
    ]


async def wait_for_event(handle: Any, event_type: str, count: int = 1) -> None:
    """Poll the history until it holds ``count`` events of ``event_type`` (10 s at most)."""
    for _ in range(1000):
        types = _event_types(await handle.fetch_history())
        if types.count(event_type) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the run never recorded {count} x {event_type}")


async def _send_two_signals(handle: Any, wf: ModuleType, api: SimpleNamespace) -> None:
    # One signal per workflow task, as in Temporal's sample of the same workflow.
    await wait_for_event(handle, "WorkflowTaskCompleted")
    await handle.signal(wf.SignalWF.add_message, "first")
    await wait_for_event(handle, "WorkflowTaskCompleted", 2)
    await handle.signal(wf.SignalWF.add_message, "second")


async def _cancel_while_sleeping(handle: Any, wf: ModuleType, api: SimpleNamespace) -> None:
    await wait_for_event(handle, "TimerStarted")
    await handle.cancel()


async def _two_updates_under_a_lock(handle: Any, wf: ModuleType, api: SimpleNamespace) -> None:
    # Each step waits for the one before it, so every run records the same events.
    await wait_for_event(handle, "WorkflowTaskCompleted")
    accepted = api.WorkflowUpdateStage.ACCEPTED
    hold = await handle.start_update(wf.LockedUpdatesWF.hold, wait_for_stage=accepted, id="hold")
    book = await handle.start_update(
        wf.LockedUpdatesWF.book, "Temporal", wait_for_stage=accepted, id="book"
    )
    await handle.signal(wf.LockedUpdatesWF.release)
    assert [await hold.result(), await book.result()] == ["held", "Hello, Temporal!"]


async def _signals_before_and_after_handlers(
    handle: Any, wf: ModuleType, api: SimpleNamespace
) -> None:
    # One signal per workflow task: two with no handler yet (kept), the one that makes the
    # run set its handlers (the kept two reach them), then one for each handler.
    sent = [("add", "early"), ("extra", "x"), ("begin", None), ("add", "late"), ("ping", "y")]
    for count, (name, arg) in enumerate(sent, start=1):
        await wait_for_event(handle, "WorkflowTaskCompleted", count)
        await handle.signal(name, *([] if arg is None else [arg]))


async def _messenger_and_its_targets(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    # The runs it signals and cancels are running before it starts.
    await client.start_workflow(
        wf.SignalWF.run, 1, id=f"{workflow_id}-receiver", task_queue=task_queue
    )
    sleeper = await client.start_workflow(
        wf.CancelCleanupWF.run, "the lock", id=f"{workflow_id}-sleeper", task_queue=task_queue
    )
    await wait_for_event(sleeper, "TimerStarted")
    return await client.start_workflow(
        wf.MessengerWF.run, workflow_id, id=workflow_id, task_queue=task_queue
    )


async def _a_closed_run_first(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    closed = await client.start_workflow(
        wf.SignalWF.run, 1, id=f"{workflow_id}-closed", task_queue=task_queue
    )
    await closed.terminate(reason="closed before the case starts")
    await closed.cancel()  # a closed run takes a cancel request without an error
    return await client.start_workflow(
        wf.CancelRulesWF.run, closed.id, id=workflow_id, task_queue=task_queue
    )


async def _cancel_twice(handle: Any, wf: ModuleType, api: SimpleNamespace) -> None:
    await wait_for_event(handle, "ExternalWorkflowExecutionCancelRequested")
    await handle.cancel()
    # The workflow task after the request completes before the second one (which
    # records nothing) and before the signal, so every run records the same events.
    await wait_for_event(handle, "WorkflowTaskCompleted", 3)
    await handle.cancel()
    await handle.signal(wf.CancelRulesWF.finish_now)


async def _registered_attributes_first(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    kinds = api.IndexedValueType
    await client.operator_service.add_search_attributes(
        api.AddSearchAttributesRequest(
            namespace="default",
            search_attributes={
                "CustomerId": kinds.INDEXED_VALUE_TYPE_KEYWORD,
                "OrderTags": kinds.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            },
        )
    )
    return await client.start_workflow(
        wf.SearchAttrsWF.run,
        id=workflow_id,
        task_queue=task_queue,
        search_attributes=api.TypedSearchAttributes(
            [api.SearchAttributePair(wf.CUSTOMER_ID, "c-1")]
        ),
    )


def _last_event(history: Any) -> tuple[str, JsonDict]:
    """The last event's type name and attributes, in our history or in temporalio's."""
    if isinstance(history, WorkflowHistory):
        return history.events[-1].event_type, dict(history.events[-1].attributes)
    last = json.loads(history.to_json())["events"][-1]
    kind = "".join(w.capitalize() for w in last["eventType"].removeprefix("EVENT_TYPE_").split("_"))
    attrs = next((v for k, v in last.items() if k.endswith("Attributes")), {})
    return kind, attrs


async def _two_cron_runs(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    first = await client.start_workflow(
        wf.CronWF.run, "tick", id=workflow_id, task_queue=task_queue, cron_schedule="@every 2s"
    )
    run_id = first.result_run_id
    for _ in range(2):  # the first run, then the second, complete and chain on
        for _ in range(3000):
            kind, attrs = _last_event(
                await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
            )
            if kind == "WorkflowExecutionCompleted":
                run_id = attrs["newExecutionRunId"]
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the cron run never completed")
    await client.get_workflow_handle(workflow_id).terminate(reason="enough ticks")
    return client.get_workflow_handle(workflow_id, run_id=first.result_run_id)


async def _by_a_schedule(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    """A paused schedule with no times, triggered at its creation: the run it starts."""
    schedule = await client.create_schedule(
        workflow_id + "-schedule",
        api.Schedule(
            action=api.ScheduleActionStartWorkflow(
                wf.HelloWF.run, "schedule", id=workflow_id, task_queue=task_queue
            ),
            spec=api.ScheduleSpec(),
            state=api.ScheduleState(paused=True),
        ),
        trigger_immediately=True,
    )
    for _ in range(1000):
        recent = (await schedule.describe()).info.recent_actions
        if recent:
            started = recent[0].action
            return client.get_workflow_handle(
                started.workflow_id, run_id=started.first_execution_run_id
            )
        await asyncio.sleep(0.01)
    raise AssertionError("the schedule never started its run")


async def _with_a_memo(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    return await client.start_workflow(
        wf.MemoWF.run, "Temporal", id=workflow_id, task_queue=task_queue, memo={"origin": "test"}
    )


async def _signal_with_start(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    return await client.start_workflow(
        wf.SignalWF.run,
        1,
        id=workflow_id,
        task_queue=task_queue,
        start_signal="add_message",
        start_signal_args=["with the start"],
    )


async def _update_with_start(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    start = api.WithStartWorkflowOperation(
        wf.UpdateFirstWF.run,
        "Temporal",
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=api.WorkflowIDConflictPolicy.FAIL,
    )
    result = await client.execute_update_with_start_workflow(
        wf.UpdateFirstWF.set_value, "first", start_workflow_operation=start
    )
    assert result == "set first", result
    return await start.workflow_handle()


async def _with_summary_and_details(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    return await client.start_workflow(
        wf.SummariesWF.run,
        "Temporal",
        id=workflow_id,
        task_queue=task_queue,
        static_summary="Greets **Temporal**",
        static_details="Four greetings:\n- an activity\n- a local one\n- a child",
    )


async def _with_a_short_task_timeout(
    client: Any, wf: ModuleType, api: SimpleNamespace, task_queue: str, workflow_id: str
) -> Any:
    return await client.start_workflow(
        wf.LongLocalWF.run,
        3.0,
        id=workflow_id,
        task_queue=task_queue,
        task_timeout=timedelta(seconds=2),
    )


@dataclass(frozen=True)
class Case:
    """One workflow run on our engine: its feature name is its golden history's file stem."""

    feature: str
    workflow: type
    arg: Any
    closes: str  # the closing event type of the run whose history is kept
    drive: Drive | None = None
    #: Starts the run instead of ``client.start_workflow(workflow.run, arg)``.
    start: Start | None = None
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
    Case(
        "updates_under_a_lock",
        code.LockedUpdatesWF,
        2,
        "WorkflowExecutionCompleted",
        drive=_two_updates_under_a_lock,
        result=["held", "Hello, Temporal!"],
    ),
    Case(
        "update_with_start",
        code.UpdateFirstWF,
        None,
        "WorkflowExecutionCompleted",
        start=_update_with_start,
        result="Hello, Temporal! first",
    ),
    Case(
        "local_activities",
        code.LocalActivitiesWF,
        "Temporal",
        "WorkflowExecutionCompleted",
        result=[
            "Hello, Temporal!",
            "Hello, regular!",
            "Temporal on attempt 3, local: True",
            "ApplicationError PermanentError: permanent failure for Temporal",
        ],
    ),
    Case(
        "cron_schedule",
        code.CronWF,
        None,
        "WorkflowExecutionCompleted",
        start=_two_cron_runs,
    ),
    Case(
        "upsert_memo",
        code.MemoWF,
        None,
        "WorkflowExecutionCompleted",
        start=_with_a_memo,
        result={"greeting": "Hello, Temporal!", "origin": "test"},
    ),
    Case(
        "signal_with_start",
        code.SignalWF,
        None,
        "WorkflowExecutionCompleted",
        start=_signal_with_start,
        result=["with the start"],
    ),
    Case(
        "external_signal_and_cancel",
        code.MessengerWF,
        None,
        "WorkflowExecutionCompleted",
        start=_messenger_and_its_targets,
        result=[
            "signalled",
            "cancel requested",
            "signal failed: ExternalWorkflowExecutionNotFound: Unable to signal external "
            "workflow because it was not found",
            "cancel failed: ExternalWorkflowExecutionNotFound: Unable to cancel external "
            "workflow because not found",
        ],
    ),
    Case(
        "cancel_rules",
        code.CancelRulesWF,
        None,
        "WorkflowExecutionCompleted",
        start=_a_closed_run_first,
        drive=_cancel_twice,
        result=["closed run: cancel delivered", "cancelled"],
    ),
    Case(
        "search_attributes",
        code.SearchAttrsWF,
        None,
        "WorkflowExecutionCompleted",
        start=_registered_attributes_first,
        result=["started for c-1", "tags ['gift', 'urgent']", "now for c-2", "tags None"],
    ),
    Case(
        "scheduled_start",
        code.HelloWF,
        None,
        "WorkflowExecutionCompleted",
        start=_by_a_schedule,
        result="Hello, schedule!",
    ),
    Case(
        "dynamic_signals",
        code.LateHandlersWF,
        4,
        "WorkflowExecutionCompleted",
        drive=_signals_before_and_after_handlers,
        result=["add early", "extra x", "add late", "ping y"],
    ),
    Case(
        "user_metadata",
        code.SummariesWF,
        None,
        "WorkflowExecutionCompleted",
        start=_with_summary_and_details,
        result="Hello, Temporal! / Hello, local! / Hello, child!",
    ),
    Case(
        "long_local_activity",
        code.LongLocalWF,
        None,
        "WorkflowExecutionCompleted",
        start=_with_a_short_task_timeout,
        result="slept 3.0s, Hello, after!",
        real_time=True,
    ),
    Case(
        "cancelled_local_activity",
        code.CancelledLocalWF,
        2.0,
        "WorkflowExecutionCompleted",
        result="CancelledError: Local Activity cancelled",
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
        if case.start is not None:
            handle = await case.start(client, code, ENGINE_API, task_queue, workflow_id)
        else:
            handle = await client.start_workflow(
                case.workflow, case.arg, id=workflow_id, task_queue=task_queue
            )
        if case.drive is not None:
            await case.drive(handle, code, ENGINE_API)
        try:
            result = await asyncio.wait_for(handle.result(), 20)
        except WorkflowFailureError:
            result = None
    if case.result is not None and result != case.result:
        raise AssertionError(f"{case.feature}: the run returned {result!r}, not {case.result!r}")
    first = client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id or handle.run_id
    )
    history = await first.fetch_history()
    closing = history.events[-1].event_type
    if closing != case.closes:
        raise AssertionError(f"{case.feature}: the run closed with {closing}, not {case.closes}")
    return history
