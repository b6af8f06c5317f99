"""Namespaces and retention as Temporal has them (behaviour and messages checked on
``temporal server start-dev``): a new database has ``default``; others are registered with
a retention of at least a day, described, listed and updated; an unknown namespace is
NOT_FOUND for starts, reads, listings and workers; runs, task queues and search attributes
of one namespace are not seen from another; closed runs past retention are deleted with
every row they left, open ones never, and a REJECT_DUPLICATE start succeeds after."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from engine import Client, Worker, activity, workflow
from engine._service.clock import Clock
from engine._service.host import ServiceHost
from engine._service.service import Service
from engine._store.namespaces import RUN_TABLES
from engine.client import WorkflowUpdateStage
from engine.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from engine.exceptions import (
    InvalidArgumentError,
    NamespaceNotFoundError,
    RPCError,
    RPCStatusCode,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
)
from engine.operator import (
    DescribeNamespaceRequest,
    Duration,
    ListNamespacesRequest,
    NamespaceConfig,
    NamespaceState,
    RegisterNamespaceRequest,
    UpdateNamespaceInfo,
    UpdateNamespaceRequest,
)
from engine.testing import WorkflowEnvironment

from .test_cli import run_cli

DAY = 86400


@workflow.defn
class Echo:
    @workflow.run
    async def run(self, text: str) -> str:
        return text


@workflow.defn
class Waits:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def _register(name: str, days: float = 3, **fields: Any) -> RegisterNamespaceRequest:
    return RegisterNamespaceRequest(
        namespace=name,
        workflow_execution_retention_period=Duration(seconds=int(days * DAY)),
        **fields,
    )


async def test_a_new_database_has_the_default_namespace(client: Client) -> None:
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace="default")
    )
    assert described.namespace_info.name == "default"
    assert described.namespace_info.state == NamespaceState.NAMESPACE_STATE_REGISTERED
    assert len(described.namespace_info.id) == 36
    ttl = described.config.workflow_execution_retention_ttl
    assert isinstance(ttl, Duration) and ttl.ToTimedelta() == timedelta(days=7)
    assert ttl.seconds == 7 * DAY  # protobuf's field, not timedelta's day remainder


async def test_register_describe_list_and_update(client: Client) -> None:
    service = client.workflow_service
    await service.register_namespace(
        _register("orders", 5, description="the shop", owner_email="a@b.c", data={"team": "x"})
    )
    got = await service.describe_namespace(DescribeNamespaceRequest(namespace="orders"))
    info = got.namespace_info
    assert (info.name, info.description, info.owner_email, info.data) == (
        "orders",
        "the shop",
        "a@b.c",
        {"team": "x"},
    )
    assert got.config.workflow_execution_retention_ttl == Duration(seconds=5 * DAY)

    with pytest.raises(RPCError) as err:
        await service.register_namespace(_register("orders"))
    assert err.value.status == RPCStatusCode.ALREADY_EXISTS
    assert str(err.value) == 'Namespace "orders" already exists'

    # An update changes what it names: empty strings keep a field, data keys merge.
    updated = await service.update_namespace(
        UpdateNamespaceRequest(
            namespace="orders",
            update_info=UpdateNamespaceInfo(description="", data={"region": "eu"}),
            config=NamespaceConfig(workflow_execution_retention_ttl=timedelta(days=2)),
        )
    )
    assert updated.namespace_info.description == "the shop"
    assert updated.namespace_info.data == {"team": "x", "region": "eu"}
    assert updated.config.workflow_execution_retention_ttl == Duration(seconds=2 * DAY)

    for name in ("b-ns", "c-ns"):
        await service.register_namespace(_register(name))
    names, token = [], b""
    while True:  # a page at a time, by name
        page = await service.list_namespaces(
            ListNamespacesRequest(page_size=2, next_page_token=token)
        )
        assert len(page.namespaces) <= 2
        names += [n.namespace_info.name for n in page.namespaces]
        token = page.next_page_token
        if not token:
            break
    assert names == ["b-ns", "c-ns", "default", "orders"]


async def test_bad_registrations_are_refused_and_create_nothing(client: Client) -> None:
    service = client.workflow_service
    with pytest.raises(InvalidArgumentError, match="A valid retention period is not set"):
        await service.register_namespace(RegisterNamespaceRequest(namespace="x"))
    with pytest.raises(InvalidArgumentError, match="at least a day"):
        await service.register_namespace(
            RegisterNamespaceRequest(
                namespace="x", workflow_execution_retention_period=timedelta(hours=1)
            )
        )
    with pytest.raises(InvalidArgumentError, match="namespace must not be empty"):
        await service.register_namespace(_register(""))
    with pytest.raises(InvalidArgumentError, match="namespace is 256 bytes"):
        await service.register_namespace(_register("n" * 256))
    with pytest.raises(NamespaceNotFoundError):
        await service.update_namespace(UpdateNamespaceRequest(namespace="x"))
    listed = await service.list_namespaces(ListNamespacesRequest())
    assert [n.namespace_info.name for n in listed.namespaces] == ["default"]
    with pytest.raises(InvalidArgumentError, match="next_page_token"):
        await service.list_namespaces(ListNamespacesRequest(next_page_token=b"forged"))


async def test_temporalio_s_own_request_messages_are_taken(client: Client) -> None:
    from google.protobuf.duration_pb2 import Duration as PbDuration
    from temporalio.api.namespace.v1 import NamespaceConfig as PbConfig
    from temporalio.api.workflowservice.v1 import (
        DescribeNamespaceRequest as PbDescribe,
    )
    from temporalio.api.workflowservice.v1 import (
        RegisterNamespaceRequest as PbRegister,
    )
    from temporalio.api.workflowservice.v1 import (
        UpdateNamespaceRequest as PbUpdate,
    )

    await client.workflow_service.register_namespace(
        PbRegister(namespace="pb", workflow_execution_retention_period=PbDuration(seconds=3 * DAY))
    )
    # An update without a retention (protobuf's unset message reads as zero) keeps it.
    await client.workflow_service.update_namespace(PbUpdate(namespace="pb", config=PbConfig()))
    got = await client.workflow_service.describe_namespace(PbDescribe(namespace="pb"))
    assert got.config.workflow_execution_retention_ttl.ToTimedelta() == timedelta(days=3)


async def test_an_unknown_namespace_is_not_found_everywhere(
    client: Client, task_queue: str
) -> None:
    elsewhere = Client(client.store, namespace="nope", clock=client.service.clock)
    with pytest.raises(NamespaceNotFoundError) as err:
        await elsewhere.start_workflow(Echo.run, "x", id="a", task_queue=task_queue)
    assert err.value.status == RPCStatusCode.NOT_FOUND
    assert str(err.value).startswith("Namespace nope is not found.")
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.get_workflow_handle("a").describe()
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.get_workflow_handle("a").signal("go")
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.count_workflows()
    with pytest.raises(NamespaceNotFoundError):
        [w async for w in elsewhere.list_workflows()]
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.service.add_search_attributes("nope", {"CustomerId": 2})
    with pytest.raises(RuntimeError, match=r"^Worker validation failed: Namespace nope was not"):
        async with Worker(elsewhere, task_queue=task_queue, workflows=[Echo]):
            pass
    with pytest.raises(RuntimeError, match="Worker validation failed"):
        await Worker(elsewhere, task_queue=task_queue, workflows=[Echo]).run()
    # A worker started without awaiting (as in a notebook cell) fails the same way.
    fatal: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

    async def on_fatal(err: BaseException) -> None:
        fatal.set_result(err)

    worker = Worker(elsewhere, task_queue=task_queue, workflows=[Echo], on_fatal_error=on_fatal)
    worker.start()
    assert "Worker validation failed" in str(await asyncio.wait_for(fatal, 10))
    await worker.shutdown()
    # Registering it is all it takes.
    await client.workflow_service.register_namespace(_register("nope"))
    async with Worker(elsewhere, task_queue=task_queue, workflows=[Echo]):
        assert await elsewhere.execute_workflow(Echo.run, "x", id="a", task_queue=task_queue)
    # A run that is not there is the run's error now, not the namespace's.
    with pytest.raises(WorkflowNotFoundError):
        await elsewhere.get_workflow_handle("never").describe()


async def test_namespaces_keep_their_runs_queues_and_attributes_apart(
    client: Client, task_queue: str
) -> None:
    await client.workflow_service.register_namespace(_register("other"))
    other = Client(client.store, namespace="other", clock=client.service.clock)
    await other.service.add_search_attributes("other", {"CustomerId": 2})
    async with Worker(client, task_queue=task_queue, workflows=[Echo]):
        # Same workflow id and task queue in both: each namespace's own run and worker.
        here = await client.start_workflow(Echo.run, "here", id="same", task_queue=task_queue)
        there = await other.start_workflow(Echo.run, "there", id="same", task_queue=task_queue)
        assert await here.result() == "here"
        await asyncio.sleep(0.3)  # no worker polls "other": its run waits
        assert (await there.describe()).status.name == "RUNNING"
        async with Worker(other, task_queue=task_queue, workflows=[Echo]):
            assert await there.result() == "there"
    assert [w.id async for w in client.list_workflows()] == ["same"]
    assert (await other.count_workflows()).count == 1
    assert (await here.describe()).namespace == "default"
    assert (await there.describe()).namespace == "other"
    assert await client.service.list_search_attributes("default") == {}
    assert set(await other.service.list_search_attributes("other")) == {"CustomerId"}
    with pytest.raises(InvalidArgumentError):  # not registered in default
        [w async for w in client.list_workflows("CustomerId = 'c'")]


def _rows_of(url: str, run_id: str) -> dict[str, int]:
    """The run's rows in every table of the database that has a run_id column."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            tables = [
                t
                for t in inspector.get_table_names()
                if "run_id" in {c["name"] for c in inspector.get_columns(t)}
            ]
            assert set(tables) == set(RUN_TABLES)
            return {
                t: conn.execute(
                    sa.text(f"SELECT COUNT(*) FROM {t} WHERE run_id = :r"), {"r": run_id}
                ).scalar_one()
                for t in tables
            }
    finally:
        engine.dispose()


@workflow.defn
class Busy:
    """Leaves rows in most per-run tables: an activity attempt, a timer, a signal."""

    @workflow.signal
    def poke(self) -> None:
        pass

    @workflow.run
    async def run(self) -> str:
        await workflow.execute_activity("shout", "hi", start_to_close_timeout=timedelta(seconds=10))
        await asyncio.sleep(60)
        return "done"


@activity.defn(name="shout")
async def shout(text: str) -> str:
    return text.upper()


async def test_retention_deletes_closed_runs_and_every_row_they_left(
    env: WorkflowEnvironment, db_url: str, task_queue: str
) -> None:
    client = env.client
    await client.workflow_service.register_namespace(_register("short", days=1))
    short = Client(client.store, namespace="short", clock=client.service.clock)
    async with Worker(short, task_queue=task_queue, workflows=[Busy, Waits], activities=[shout]):
        old = await short.start_workflow(Busy.run, id="old", task_queue=task_queue)
        await old.signal(Busy.poke)
        assert await old.result() == "done"
        still_open = await short.start_workflow(Waits.run, id="open", task_queue=task_queue)
        old_run = (await old.describe()).run_id
        left = _rows_of(db_url, old_run)
        assert left["dn_history_events"] > 10 and left["dn_activity_attempts"] == 1
        assert left["dn_requests"] == 1 and left["dn_visibility"] == 1

        # Within retention a REJECT_DUPLICATE start is refused...
        with pytest.raises(WorkflowAlreadyStartedError):
            await short.start_workflow(
                Busy.run,
                id="old",
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        await env.sleep(timedelta(hours=23))
        assert await short.service.delete_expired_runs() == 0
        await env.sleep(timedelta(hours=2))
        # Under the time-skipping clock the host keeps every run, as Temporal's
        # time-skipping test server does...
        await asyncio.sleep(0.3)
        assert _rows_of(db_url, old_run)["dn_executions"] == 1
        # ... and a sweep deletes the closed run past retention, with every row it left.
        assert await short.service.delete_expired_runs() == 1
        assert _rows_of(db_url, old_run) == {t: 0 for t in RUN_TABLES}
        with pytest.raises(WorkflowNotFoundError):
            await old.describe()
        assert [w.id async for w in short.list_workflows()] == ["open"]
        assert (await still_open.describe()).status.name == "RUNNING"  # open: never deleted
        again = await short.start_workflow(
            Echo.run,
            "again",
            id="old",
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        assert again.result_run_id != old_run
        await still_open.terminate()


async def test_the_sweep_works_in_bounded_batches_and_keeps_other_namespaces(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    client = env.client
    await client.workflow_service.register_namespace(_register("brief", days=1))
    brief = Client(client.store, namespace="brief", clock=client.service.clock)
    for i in range(25):
        await (await brief.start_workflow(Waits.run, id=f"b{i}", task_queue=task_queue)).terminate()
        await (
            await client.start_workflow(Waits.run, id=f"d{i}", task_queue=task_queue)
        ).terminate()
    host = client._host
    assert host is not None
    await host.stop()  # the test does the sweeping
    await env.sleep(timedelta(days=2))
    assert [await client.service.delete_expired_runs(10) for _ in range(4)] == [10, 10, 5, 0]
    assert (await brief.count_workflows()).count == 0
    assert (await client.count_workflows()).count == 25  # default keeps a week
    # Shortening the default namespace's retention reaches the runs already closed.
    await client.workflow_service.update_namespace(
        UpdateNamespaceRequest(
            namespace="default",
            config=NamespaceConfig(workflow_execution_retention_ttl=timedelta(days=1)),
        )
    )
    assert await host.sweep() == 25
    assert (await client.count_workflows()).count == 0


class _Ahead(Clock):
    """Real time, a fixed span ahead (not a skipping clock: the host sweeps on it)."""

    def __init__(self, ahead: timedelta) -> None:
        self.ahead = ahead.total_seconds()

    def now(self) -> float:
        return time.time() + self.ahead


async def test_the_service_host_sweeps_by_itself(client: Client, task_queue: str) -> None:
    for i in range(3):
        await (
            await client.start_workflow(Waits.run, id=f"w{i}", task_queue=task_queue)
        ).terminate()
    kept = await client.start_workflow(Waits.run, id="open", task_queue=task_queue)
    later = Service(client.store, _Ahead(timedelta(days=8)))
    host = ServiceHost(later, sweep_delay=0.0)
    host.start()
    try:
        for _ in range(200):
            if (await client.count_workflows()).count == 1:
                break
            await asyncio.sleep(0.05)
        assert [w.id async for w in client.list_workflows()] == ["open"]
    finally:
        await host.stop()
    await kept.terminate()


async def test_an_environment_makes_the_namespace_it_is_given(db_url: str) -> None:
    env = await WorkflowEnvironment.start_local(database_url=db_url, namespace="made")
    try:
        got = await env.client.service.describe_namespace("made")
        assert got.retention_seconds == 7 * DAY
    finally:
        await env.shutdown()


def test_the_operator_namespace_commands(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys, "operator", "namespace", "create", "orders", "--db", db_url,
        "--description", "the shop", "--data", "team=x",
    )  # fmt: skip
    assert code == 0, err
    assert out.strip() == "created namespace orders (retention 3 days)"  # Temporal CLI's 72h
    code, out, err = run_cli(
        capsys, "operator", "namespace", "update", "--namespace", "orders", "--db", db_url,
        "--retention", "36h", "--email", "a@b.c",
    )  # fmt: skip
    assert code == 0, err
    assert "Retention    1.5 days" in out and "OwnerEmail   a@b.c" in out
    code, out, err = run_cli(
        capsys, "operator", "namespace", "describe", "orders", "--db", db_url, "-o", "json"
    )
    described = json.loads(out)
    assert (described["retention_seconds"], described["data"]) == (1.5 * DAY, {"team": "x"})
    code, out, _ = run_cli(capsys, "operator", "namespace", "list", "--db", db_url)
    assert [line.split()[0] for line in out.splitlines()] == ["NAMESPACE", "default", "orders"]
    code, _, err = run_cli(capsys, "operator", "namespace", "create", "orders", "--db", db_url)
    assert code == 2 and 'Namespace "orders" already exists' in err
    code, _, err = run_cli(
        capsys, "operator", "namespace", "create", "x", "--db", db_url, "--retention", "2h"
    )
    assert code == 2 and "at least a day" in err
    code, _, err = run_cli(capsys, "operator", "namespace", "describe", "nope", "--db", db_url)
    assert code == 2 and "Namespace nope is not found." in err
    code, _, err = run_cli(capsys, "operator", "namespace", "update", "orders", "--db", db_url)
    assert code == 2 and "nothing to update" in err


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.total = 0

    @workflow.signal
    def bump(self) -> None:
        self.total += 1

    @workflow.update
    def add(self, n: int) -> int:
        self.total += n
        return self.total

    @workflow.query
    def value(self) -> int:
        return self.total

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def test_every_other_entry_point_of_an_unknown_namespace_is_not_found(
    client: Client, task_queue: str
) -> None:
    from engine.client import WithStartWorkflowOperation

    elsewhere = Client(client.store, namespace="nope", clock=client.service.clock)
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.start_workflow(
            Counter.run, id="c", task_queue=task_queue, start_signal="bump"
        )
    op = WithStartWorkflowOperation(
        Counter.run,
        id="c",
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    with pytest.raises(NamespaceNotFoundError):
        await elsewhere.start_update_with_start_workflow(
            Counter.add, 1, start_workflow_operation=op, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
    handle = elsewhere.get_workflow_handle("c")
    for call in (
        lambda: handle.query(Counter.value),
        lambda: handle.execute_update(Counter.add, 1),
        lambda: handle.cancel(),
        lambda: handle.terminate(),
        lambda: handle.fetch_history(),
        lambda: elsewhere.get_async_activity_handle(
            workflow_id="c", run_id=None, activity_id="1"
        ).complete("x"),
        lambda: elsewhere.get_async_activity_handle(
            workflow_id="c", run_id=None, activity_id="1"
        ).heartbeat(),
    ):
        with pytest.raises(NamespaceNotFoundError):
            await call()
    # None of it made the namespace.
    with pytest.raises(NamespaceNotFoundError):
        await client.service.describe_namespace("nope")


async def test_the_sweep_racing_requests_and_timers_leaves_nothing_behind(
    client: Client, db_url: str, task_queue: str
) -> None:
    """On PostgreSQL the sweep runs beside signals, terminations, descriptions and timers
    on the same workflow ids: every request gets its ordinary answer (a closed or deleted
    run is NOT_FOUND), none deadlocks, and no row of a deleted run survives."""
    async with Worker(client, task_queue=task_queue, workflows=[Waits, Busy], activities=[shout]):
        closed = []
        for i in range(40):
            handle = await client.start_workflow(Waits.run, id=f"gone-{i}", task_queue=task_queue)
            await handle.terminate()
            closed.append((await handle.describe()).run_id)
        sleepers = [
            await client.start_workflow(Busy.run, id=f"busy-{i}", task_queue=task_queue)
            for i in range(5)
        ]
        later = Service(client.store, _Ahead(timedelta(days=8)))

        async def sweep() -> int:
            total = 0
            while batch := await later.delete_expired_runs(limit=7):
                total += batch
            return total

        async def poke(i: int) -> None:
            handle = client.get_workflow_handle(f"gone-{i}")
            for call in (handle.signal, handle.terminate, handle.describe, handle.cancel):
                try:
                    await (call("bump") if call == handle.signal else call())
                except (WorkflowNotFoundError, RPCError) as err:
                    assert err.status == RPCStatusCode.NOT_FOUND, err

        results = await asyncio.gather(sweep(), *(poke(i) for i in range(40)))
        assert results[0] == 40
        for handle in sleepers:
            await handle.terminate()
    for run_id in closed[:5] + closed[-5:]:
        assert sum(_rows_of(db_url, run_id).values()) == 0
