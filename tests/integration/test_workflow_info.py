"""``workflow.info()`` with every field of temporalio's, and the small utilities workflow code
calls (time_ns, random_seed, new_random, instance, payload_converter, memo, memo_value,
current details, is_failure_exception), on both backends."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from engine import ApplicationError, Client, RetryPolicy, Worker, workflow
from engine.common import Priority
from engine.testing import WorkflowEnvironment


@dataclasses.dataclass
class Customer:
    name: str
    tier: int


@workflow.defn
class Grandchild:
    @workflow.run
    async def run(self) -> dict[str, Any]:
        info = workflow.info()
        return {
            "parent": dataclasses.asdict(info.parent) if info.parent else None,
            "root": dataclasses.asdict(info.root) if info.root else None,
        }


@workflow.defn
class Child:
    @workflow.run
    async def run(self, grandchild_id: str) -> dict[str, Any]:
        info = workflow.info()
        below = await workflow.execute_child_workflow(Grandchild.run, id=grandchild_id)
        return {
            "parent": dataclasses.asdict(info.parent) if info.parent else None,
            "root": dataclasses.asdict(info.root) if info.root else None,
            "grandchild": below,
        }


@workflow.defn
class Curious:
    @workflow.run
    async def run(self, child_id: str) -> dict[str, Any]:
        info = workflow.info()
        workflow.set_current_details("asking questions")
        moment, nanos, made = workflow.now(), workflow.time_ns(), workflow.uuid7()
        child = await workflow.execute_child_workflow(Child.run, child_id + "-grand", id=child_id)
        return {
            "fields": [f.name for f in dataclasses.fields(info)],
            "parent": info.parent,
            "root": info.root,
            "retry_policy": info.retry_policy is not None
            and info.retry_policy.maximum_attempts == 3,
            "priority": info.priority == Priority.default,
            "original": info.original_execution_run_id == info.run_id,
            "started_in_order": info.workflow_start_time <= info.start_time,
            "time_ns": abs(nanos / 1e9 - moment.timestamp()) < 1e-6,
            "seed": workflow.random_seed(),
            "uuid7": str(made),
            "uuid7_ms": int(moment.timestamp() * 1000),
            "named": workflow.new_random("dice").random(),
            "unnamed_is_random": workflow.new_random().random() == _fresh_random_first(),
            "instance": workflow.instance() is self,
            "converter": type(workflow.payload_converter()).__name__,
            "memo": workflow.memo()["note"],
            "customer": workflow.memo_value("customer", type_hint=Customer),
            "missing": workflow.memo_value("nothing", "fallback"),
            "failure": workflow.is_failure_exception(ApplicationError("x")),
            "not_failure": workflow.is_failure_exception(RuntimeError("x")),
            "details": workflow.get_current_details(),
            "child": child,
        }

    @workflow.query
    def dice(self) -> float:
        return workflow.new_random("dice").random()

    @workflow.query
    def details(self) -> str:
        return workflow.get_current_details()


def _fresh_random_first() -> float:
    import random

    return random.Random(workflow.random_seed()).random()


async def test_info_and_utilities(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex[:8]
    async with Worker(client, task_queue=task_queue, workflows=[Curious, Child, Grandchild]):
        handle = await client.start_workflow(
            Curious.run,
            "child-" + key,
            id="curious-" + key,
            task_queue=task_queue,
            memo={"note": "hello", "customer": Customer("Ada", 2)},
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        got = await handle.result()
        # A query replays the run in a fresh instance: new_random("dice") gives the same.
        assert await handle.query(Curious.dice) == got["named"]
        assert await handle.query(Curious.details) == "asking questions"
    import temporalio.workflow

    theirs = [f.name for f in dataclasses.fields(temporalio.workflow.Info)]
    assert got["fields"][: len(theirs)] == theirs
    assert got["fields"][len(theirs) :] == [
        "history_length",
        "history_size",
        "continue_as_new_suggested",
    ]
    assert got["parent"] is None and got["root"] is None
    for name in ("retry_policy", "priority", "original", "started_in_order", "time_ns"):
        assert got[name] is True, name
    assert got["seed"] == uuid.UUID(handle.result_run_id).int
    made = uuid.UUID(got["uuid7"])
    assert made.version == 7 and made.variant == uuid.RFC_4122
    assert abs((made.int >> 80) - got["uuid7_ms"]) <= 1
    assert got["unnamed_is_random"] is True and got["instance"] is True
    assert got["converter"] == "PayloadConverter"
    assert got["memo"] == "hello"
    assert got["customer"] == {"name": "Ada", "tier": 2}  # a dataclass, returned as JSON
    assert got["missing"] == "fallback"
    assert got["failure"] is True and got["not_failure"] is False
    assert got["details"] == "asking questions"
    top = {"workflow_id": "curious-" + key, "run_id": handle.result_run_id}
    child = got["child"]
    assert child["parent"] == {"namespace": client.namespace, **top}
    assert child["root"] == top
    grandchild = child["grandchild"]
    assert grandchild["parent"]["workflow_id"] == "child-" + key
    assert grandchild["root"] == top  # the top of the chain, not the parent


async def test_memo_value_without_a_default_raises_key_error(
    client: Client, task_queue: str
) -> None:
    @workflow.defn(name="MemoKeyError")
    class MemoKeyError:
        @workflow.run
        async def run(self) -> str:
            try:
                workflow.memo_value("absent")
            except KeyError as err:
                return str(err)
            return "no error"

    async with Worker(client, task_queue=task_queue, workflows=[MemoKeyError]):
        result = await client.execute_workflow(
            MemoKeyError.run, id="memo-" + uuid.uuid4().hex, task_queue=task_queue, memo={"a": 1}
        )
    assert "no key 'absent'" in result and "['a']" in result


def test_outside_a_workflow_the_utilities_say_so() -> None:
    with pytest.raises(RuntimeError):
        workflow.random_seed()
    with pytest.raises(RuntimeError):
        workflow.memo()


@workflow.defn
class NamespaceAware:
    @workflow.run
    async def run(self) -> str:
        if workflow.info().namespace == "default":
            await workflow.sleep(1)  # only where it first ran
        return workflow.info().namespace


async def test_the_replayer_s_namespace_is_what_replayed_code_sees(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    from engine.worker import Replayer

    async with Worker(env.client, task_queue=task_queue, workflows=[NamespaceAware]):
        handle = await env.client.start_workflow(
            NamespaceAware.run, id="ns-aware", task_queue=task_queue
        )
        assert await handle.result() == "default"
    history = await handle.fetch_history()
    same = await Replayer(workflows=[NamespaceAware], namespace="default").replay_workflow(history)
    assert same.replay_failure is None
    # temporalio's default, "ReplayNamespace": the code takes the other path.
    other = await Replayer(workflows=[NamespaceAware]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert other.replay_failure is not None
