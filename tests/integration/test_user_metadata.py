"""User metadata (summaries and details), the memo as describe and listing see it, and the
start options a child or a continue-as-new takes (issue 13, item 7), on both backends.

What Temporal records for the same program is checked against a dev-server history in
``tests/replay/test_temporal_recorded.py`` (case ``user_metadata``); the behaviour that the
shapes alone do not show is checked here: what describe and listing read back, codecs,
replay, and what a continue-as-new carries over (checked on Temporal's dev server: the
start memo without the upserted fields, the retry policy; ``upsert_memo`` changes what
describe shows).
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta

import pytest

from engine import Client, Worker, workflow
from engine.common import RetryPolicy
from engine.converter import DataConverter
from engine.exceptions import ApplicationError, InvalidArgumentError
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer
from tests.codecs import WrapCodec


def _summary(event: object) -> object:
    meta = getattr(event, "extra", {}).get("userMetadata") or {}
    return {k: json.loads(base64.b64decode(v["data"])) for k, v in meta.items()}


@workflow.defn
class Napper:
    @workflow.run
    async def run(self, label: str) -> str:
        await workflow.sleep(timedelta(seconds=5), summary=f"nap {label}")
        await workflow.sleep(1)  # no summary
        try:
            await workflow.wait_condition(lambda: False, timeout=2, timeout_summary="give up")
        except TimeoutError:
            pass
        return label


async def test_timer_summaries_are_on_their_events_and_replay_ignores_them(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[Napper]):
        handle = await env.client.start_workflow(
            Napper.run,
            "one",
            id="napper",
            task_queue=task_queue,
            static_summary="Naps **twice**",
            static_details="Then waits.\nThen gives up.",
        )
        assert await handle.result() == "one"
    history = await handle.fetch_history()
    timers = [_summary(e) for e in history.events if e.event_type == "TimerStarted"]
    assert timers == [{"summary": "nap one"}, {}, {"summary": "give up"}]
    assert _summary(history.events[0]) == {
        "summary": "Naps **twice**",
        "details": "Then waits.\nThen gives up.",
    }
    description = await handle.describe()
    assert await description.static_summary() == "Naps **twice**"
    assert await description.static_details() == "Then waits.\nThen gives up."
    # The summary is in the exported JSON, after the attributes, as Temporal writes it.
    exported = json.loads(history.to_json())["events"][0]
    assert list(exported)[-2:] == ["workflowExecutionStartedEventAttributes", "userMetadata"]

    @workflow.defn(name="Napper")
    class NapperRenamedSummaries:
        @workflow.run
        async def run(self, label: str) -> str:
            await workflow.sleep(timedelta(seconds=5), summary="another text")
            await workflow.sleep(1, summary="a new summary")
            try:
                await workflow.wait_condition(lambda: False, timeout=2)
            except TimeoutError:
                pass
            return label

    result = await Replayer(workflows=[NapperRenamedSummaries]).replay_workflow(history)
    assert result.replay_failure is None


async def test_a_run_without_metadata_describes_none(env: WorkflowEnvironment) -> None:
    async with Worker(env.client, task_queue="plain", workflows=[Napper]):
        handle = await env.client.start_workflow(Napper.run, "x", id="plain", task_queue="plain")
        await handle.result()
    description = await handle.describe()
    assert await description.static_summary() is None
    assert await description.static_details() is None
    assert "userMetadata" not in json.loads((await handle.fetch_history()).to_json())["events"][0]


async def test_bad_summaries_are_refused_before_anything_is_written(
    env: WorkflowEnvironment,
) -> None:
    with pytest.raises(InvalidArgumentError, match="static_summary must be a string"):
        await env.client.start_workflow(
            Napper.run,
            "x",
            id="bad",
            task_queue="q",
            static_summary=42,  # type: ignore[arg-type]
        )
    assert [e async for e in env.client.list_workflows()] == []


@workflow.defn
class Greeter:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(1, summary="secret nap")
        return "done"


async def test_summaries_go_through_the_codec(db_url: str, task_queue: str) -> None:
    converter = DataConverter(payload_codec=WrapCodec())
    env = await WorkflowEnvironment.start_time_skipping(
        database_url=db_url, data_converter=converter
    )
    try:
        async with Worker(env.client, task_queue=task_queue, workflows=[Greeter]):
            handle = await env.client.start_workflow(
                Greeter.run, id="coded", task_queue=task_queue, static_summary="top secret"
            )
            await handle.result()
        history = await handle.fetch_history()
        for event in (history.events[0], *[e for e in history.events if "Timer" in e.event_type]):
            for payload in (event.extra.get("userMetadata") or {}).values():
                encoding = base64.b64decode(payload["metadata"]["encoding"])
                assert encoding == b"binary/wrapped"
        assert await (await handle.describe()).static_summary() == "top secret"
    finally:
        await env.shutdown()


@workflow.defn
class MemoKeeper:
    @workflow.run
    async def run(self, continue_with: str) -> dict[str, object]:
        workflow.upsert_memo({"stage": "upserted", "gone": None})
        if continue_with == "default":
            workflow.continue_as_new("stop")
        if continue_with == "given":
            workflow.continue_as_new(
                "stop",
                memo={"fresh": True},
                retry_policy=RetryPolicy(maximum_attempts=7),
                backoff_start_interval=timedelta(minutes=5),
            )
        if continue_with == "wait":
            # An empty list removes a field too, as Temporal's server reads the upsert
            # (the workflow's own memo() keeps it, as temporalio's does).
            workflow.upsert_memo({"tags": []})
            await workflow.wait_condition(lambda: False)
        return dict(workflow.memo())


async def test_describe_and_listing_show_the_memo_with_its_upserts(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[MemoKeeper]):
        handle = await env.client.start_workflow(
            MemoKeeper.run,
            "wait",
            id="memo",
            task_queue=task_queue,
            memo={"origin": "test", "gone": 1, "tags": ["a"]},
        )
        for _ in range(200):
            if (await handle.describe()).history_length >= 5:
                break
            await asyncio.sleep(0.01)
        description = await handle.describe()
        assert await description.memo() == {"origin": "test", "stage": "upserted"}
        assert await description.memo_value("stage") == "upserted"
        assert await description.memo_value("missing", "fallback") == "fallback"
        with pytest.raises(KeyError):
            await description.memo_value("missing")
        (listed,) = [e async for e in env.client.list_workflows()]
        assert await listed.memo() == {"origin": "test", "stage": "upserted"}
        assert (listed.parent_id, listed.root_id, listed.root_run_id) == (
            None,
            "memo",
            handle.first_execution_run_id,
        )
        assert listed.execution_time == listed.start_time
        await handle.terminate()


async def test_continue_as_new_carries_the_start_memo_and_retry_policy(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[MemoKeeper]):
        handle = await env.client.start_workflow(
            MemoKeeper.run,
            "default",
            id="can-default",
            task_queue=task_queue,
            memo={"origin": "test"},
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        # The new run's memo is the start memo (upserts are not carried), then its own
        # upsert applies: as on Temporal's dev server.
        assert await handle.result() == {"origin": "test", "stage": "upserted"}
        latest = env.client.get_workflow_handle("can-default")
        started = (await latest.fetch_history()).events[0].attributes
        assert started["memo"]["fields"].keys() == {"origin"}
        assert started["retryPolicy"]["maximumAttempts"] == 3

        given = await env.client.start_workflow(
            MemoKeeper.run,
            "given",
            id="can-given",
            task_queue=task_queue,
            memo={"origin": "test"},
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        assert await given.result() == {"fresh": True, "stage": "upserted"}
        first = await env.client.get_workflow_handle(
            "can-given", run_id=given.first_execution_run_id
        ).fetch_history()
        continued = first.events[-1].attributes
        assert continued["backoffStartInterval"] == "300s"
        assert continued["memo"]["fields"].keys() == {"fresh"}
        second = await env.client.get_workflow_handle("can-given").describe()
        assert second.execution_time is not None
        assert (second.execution_time - second.start_time) == timedelta(minutes=5)
        started = (
            (await env.client.get_workflow_handle("can-given").fetch_history()).events[0].attributes
        )
        assert started["retryPolicy"]["maximumAttempts"] == 7
        assert started["firstWorkflowTaskBackoff"] == "300s"


_child_attempts: list[int] = []


@workflow.defn
class FlakyChild:
    @workflow.run
    async def run(self) -> str:
        _child_attempts.append(workflow.info().attempt)
        if workflow.info().attempt == 1:
            raise ApplicationError("first attempt fails")
        return f"attempt {workflow.info().attempt}, memo {dict(workflow.memo())}"


@workflow.defn
class ParentOfFlaky:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_child_workflow(
            FlakyChild.run,
            id="flaky-child",
            memo={"from": "parent"},
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2),
            static_summary="the flaky one",
            static_details="fails once",
        )


async def test_a_child_takes_its_memo_retry_policy_and_summary(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    _child_attempts.clear()
    async with Worker(env.client, task_queue=task_queue, workflows=[ParentOfFlaky, FlakyChild]):
        result = await env.client.execute_workflow(
            ParentOfFlaky.run, id="parent", task_queue=task_queue
        )
    assert result == "attempt 2, memo {'from': 'parent'}"
    assert _child_attempts == [1, 2]
    runs = sorted(
        [e async for e in env.client.list_workflows() if e.id == "flaky-child"],
        key=lambda e: e.start_time,
    )
    assert len(runs) == 2
    first = await env.client.get_workflow_handle("flaky-child", run_id=runs[0].run_id).describe()
    assert await first.static_summary() == "the flaky one"
    assert await first.static_details() == "fails once"
    # The retry keeps the memo, parent and root, not the summary (checked on Temporal's
    # dev server: a retried run, and a cron schedule's next run, have no user metadata).
    retried = await env.client.get_workflow_handle("flaky-child").describe()
    assert await retried.static_summary() is None
    assert await retried.memo() == {"from": "parent"}
    assert (retried.parent_id, retried.root_id) == ("parent", "parent")
    (parent,) = [e async for e in env.client.list_workflows() if e.id == "parent"]
    assert {r.root_run_id for r in runs} == {parent.run_id}


async def test_a_bad_cron_schedule_for_a_child_fails_in_the_workflow(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    @workflow.defn(name="BadCronParent")
    class BadCronParent:
        @workflow.run
        async def run(self) -> str:
            try:
                await workflow.execute_child_workflow(
                    FlakyChild.run, id="never", cron_schedule="every tuesday"
                )
            except InvalidArgumentError as err:
                return str(err)
            return "started"

    async with Worker(env.client, task_queue=task_queue, workflows=[BadCronParent]):
        message = await env.client.execute_workflow(
            BadCronParent.run, id="bad-cron", task_queue=task_queue
        )
    assert "cron_schedule 'every tuesday'" in message


async def test_runs_from_before_migration_10_get_their_memo_back(db_url: str) -> None:
    import sqlalchemy as sa

    client = await Client.connect(db_url)
    try:
        async with Worker(client, task_queue="old", workflows=[MemoKeeper]):
            handle = await client.start_workflow(
                MemoKeeper.run, "plain", id="old", task_queue="old", memo={"origin": "old"}
            )
            await handle.result()
        store = client.service.store
        with store.engine.begin() as conn:  # as a database of version 9 held it
            conn.execute(
                sa.text(
                    "UPDATE dn_executions SET memo = NULL, root_workflow_id = NULL, "
                    "root_run_id = NULL, execution_time = NULL"
                )
            )
            conn.execute(sa.text("DELETE FROM dn_schema_versions WHERE version = 10"))
            from engine._store.migrations import MIGRATIONS

            MIGRATIONS[9].backfill(conn)  # type: ignore[misc]
            row = conn.execute(
                sa.text("SELECT memo, root_workflow_id, root_run_id FROM dn_executions")
            ).one()
        assert json.loads(row.memo).keys() == {"origin", "stage"}
        assert (row.root_workflow_id, row.root_run_id) == ("old", handle.first_execution_run_id)
    finally:
        await client.close()
