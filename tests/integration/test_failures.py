"""Non-determinism, workflow-task failures, Workflow Id policies, and bad input."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from engine import (
    Client,
    Worker,
    WorkflowAlreadyStartedError,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
    activity,
    workflow,
)
from engine._store.gateway import Store
from engine.exceptions import (
    DatabaseURLError,
    InvalidArgumentError,
    PayloadSizeError,
    SchemaVersionError,
)

from .test_basics import _wait_for_event


@activity.defn
async def step(name: str) -> str:
    return f"did {name}"


def _swap_workflows() -> tuple[type, type]:
    """The seed's worked case: a timer then an activity, and the same with the two swapped."""

    @workflow.defn(name="Swap")
    class TimerFirst:
        @workflow.run
        async def run(self) -> str:
            await workflow.sleep(1)
            return await workflow.execute_activity(
                step, "charge", start_to_close_timeout=timedelta(seconds=10)
            )

    @workflow.defn(name="Swap")
    class ActivityFirst:
        @workflow.run
        async def run(self) -> str:
            result = await workflow.execute_activity(
                step, "charge", start_to_close_timeout=timedelta(seconds=10)
            )
            await workflow.sleep(1)
            return result

    return TimerFirst, ActivityFirst


async def _task_failures(handle) -> list:
    return [
        e for e in (await handle.fetch_history()).events if e.event_type == "WorkflowTaskFailed"
    ]


async def test_swapped_timer_and_activity_is_a_nondeterminism_error(
    client: Client, task_queue: str
) -> None:
    original, swapped = _swap_workflows()
    wid = "swap-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[original], activities=[step]):
        handle = await client.start_workflow("Swap", id=wid, task_queue=task_queue)
        await _wait_for_event(handle, "TimerStarted")
    # The run waits on its timer while the code is changed and a worker comes back.
    async with Worker(client, task_queue=task_queue, workflows=[swapped], activities=[step]):
        await _wait_for_event(handle, "WorkflowTaskFailed")
    failed = (await _task_failures(handle))[0].attributes
    assert failed["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
    message = failed["failure"]["message"]
    assert "history event 5" in message  # the TimerStarted event
    assert "StartTimer" in message and "ScheduleActivityTask(step" in message
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.RUNNING  # the run stays open
    # Restoring the original definition lets the run complete.
    async with Worker(client, task_queue=task_queue, workflows=[original], activities=[step]):
        assert await asyncio.wait_for(handle.result(), 30) == "did charge"


BROKEN = {"on": True}


@workflow.defn(name="Fragile")
class Fragile:
    @workflow.run
    async def run(self) -> str:
        if BROKEN["on"]:
            raise ValueError("a bug in workflow code")
        return "fixed"


async def test_plain_exception_fails_the_task_and_the_run_recovers(
    client: Client, task_queue: str
) -> None:
    BROKEN["on"] = True
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]) as worker:
        handle = await client.start_workflow(
            Fragile.run, id="frag-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskFailed")
        failures = await _task_failures(handle)
        assert failures[0].attributes["failure"]["message"] == "a bug in workflow code"
        assert (
            failures[0].attributes["cause"]
            == "WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE"
        )
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert (
            worker.metrics.snapshot()["temporal_workflow_task_execution_failed"]["WorkflowError"]
            >= 1
        )
        BROKEN["on"] = False  # the fix is deployed
        worker.register_workflow(Fragile)
        assert await asyncio.wait_for(handle.result(), 30) == "fixed"
    # Retried attempts are not written again: one failure event for the first attempt.
    assert len(await _task_failures(handle)) == 1


async def test_unknown_workflow_type_fails_the_task_naming_known_types(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]):
        handle = await client.start_workflow(
            "NoSuchWorkflow", id="unk-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskFailed")
    message = (await _task_failures(handle))[0].attributes["failure"]["message"]
    assert "'NoSuchWorkflow' is not registered" in message and "Fragile" in message
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


@workflow.defn(name="Quick")
class Quick:
    @workflow.run
    async def run(self, outcome: str) -> str:
        if outcome == "fail":
            from engine import ApplicationError

            raise ApplicationError("failed on purpose")
        if outcome == "wait":
            await workflow.wait_condition(lambda: False)
        return outcome


async def test_same_workflow_id_twice_while_open_is_refused(
    client: Client, task_queue: str
) -> None:
    wid = "dup-" + uuid.uuid4().hex
    first = await client.start_workflow(Quick.run, "wait", id=wid, task_queue=task_queue)
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        await client.start_workflow(Quick.run, "wait", id=wid, task_queue=task_queue)
    assert info.value.run_id == first.result_run_id
    # UseExisting hands back the open run; TerminateExisting replaces it.
    same = await client.start_workflow(
        Quick.run,
        "wait",
        id=wid,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    assert same.result_run_id == first.result_run_id
    newer = await client.start_workflow(
        Quick.run,
        "done",
        id=wid,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
    )
    assert newer.result_run_id != first.result_run_id
    old = client.get_workflow_handle(wid, run_id=first.result_run_id)
    assert (await old.describe()).status == WorkflowExecutionStatus.TERMINATED


@pytest.mark.parametrize(
    ("policy", "closed_as", "allowed"),
    [
        (WorkflowIDReusePolicy.ALLOW_DUPLICATE, "done", True),
        (WorkflowIDReusePolicy.ALLOW_DUPLICATE, "fail", True),
        (WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, "done", False),
        (WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, "fail", True),
        (WorkflowIDReusePolicy.REJECT_DUPLICATE, "done", False),
        (WorkflowIDReusePolicy.REJECT_DUPLICATE, "fail", False),
    ],
)
async def test_reuse_policies_for_closed_runs(
    client: Client, task_queue: str, policy: WorkflowIDReusePolicy, closed_as: str, allowed: bool
) -> None:
    wid = "reuse-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[Quick]):
        handle = await client.start_workflow(Quick.run, closed_as, id=wid, task_queue=task_queue)
        try:
            await handle.result()
        except Exception:
            pass
        if allowed:
            again = await client.start_workflow(
                Quick.run, "done", id=wid, task_queue=task_queue, id_reuse_policy=policy
            )
            assert again.result_run_id != handle.result_run_id
            assert await again.result() == "done"
        else:
            with pytest.raises(WorkflowAlreadyStartedError, match="reuse"):
                await client.start_workflow(
                    Quick.run, "done", id=wid, task_queue=task_queue, id_reuse_policy=policy
                )


async def test_missing_activity_timeout_is_a_clear_task_failure(
    client: Client, task_queue: str
) -> None:
    @workflow.defn(name="NoTimeout")
    class NoTimeout:
        @workflow.run
        async def run(self) -> str:
            return await workflow.execute_activity(step, "x")

    async with Worker(client, task_queue=task_queue, workflows=[NoTimeout], activities=[step]):
        handle = await client.start_workflow(
            NoTimeout.run, id="nt-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskFailed")
    message = (await _task_failures(handle))[0].attributes["failure"]["message"]
    assert "start_to_close_timeout" in message
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert "ActivityTaskScheduled" not in types


async def test_oversized_payload_is_refused_before_anything_is_written(
    client: Client, task_queue: str
) -> None:
    wid = "big-" + uuid.uuid4().hex
    with pytest.raises(PayloadSizeError, match="2 MB"):
        await client.start_workflow(
            Quick.run, "x" * (3 * 1024 * 1024), id=wid, task_queue=task_queue
        )
    assert [w async for w in client.list_workflows(f"WorkflowId = '{wid}'")] == []


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "mysql://user@host/db",
        "sqlite://",
        "postgresql+psycopg://user@localhost",
        "sqlite+aiosqlite:///x.db",
    ],
)
async def test_malformed_database_url_is_a_clear_error(url: str) -> None:
    with pytest.raises(DatabaseURLError) as info:
        await Client.connect(url)
    assert "sqlite" in str(info.value).lower() or "postgresql" in str(info.value).lower()


async def test_database_from_a_newer_schema_is_refused(db_url: str) -> None:
    store = Store(db_url)
    store.open()
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dn_schema_versions (version, description, applied_at) "
                "VALUES (99, 'from the future', 0)"
            )
        )
    store.close()
    newer = Store(db_url)
    with pytest.raises(SchemaVersionError, match="version 99"):
        newer.open()
    # Nothing was changed: the version row is still the newest.
    with newer.engine.begin() as conn:
        versions = conn.execute(sa.text("SELECT version FROM dn_schema_versions")).scalars().all()
    newer.engine.dispose()
    from engine._store.migrations import MIGRATIONS

    assert sorted(versions) == [m.version for m in MIGRATIONS] + [99]


async def test_bad_start_arguments_are_clear(client: Client) -> None:
    with pytest.raises(InvalidArgumentError, match="task_queue"):
        await client.start_workflow(Quick.run, "x", id="a", task_queue="")
    with pytest.raises(InvalidArgumentError, match="not a workflow"):
        await client.start_workflow(step, "x", id="a", task_queue="q")
    with pytest.raises(InvalidArgumentError, match="at least one workflow or activity"):
        Worker(client, task_queue="q")
