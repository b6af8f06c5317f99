"""Limits on names and ids, the same on both backends (issue 14, item 3): at most 1,000
characters (Temporal's limit.maxIDLength), no NUL, no lone surrogate, checked before
anything is written; enums as members, ints or names; messages quote a bad value short."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from engine import Client, Worker, workflow
from engine.common import WorkflowIDReusePolicy
from engine.exceptions import InvalidArgumentError, WorkflowAlreadyStartedError
from engine.testing import WorkflowEnvironment


@workflow.defn
class Idle:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def poke(self) -> None:
        pass


BAD_IDS = {
    "a lone surrogate": ("a\ud800b", "lone surrogate"),
    "a NUL": ("a\x00b", "NUL"),
    "too long": ("x" * 1001, "1,001 bytes long"),
    # Temporal counts bytes, not characters: 251 emoji are 1,004 bytes.
    "too long in bytes": ("\N{GRINNING FACE}" * 251, "1,004 bytes long in UTF-8"),
    "empty": ("", "must not be empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_IDS))
async def test_bad_workflow_ids_are_refused_before_anything_is_written(
    client: Client, task_queue: str, case: str
) -> None:
    value, said = BAD_IDS[case]
    with pytest.raises(InvalidArgumentError, match=said) as err:
        await client.start_workflow(Idle.run, id=value, task_queue=task_queue)
    assert "id (the workflow id)" in str(err.value)
    with pytest.raises(InvalidArgumentError, match="task_queue"):
        await client.start_workflow(Idle.run, id="fine", task_queue=value or "\x00")
    assert [e async for e in client.list_workflows()] == []


async def test_ids_at_the_limit_are_stored_on_both_backends(
    client: Client, task_queue: str
) -> None:
    # 250 distinct astral characters: 1,000 bytes that do not compress, so an index entry
    # holds all of them (PostgreSQL's B-tree refused 1,000 such characters).
    rng = random.Random(7)
    wide = "".join(chr(rng.randrange(0x10000, 0x1FFFF)) for _ in range(250))
    handle = await client.start_workflow(Idle.run, id=wide, task_queue=wide, request_id="r" * 1000)
    await handle.signal(wide)
    described = await client.get_workflow_handle(wide).describe()
    assert described.id == wide and described.task_queue == wide
    assert described.run_id == handle.first_execution_run_id


async def test_messages_quote_a_huge_value_short(client: Client) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        client.get_workflow_handle("y" * 10_000_000)
    assert len(str(err.value)) < 400
    assert "10,000,000 characters" in str(err.value)


async def test_names_of_signals_queries_updates_and_filters(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Idle]):
        handle = await client.start_workflow(Idle.run, id="idle", task_queue=task_queue)
        with pytest.raises(InvalidArgumentError, match=r"the signal name.*lone surrogate"):
            await handle.signal("s\udc80")
        with pytest.raises(InvalidArgumentError, match=r"the query name.*1,001"):
            await handle.query("q" * 1001)
        with pytest.raises(InvalidArgumentError, match=r"the update id.*NUL"):
            await handle.execute_update("u", id="a\x00")
        with pytest.raises(InvalidArgumentError, match=r"list filter.*lone surrogate"):
            [e async for e in client.list_workflows("WorkflowId = 'a\ud800'")]
        with pytest.raises(InvalidArgumentError, match=r"list filter.*NUL"):
            [e async for e in client.list_workflows("WorkflowId = '\x00'")]
        history = await handle.fetch_history()
        assert "WorkflowExecutionSignaled" not in [e.event_type for e in history.events]
        await handle.terminate()
    with pytest.raises(InvalidArgumentError, match="task_queue"):
        Worker(client, task_queue="q" * 1001, workflows=[Idle])


async def test_enums_as_names_or_ints_and_nothing_else(client: Client, task_queue: str) -> None:
    with pytest.raises(InvalidArgumentError, match="id_reuse_policy must be a") as err:
        await client.start_workflow(
            Idle.run,
            id="e",
            task_queue=task_queue,
            id_reuse_policy="bogus",  # type: ignore[arg-type]
        )
    assert "REJECT_DUPLICATE" in str(err.value)  # the choices are listed
    for given in ("REJECT_DUPLICATE", "WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE", 3):
        workflow_id = f"enum-{uuid.uuid4().hex}"
        first = await client.start_workflow(
            Idle.run,
            id=workflow_id,
            task_queue=task_queue,
            id_reuse_policy=given,  # type: ignore[arg-type]
        )
        await first.terminate()
        with pytest.raises(WorkflowAlreadyStartedError):  # REJECT_DUPLICATE it is
            await client.start_workflow(
                Idle.run,
                id=workflow_id,
                task_queue=task_queue,
                id_reuse_policy=given,  # type: ignore[arg-type]
            )
    assert WorkflowIDReusePolicy.REJECT_DUPLICATE == 3


@workflow.defn
class ChildWithAHugeId:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_child_workflow(Idle.run, id="c" * 1001)
        except InvalidArgumentError as err:
            return str(err)
        return "started"


async def test_workflow_code_is_held_to_the_same_limits(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[ChildWithAHugeId, Idle]):
        said = await asyncio.wait_for(
            env.client.execute_workflow(ChildWithAHugeId.run, id="parent", task_queue=task_queue),
            30,
        )
    assert said.startswith("id is 1,001 bytes long")
    assert len([e async for e in env.client.list_workflows()]) == 1  # no child was written


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (123, "must be a string, not int"),
        ("sqlite:////tmp/x\ud800.db", "lone surrogate"),
        ("sqlite:////tmp/a\x00b.db", "NUL"),
        ("localhost:7233", "address of a Temporal server"),
    ],
)
async def test_bad_database_urls_say_what_is_wrong(url: object, said: str) -> None:
    from engine.exceptions import DatabaseURLError

    with pytest.raises(DatabaseURLError, match=said):
        await Client.connect(url)  # type: ignore[arg-type]


def test_the_cli_refuses_a_timeout_that_is_not_a_number_of_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    for bad in ("nan", "inf", "-1", "soon"):
        assert main(["workflow", "query", "wf", "--name", "q", "--timeout", bad]) == 2
        assert "number of seconds" in capsys.readouterr().err
