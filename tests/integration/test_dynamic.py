"""Handlers set at run time and dynamic definitions, as temporalio has them (both backends):
``workflow.set_signal_handler`` and its kin, signals kept until a handler takes them,
dynamic signal/query/update handlers called with raw values, and dynamic workflows and
activities that run the types a worker has no definition of."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from engine import ApplicationError, Client, Worker, activity, workflow
from engine.client import WorkflowQueryFailedError
from engine.common import RawValue
from engine.exceptions import InvalidArgumentError, WorkflowUpdateFailedError
from engine.worker import Replayer

TIMEOUT = timedelta(seconds=10)


def _texts(args: Sequence[RawValue]) -> list[str]:
    """Raw values decoded as strings, checking that they came raw."""
    assert all(isinstance(a, RawValue) for a in args), args
    return [workflow.payload_converter().from_payload(a.payload, str) for a in args]


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def _first_task_done(handle: Any) -> None:
    """Wait until the run's first workflow task completed: its run method has begun."""
    for _ in range(500):
        events = (await handle.fetch_history()).events
        if any(e.event_type == "WorkflowTaskCompleted" for e in events):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the first workflow task never completed")


async def _replays(workflows: list[type], handle: Any) -> None:
    result = await Replayer(workflows=workflows).replay_workflow(await handle.fetch_history())
    assert result.replay_failure is None


# -- handlers set and removed at run time --------------------------------------------------


@workflow.defn
class Switchboard:
    """Sets a signal, a query and an update handler at the top of its run method, then
    removes them all once it hears "off"."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.done = False
        self.checks: dict[str, list[bool]] = {}

    @workflow.run
    async def run(self) -> dict[str, Any]:
        def hear(text: str) -> None:
            self.heard.append(text)

        def ask() -> list[str]:
            return self.heard

        def bump(n: int) -> int:
            return n + len(self.heard)

        def check_bump(n: int) -> None:
            if n < 0:
                raise ApplicationError("n must not be negative", type="Negative")

        workflow.set_signal_handler("hear", hear)
        workflow.set_query_handler("ask", ask)
        workflow.set_update_handler("bump", bump, validator=check_bump)
        self.checks["set"] = [
            workflow.get_signal_handler("hear") is hear,
            workflow.get_query_handler("ask") is ask,
            workflow.get_update_handler("bump") is bump,
            workflow.get_signal_handler("finish") == self.finish,  # decorated: bound
            workflow.get_signal_handler("nope") is None,
            workflow.get_dynamic_signal_handler() is None,
            workflow.get_dynamic_query_handler() is None,
            workflow.get_dynamic_update_handler() is None,
        ]
        await workflow.wait_condition(lambda: "off" in self.heard)
        workflow.set_signal_handler("hear", None)
        workflow.set_query_handler("ask", None)
        workflow.set_update_handler("bump", None)
        self.checks["removed"] = [
            workflow.get_signal_handler("hear") is None,
            workflow.get_query_handler("ask") is None,
            workflow.get_update_handler("bump") is None,
        ]
        await workflow.wait_condition(lambda: self.done)
        return {"heard": self.heard, "checks": self.checks}

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def test_handlers_set_at_run_time_and_removed_with_none(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Switchboard]):
        handle = await client.start_workflow(
            Switchboard.run, id=_new_id("switchboard"), task_queue=task_queue
        )
        await _first_task_done(handle)  # the run method has set its handlers
        assert await handle.execute_update("bump", 2) == 2
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("bump", -1)
        assert isinstance(refused.value.cause, ApplicationError)
        assert refused.value.cause.type == "Negative"
        await handle.signal("hear", "a")
        assert await handle.execute_update("bump", 0) == 1  # the signal came first
        assert await handle.query("ask") == ["a"]
        await handle.signal("hear", "off")
        for _ in range(500):  # until the run has removed its handlers
            try:
                await handle.query("ask")
            except WorkflowQueryFailedError as err:
                assert "no query handler 'ask'" in str(err)
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the query handler was never removed")
        with pytest.raises(WorkflowUpdateFailedError) as gone:
            await handle.execute_update("bump", 1)
        assert "no update handler 'bump'" in str(gone.value.cause)
        await handle.signal("hear", "late")  # no handler now: kept, never delivered
        await handle.signal(Switchboard.finish)
        result = await handle.result()
    assert result["heard"] == ["a", "off"]
    assert result["checks"] == {"set": [True] * 8, "removed": [True] * 3}
    await _replays([Switchboard], handle)


# -- signals kept until a handler takes them -------------------------------------------------


@workflow.defn
class LateListener:
    """Sets its handlers only once told to: the signals that came before wait for them."""

    def __init__(self) -> None:
        self.ready = False
        self.got: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.ready)
        workflow.set_signal_handler("note", lambda text: self.got.append(f"note {text}"))
        seen = len(self.got)  # the buffered notes run in tasks of their own: none yet

        def any_signal(name: str, args: Sequence[RawValue]) -> None:
            self.got.append(f"{name} {' '.join(_texts(args))}")

        await workflow.wait_condition(lambda: len(self.got) == 3)
        workflow.set_dynamic_signal_handler(any_signal)
        await workflow.wait_condition(lambda: len(self.got) == 6)
        return [*self.got, f"seen at once: {seen}"]

    @workflow.signal
    def ready_now(self) -> None:
        self.ready = True


async def test_signals_without_a_handler_wait_for_one_in_order(
    client: Client, task_queue: str
) -> None:
    handle = await client.start_workflow(
        LateListener.run, id=_new_id("late"), task_queue=task_queue
    )
    # Sent before any worker runs: all of them reach the run's first workflow task.
    for name, arg in [
        ("note", "1"),
        ("other", "x"),
        ("note", "2"),
        ("third", "z"),
        ("other", "y"),
        ("note", "3"),
    ]:
        await handle.signal(name, arg)
    await handle.signal(LateListener.ready_now)
    async with Worker(client, task_queue=task_queue, workflows=[LateListener]):
        result = await handle.result()
    # The named handler takes its own signals, in order; the dynamic one set later takes
    # the rest, name by name in the order each name first came (as temporalio).
    assert result == [
        "note 1",
        "note 2",
        "note 3",
        "other x",
        "other y",
        "third z",
        "seen at once: 0",
    ]
    await _replays([LateListener], handle)


# -- dynamic handlers ------------------------------------------------------------------------


@workflow.defn
class Catchall:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done)
        return self.log

    @workflow.signal
    def named(self, n: int) -> None:
        self.log.append(f"named {n}")

    @workflow.signal(dynamic=True)
    def any_signal(self, name: str, args: Sequence[RawValue]) -> None:
        if name == "stop":
            self.done = True
        self.log.append(f"signal {name} {_texts(args)}")

    @workflow.query(dynamic=True)
    def any_query(self, name: str, args: Sequence[RawValue]) -> str:
        return f"query {name} {_texts(args)} after {len(self.log)}"

    @workflow.update(dynamic=True)
    def any_update(self, name: str, args: Sequence[RawValue]) -> str:
        pc = workflow.payload_converter()
        count = pc.from_payload(args[1].payload, int)
        self.log.append(f"update {name} {pc.from_payload(args[0].payload, str)} x{count}")
        return f"{name} done"

    @any_update.validator
    def check_any(self, name: str, args: Sequence[RawValue]) -> None:
        if name == "forbidden":
            raise ApplicationError(f"{name} is not allowed", type="Forbidden")


async def test_dynamic_signal_query_and_update_get_raw_values(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Catchall]):
        handle = await client.start_workflow(
            Catchall.run, id=_new_id("catchall"), task_queue=task_queue
        )
        await handle.signal("hello", args=["a", "b"])
        await handle.signal(Catchall.named, 7)  # a named handler wins over the dynamic one
        assert await handle.execute_update("grow", args=["tree", 3]) == "grow done"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("forbidden", args=["x", 1])
        assert isinstance(refused.value.cause, ApplicationError)
        assert refused.value.cause.type == "Forbidden"
        assert await handle.query("how", "far") == "query how ['far'] after 3"
        await handle.signal("stop")
        result = await handle.result()
    assert result == [
        "signal hello ['a', 'b']",
        "named 7",
        "update grow tree x3",
        "signal stop []",
    ]
    await _replays([Catchall], handle)


@workflow.defn
class DynamicAtRunTime:
    """Sets a dynamic query and update handler from its run method."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        def answer(name: str, args: Sequence[RawValue]) -> str:
            return f"{name}: {_texts(args)}"

        def change(name: str, args: Sequence[RawValue]) -> str:
            if name == "stop":
                self.done = True
            return f"changed {name} {_texts(args)}"

        def check(name: str, args: Sequence[RawValue]) -> None:
            if not args:
                raise ApplicationError("an argument is needed", type="Empty")

        workflow.set_dynamic_query_handler(answer)
        workflow.set_dynamic_update_handler(change, validator=check)
        assert workflow.get_dynamic_query_handler() is answer
        assert workflow.get_dynamic_update_handler() is change
        await workflow.wait_condition(lambda: self.done)
        return "stopped"


async def test_dynamic_handlers_set_at_run_time(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[DynamicAtRunTime]):
        handle = await client.start_workflow(
            DynamicAtRunTime.run, id=_new_id("dyn-set"), task_queue=task_queue
        )
        await _first_task_done(handle)
        assert await handle.execute_update("first", "x") == "changed first ['x']"
        with pytest.raises(WorkflowUpdateFailedError) as empty:
            await handle.execute_update("second")
        assert isinstance(empty.value.cause, ApplicationError)
        assert empty.value.cause.type == "Empty"
        assert await handle.query("where", args=["p", "q"]) == "where: ['p', 'q']"
        assert await handle.execute_update("stop", "now") == "changed stop ['now']"
        assert await handle.result() == "stopped"
    await _replays([DynamicAtRunTime], handle)


@workflow.defn
class EarlyUpdates:
    """Sets one update handler in ``__init__`` and one in its run method."""

    def __init__(self) -> None:
        self.done = False
        workflow.set_update_handler("from_init", lambda text: f"init {text}")

    @workflow.run
    async def run(self) -> str:
        workflow.set_update_handler("from_run", self.finish)
        await workflow.wait_condition(lambda: self.done)
        return "finished"

    def finish(self, text: str) -> str:
        self.done = True
        return f"run {text}"


async def test_updates_of_the_first_task_see_handlers_set_in_init_only(
    client: Client, task_queue: str
) -> None:
    # As in temporalio 1.35 (checked on its dev server): the updates of the run's first
    # workflow task run before its run method begins, so a handler the run method sets
    # comes too late for them; one set in __init__ is there.
    handle = await client.start_workflow(
        EarlyUpdates.run, id=_new_id("early"), task_queue=task_queue
    )
    early_init = asyncio.create_task(handle.execute_update("from_init", "a"))
    early_run = asyncio.create_task(handle.execute_update("from_run", "b"))
    await asyncio.sleep(0.5)  # both wait for a worker
    async with Worker(client, task_queue=task_queue, workflows=[EarlyUpdates]):
        assert await early_init == "init a"
        with pytest.raises(WorkflowUpdateFailedError) as missing:
            await early_run
        assert "no update handler 'from_run'" in str(missing.value.cause)
        assert "from_init" in str(missing.value.cause)  # the handlers it has
        assert await handle.execute_update("from_run", "c") == "run c"
        assert await handle.result() == "finished"
    await _replays([EarlyUpdates], handle)


def test_dynamic_handlers_must_take_a_name_and_raw_values() -> None:
    with pytest.raises(InvalidArgumentError, match="Sequence\\[RawValue\\]"):

        @workflow.defn
        class _Wrong:
            @workflow.run
            async def run(self) -> None: ...

            @workflow.signal(dynamic=True)
            def any_signal(self, name: str, value: str) -> None: ...

    with pytest.raises(InvalidArgumentError, match="vararg"):

        @workflow.defn
        class _Spread:
            @workflow.run
            async def run(self) -> None: ...

            @workflow.update(dynamic=True)
            def any_update(self, name: str, *args: Any) -> None: ...


# -- dynamic workflows and activities ------------------------------------------------------


@activity.defn
async def stamp(text: str) -> str:
    return f"stamped {text}"


@activity.defn(dynamic=True)
async def any_activity(args: Sequence[RawValue]) -> str:
    pc = activity.payload_converter()
    texts = [pc.from_payload(a.payload, str) for a in args]
    return f"{activity.info().activity_type}({', '.join(texts)})"


@workflow.defn(dynamic=True)
class AnyWorkflow:
    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> dict[str, Any]:
        pc = workflow.payload_converter()
        values = [pc.from_payload(a.payload) for a in args]
        done = [
            await workflow.execute_activity(stamp, "named", start_to_close_timeout=TIMEOUT),
            await workflow.execute_activity(
                "shout", args=["a", "b"], start_to_close_timeout=TIMEOUT
            ),
        ]
        return {"type": workflow.info().workflow_type, "args": values, "done": done}


@workflow.defn
class Known:
    @workflow.run
    async def run(self, text: str) -> str:
        return f"known {text}"


@workflow.defn(dynamic=True)
class OtherDynamic:
    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> None: ...


@activity.defn(dynamic=True)
def other_dynamic_activity(args: Sequence[RawValue]) -> None: ...


async def test_a_dynamic_workflow_runs_unknown_types_and_calls_a_dynamic_activity(
    client: Client, task_queue: str
) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Known, AnyWorkflow],
        activities=[stamp, any_activity],
    ):
        handle = await client.start_workflow(
            "Invoice", args=["x", 3], id=_new_id("invoice"), task_queue=task_queue
        )
        assert await handle.result() == {
            "type": "Invoice",
            "args": ["x", 3],
            "done": ["stamped named", "shout(a, b)"],
        }
        # A registered type still runs its own definition.
        known = await client.execute_workflow(
            Known.run, "here", id=_new_id("known"), task_queue=task_queue
        )
        assert known == "known here"
        # A dynamic workflow has no type of its own to start by.
        with pytest.raises(InvalidArgumentError, match="dynamic workflow"):
            await client.start_workflow(AnyWorkflow.run, id=_new_id("x"), task_queue=task_queue)
    events = (await handle.fetch_history()).events
    scheduled = [
        e.attributes["activityType"]["name"]
        for e in events
        if e.event_type == "ActivityTaskScheduled"
    ]
    assert scheduled == ["stamp", "shout"]
    await _replays([Known, AnyWorkflow], handle)


async def test_one_dynamic_workflow_and_activity_per_worker(
    client: Client, task_queue: str
) -> None:
    with pytest.raises(InvalidArgumentError, match="More than one dynamic workflow"):
        Worker(client, task_queue=task_queue, workflows=[AnyWorkflow, OtherDynamic])
    with pytest.raises(InvalidArgumentError, match="More than one dynamic activity"):
        Worker(client, task_queue=task_queue, activities=[any_activity, other_dynamic_activity])
    with pytest.raises(InvalidArgumentError, match="More than one dynamic workflow"):
        Replayer(workflows=[OtherDynamic, AnyWorkflow])
    with pytest.raises(InvalidArgumentError, match="single Sequence"):

        @workflow.defn(dynamic=True)
        class _Typed:
            @workflow.run
            async def run(self, text: str) -> None: ...
