"""``durable workflow list`` and ``count`` with Temporal's List Filter, search attributes
in the listing, and ``--namespace`` on the workflow commands."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from engine import Client, Worker, workflow
from engine.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from engine.operator import RegisterNamespaceRequest

from .test_cli import arun_cli

CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
AMOUNT = SearchAttributeKey.for_int("Amount")
TAGS = SearchAttributeKey.for_keyword_list("Tags")


@workflow.defn
class Quick:
    @workflow.run
    async def run(self, fail: bool) -> str:
        if fail:
            raise RuntimeError("no")  # fails the task: the run stays open
        return "ok"


async def test_list_and_count_with_the_list_filter(
    client: Client, db_url: str, task_queue: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await client.service.add_search_attributes("default", {"CustomerId": 2, "Amount": 3, "Tags": 7})
    async with Worker(client, task_queue=task_queue, workflows=[Quick]):
        for i in range(3):
            attrs = TypedSearchAttributes(
                [
                    SearchAttributePair(CUSTOMER, f"c-{i}"),
                    SearchAttributePair(AMOUNT, i),
                    SearchAttributePair(TAGS, ["vip"]),
                ]
            )
            handle = await client.start_workflow(
                Quick.run, False, id=f"ok-{i}", task_queue=task_queue, search_attributes=attrs
            )
            await handle.result()
        await client.start_workflow(Quick.run, True, id="stuck", task_queue=task_queue)

    code, out, err = await arun_cli(
        capsys, "workflow", "count", "--db", db_url, "-q", "Amount >= 1 OR WorkflowId = 'stuck'"
    )
    assert (code, out.strip()) == (0, "Total: 3"), err
    code, out, err = await arun_cli(
        capsys, "workflow", "count", "--db", db_url, "-q", "GROUP BY ExecutionStatus", "-o", "json"
    )
    assert code == 0, err
    counted = json.loads(out)
    assert counted["count"] == 4
    assert sorted((g["group_values"], g["count"]) for g in counted["groups"]) == [
        (["Completed"], 3),
        (["Running"], 1),
    ]
    code, out, err = await arun_cli(
        capsys, "workflow", "list", "--db", db_url, "-q", "CustomerId IN ('c-1', 'c-2')"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert "SEARCH ATTRIBUTES" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["ok-2", "ok-1"]  # newest closed first
    assert 'Amount=2 CustomerId=c-2 Tags=["vip"]' in lines[1]  # a list, even of one
    # Bad filters name the column and what was wrong.
    code, _, err = await arun_cli(capsys, "workflow", "count", "--db", db_url, "-q", "Amount = ")
    assert code == 2 and "column" in err and "expected a value" in err
    code, _, err = await arun_cli(capsys, "workflow", "list", "--db", db_url, "-q", "Amount = 'x'")
    assert code == 2 and "invalid value for search attribute Amount of type Int" in err


async def test_workflow_commands_take_a_namespace(
    client: Client, db_url: str, task_queue: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace="shop", workflow_execution_retention_period=timedelta(days=1)
        )
    )
    shop = Client(client.store, namespace="shop")
    await shop.start_workflow(Quick.run, False, id="in-shop", task_queue=task_queue)
    code, out, _ = await arun_cli(capsys, "workflow", "list", "--db", db_url, "--namespace", "shop")
    assert code == 0 and out.splitlines()[1].split()[0] == "in-shop"
    code, out, _ = await arun_cli(capsys, "workflow", "count", "--db", db_url)
    assert out.strip() == "Total: 0"  # the default namespace has none
    code, out, err = await arun_cli(
        capsys, "--namespace", "shop", "workflow", "terminate", "in-shop", "--db", db_url
    )
    assert code == 0, err
    assert (await shop.get_workflow_handle("in-shop").describe()).status.name == "TERMINATED"
    code, _, err = await arun_cli(
        capsys, "workflow", "describe", "in-shop", "--db", db_url, "--namespace", "nope"
    )
    assert code == 2 and "Namespace nope is not found." in err
