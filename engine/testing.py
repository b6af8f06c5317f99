"""Test environments: a time-skipping one where timers take no real time, a local one, one
over a client you already have, and one that runs an activity function on its own.

As ``temporalio.testing``: ``WorkflowEnvironment.start_time_skipping()`` gives a client on a
fresh database whose clock jumps to the next timer whenever a result is awaited and no task
is ready or running, so a 30-day timer or a retry backoff completes at once; ``env.sleep``
moves that clock from timer to timer, letting the workflows run at each. ``start_local()``
runs in real time, and ``WorkflowEnvironment.from_client(client)`` uses ``client`` as it is.
``ActivityEnvironment().run(fn, *args)`` runs activity code with ``engine.activity``'s
functions answering from the environment, as ``temporalio.testing.ActivityEnvironment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._service.clock import Clock, SkippingClock
from ._store.gateway import Store
from .activity import (
    ActivityCancellationDetails,
    Info,
    _Context,
    _current,
    _Signal,
)
from .client import Client
from .common import Priority, QueryRejectCondition, SearchAttributeKey
from .converter import DataConverter
from .exceptions import CancelledError

if TYPE_CHECKING:
    from ._store.tx import StoreTx
    from .client import WorkflowHandle

__all__ = ["ActivityEnvironment", "WorkflowEnvironment"]


@dataclass(frozen=True)
class _ClientOptions:
    """The options an environment gives its client."""

    namespace: str
    identity: str | None
    query_reject_condition: QueryRejectCondition | None


class WorkflowEnvironment:
    """A client to run workflows on in tests (``temporalio.testing.WorkflowEnvironment``).

    Start one with :meth:`start_time_skipping` (a fresh database whose clock skips, as
    Temporal's time-skipping test server), :meth:`start_local` (a fresh database in real
    time) or :meth:`from_client` (a client you already have). Use :attr:`client`; end with
    :meth:`shutdown`, or ``async with await WorkflowEnvironment.start_time_skipping() as
    env:``.

    Deliberate differences from ``temporalio``: the factories take ``database_url`` (the
    database to use instead of a fresh temporary SQLite one) and none of the server's
    options; ``assert`` failures in workflows are not turned into workflow failures (a
    failed ``assert`` fails the workflow task, which is retried, as any exception's).
    """

    @classmethod
    def from_client(cls, client: Client) -> WorkflowEnvironment:
        """An environment on ``client``, as it is: no time skipping of its own
        (:attr:`supports_time_skipping` is False, :meth:`sleep` waits in real time,
        :meth:`get_current_time` is the system's time), and :meth:`shutdown` leaves the
        client open: it stays the caller's to close."""
        return cls(client)

    @classmethod
    async def start_local(
        cls,
        *,
        namespace: str = "default",
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        default_workflow_query_reject_condition: QueryRejectCondition | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        database_url: str | None = None,
        search_attributes: Sequence[SearchAttributeKey[Any]] = (),
    ) -> WorkflowEnvironment:
        """An environment in real time on a fresh temporary SQLite database (or on
        ``database_url``). :meth:`sleep` waits in real time. ``namespace``, ``identity``
        and ``default_workflow_query_reject_condition`` are its client's, as for
        :meth:`Client.connect <engine.client.Client.connect>`; ``rpc_metadata`` is
        ignored (no gRPC here). The namespace is created if the database has none of that
        name, as the dev server's ``--namespace`` does. ``search_attributes``: keys
        registered in the namespace before it is handed out (as ``temporalio``'s local dev
        server registers them)."""
        del rpc_metadata
        options = _ClientOptions(namespace, identity, default_workflow_query_reject_condition)
        env = await _OwnDatabaseEnvironment._start(Clock(), data_converter, database_url, options)
        if search_attributes:
            try:
                await env.client.service.add_search_attributes(
                    env.client.namespace,
                    {key.name: key.indexed_value_type for key in search_attributes},
                )
            except BaseException:
                await env.shutdown()
                raise
        return env

    @classmethod
    async def start_time_skipping(
        cls,
        *,
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        default_workflow_query_reject_condition: QueryRejectCondition | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        database_url: str | None = None,
    ) -> WorkflowEnvironment:
        """An environment whose clock skips, as Temporal's time-skipping test server's.

        Awaiting a workflow's result (``handle.result()``, ``client.execute_workflow``)
        lets time jump to the next timer whenever no workflow or activity task is ready or
        running; :meth:`sleep` moves time forward by its duration, timer by timer. Time
        is global to the environment, not to one workflow. On a fresh temporary SQLite
        database, or on ``database_url``. The client options are as for
        :meth:`start_local`.
        """
        del rpc_metadata
        options = _ClientOptions("default", identity, default_workflow_query_reject_condition)
        return await _TimeSkippingEnvironment._start(
            SkippingClock(), data_converter, database_url, options
        )

    def __init__(self, client: Client) -> None:
        """An environment on ``client``; most callers use a factory method instead."""
        self._client = client

    async def __aenter__(self) -> WorkflowEnvironment:
        return self

    async def __aexit__(self, *args: object) -> None:
        await self.shutdown()

    @property
    def client(self) -> Client:
        """The client of this environment."""
        return self._client

    async def shutdown(self) -> None:
        """Shut the environment down (one from :meth:`from_client` leaves its client open)."""

    async def sleep(self, duration: timedelta | float) -> None:
        """Let ``duration`` (seconds, or a timedelta) pass: in real time here; in a
        time-skipping environment by moving its clock."""
        await asyncio.sleep(_seconds(duration))

    async def get_current_time(self, handle: WorkflowHandle | None = None) -> datetime:
        """The environment's current time (UTC): the system's here, the skipping clock's in
        a time-skipping environment. ``handle`` is accepted for ``temporalio``'s signature
        (its per-workflow clocks) and ignored: one clock serves every workflow."""
        return datetime.now(UTC)

    @property
    def supports_time_skipping_v1(self) -> bool:
        """True for a :meth:`start_time_skipping` environment: one clock for every workflow,
        skipped as Temporal's (V1) time-skipping test server skips it."""
        return False

    @property
    def supports_time_skipping_v2(self) -> bool:
        """Always False: there are no per-workflow clocks (Temporal's V2) here."""
        return False

    @property
    def supports_time_skipping(self) -> bool:
        """Whether this environment's time skips (:meth:`start_time_skipping`)."""
        return self.supports_time_skipping_v1 or self.supports_time_skipping_v2

    @contextlib.contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """In a time-skipping environment, waits for a result begun inside the block do
        not skip time (they wait in real time; :meth:`sleep` still skips). A no-op here."""
        yield None


def _seconds(duration: timedelta | float) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


class _OwnDatabaseEnvironment(WorkflowEnvironment):
    """An environment with a client of its own (on a fresh database unless told one),
    hosting the service's timer loop: :meth:`shutdown` closes them."""

    def __init__(self, client: Client, tmpdir: Path | None) -> None:
        super().__init__(client)
        self._tmpdir = tmpdir

    @classmethod
    async def _start(
        cls,
        clock: Clock,
        data_converter: DataConverter | None,
        database_url: str | None,
        options: _ClientOptions,
    ) -> WorkflowEnvironment:
        tmpdir = None
        if database_url is None:
            tmpdir = Path(tempfile.mkdtemp(prefix="durable-env-"))
            database_url = f"sqlite:///{tmpdir / 'durable.db'}"
        try:
            store = await asyncio.to_thread(_open_private, database_url)
        except BaseException:
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        store._users = 1
        client = Client(
            store,
            namespace=options.namespace,
            data_converter=data_converter,
            identity=options.identity,
            clock=clock,
            default_workflow_query_reject_condition=options.query_reject_condition,
        )
        if options.namespace != "default":  # made as the dev server's --namespace makes it
            try:
                await client.service.ensure_namespace(options.namespace)
            except BaseException:
                await client.close()
                if tmpdir is not None:
                    shutil.rmtree(tmpdir, ignore_errors=True)
                raise
        client._acquire_host()
        return cls(client, tmpdir)

    async def shutdown(self) -> None:
        """Stop the timer loop, close the client and its database, remove a temporary one."""
        client = self._client
        if client._host is not None:
            await client._release_host()
        await client.close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    async def get_current_time(self, handle: WorkflowHandle | None = None) -> datetime:
        """The current time of the environment's clock (UTC)."""
        return datetime.fromtimestamp(self._client.clock.now(), UTC)


#: How long :meth:`_TimeSkippingEnvironment.sleep` waits, in real time, before looking
#: again at work in progress (doubling from the first to the second).
_IDLE_POLL = (0.001, 0.02)


class _TimeSkippingEnvironment(_OwnDatabaseEnvironment):
    """:meth:`WorkflowEnvironment.start_time_skipping`'s environment."""

    @property
    def _clock(self) -> SkippingClock:
        clock = self._client.clock
        assert isinstance(clock, SkippingClock)
        return clock

    @property
    def supports_time_skipping_v1(self) -> bool:
        return True

    async def sleep(self, duration: timedelta | float) -> None:
        """Move time forward by ``duration``, as Temporal's time-skipping test server does:
        timer by timer, letting the workflows run at each.

        The clock jumps to the next due timer (a workflow's timer, a retry backoff, a
        timeout), the timer fires, and the next jump waits until no workflow or activity
        task is ready or running, so a workflow waking every 30 days runs at day 30, 60
        and 90 of a 90-day sleep, not once at its end. While a task is ready or running
        (an activity at work, a workflow task no worker has taken yet) time does not jump:
        it runs in real time, as on Temporal's server, where such a task holds time
        skipping locked. No jump passes the end of the sleep; work that timers due at its
        very end start may still be running when it returns.
        """
        clock = self._clock
        client = self._client
        end = clock.now() + max(0.0, _seconds(duration))
        pause = _IDLE_POLL[0]
        with clock.sleeping_until(end):
            while True:
                now, busy, next_at = await client.store.read(_sleep_state, clock)
                due = next_at is not None and next_at <= now
                if due and (
                    await client.service.fire_due_timers()
                    + await client.service.fire_due_schedules()
                ):
                    pause = _IDLE_POLL[0]
                    continue  # what fired made work: wait for it before the next jump
                if now >= end:
                    return
                if busy or due:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, _IDLE_POLL[1])
                    continue
                clock.advance_to(end if next_at is None else min(next_at, end))
                pause = _IDLE_POLL[0]

    @contextlib.contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Waits for a result begun inside the block do not skip time: they wait in real
        time (``temporalio``'s V1 environment). :meth:`sleep` still skips."""
        with self._clock.auto_skipping_disabled():
            yield None


def _sleep_state(tx: StoreTx, clock: SkippingClock) -> tuple[float, bool, float | None]:
    """The time, whether a workflow or activity task is ready or running then, and when
    the next timer is due: what the service's ``skip_to_next_timer`` looks at, in one
    snapshot. The clock is read after the snapshot is taken (by the first read): a task
    committed before it was made ready at an earlier time, so it counts as ready. Read
    before, a task a host committed in between (ready a moment after the time read) would
    look not yet due, and the clock would jump to the next timer over it."""
    next_at = tx.next_timer_at()
    now = clock.now()
    return now, tx.work_in_progress(now), next_at


def _open_private(url: str) -> Store:
    store = Store(url)
    store.open()
    return store


class ActivityEnvironment:
    """Runs activity code outside a worker (``temporalio.testing.ActivityEnvironment``).

    Set ``info`` (start from :meth:`default_info` and ``dataclasses.replace``), catch
    heartbeats with ``on_heartbeat``, and call :meth:`cancel` or :meth:`worker_shutdown`
    while the activity runs. ``run(fn, *args)`` returns the result of a plain function and
    an awaitable for an ``async def`` one. As in a worker here, a plain function learns
    of :meth:`cancel` when its next ``activity.heartbeat()`` raises
    :class:`~engine.exceptions.CancelledError` (``temporalio`` raises in its thread at
    once); an ``async def`` one has its task cancelled.
    """

    def __init__(self, client: Client | None = None) -> None:
        """An environment whose ``activity.client()`` is ``client`` (async code only)."""
        self.info = ActivityEnvironment.default_info()
        self.on_heartbeat: Callable[..., None] = lambda *args: None
        self.payload_converter = DataConverter.default.payload_converter
        self._client = client
        self._cancelled: ActivityCancellationDetails | None = None
        self._worker_shutdown = False
        self._running: set[_EnvActivity] = set()

    @staticmethod
    def default_info() -> Info:
        """The info activities see unless ``info`` is replaced (Temporal's defaults)."""
        epoch = datetime.fromtimestamp(0, UTC)
        return Info(
            activity_id="test",
            activity_type="unknown",
            attempt=1,
            current_attempt_scheduled_time=epoch,
            heartbeat_details=[],
            heartbeat_timeout=None,
            is_local=False,
            namespace="default",
            schedule_to_close_timeout=timedelta(seconds=1),
            scheduled_time=epoch,
            start_to_close_timeout=timedelta(seconds=1),
            started_time=epoch,
            task_queue="test",
            task_token=b"test",
            workflow_id="test",
            workflow_namespace="default",
            workflow_run_id="test-run",
            workflow_type="test",
            priority=Priority.default,
            retry_policy=None,
            activity_run_id=None,
        )

    def cancel(
        self,
        cancellation_details: ActivityCancellationDetails = ActivityCancellationDetails(
            cancel_requested=True
        ),
    ) -> None:
        """Cancel the running activity (and any run later); only the first call counts."""
        if self._cancelled is not None:
            return
        self._cancelled = cancellation_details
        for running in list(self._running):
            running.cancel(cancellation_details)

    def worker_shutdown(self) -> None:
        """Tell the activity the worker is shutting down; only the first call counts."""
        if self._worker_shutdown:
            return
        self._worker_shutdown = True
        for running in list(self._running):
            running.context.worker_shutdown.set()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` as activity code: its result, or for ``async def`` an awaitable."""
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 (a callable class instance)
        )
        if is_async:
            return self._run_async(fn, args, kwargs)
        with _EnvActivity(self, None):
            return fn(*args, **kwargs)

    async def _run_async(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        with _EnvActivity(self, asyncio.get_running_loop()) as running:
            running.task = asyncio.ensure_future(fn(*args, **kwargs))
            if self._cancelled is not None:
                running.task.cancel()
            return await running.task


class _EnvActivity:
    """One activity run by an :class:`ActivityEnvironment`: its context while it runs."""

    def __init__(self, env: ActivityEnvironment, loop: asyncio.AbstractEventLoop | None) -> None:
        self.env = env
        self.task: asyncio.Future[Any] | None = None
        self._shields = 0
        self.context = _Context(
            lambda: env.info,
            self._heartbeat,
            cancelled=_Signal(loop),
            worker_shutdown=_Signal(loop),
            client=env._client if loop is not None else None,
            payload_converter=env.payload_converter,
            shield=None if loop is not None else self._shield,
        )
        self._token: Any = None

    def __enter__(self) -> _EnvActivity:
        if self.env._cancelled is not None:
            self.context.cancel(self.env._cancelled)
        if self.env._worker_shutdown:
            self.context.worker_shutdown.set()
        self.env._running.add(self)
        self._token = _current.set(self.context)
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)
        self.env._running.discard(self)

    def cancel(self, why: ActivityCancellationDetails) -> None:
        self.context.cancel(why)
        if self.task is not None and not self.task.done():
            self.task.get_loop().call_soon_threadsafe(self.task.cancel)

    def _heartbeat(self, details: Sequence[Any]) -> None:
        self.env.on_heartbeat(*details)
        if self.task is None and self.context.cancelled.is_set() and not self._shields:
            raise CancelledError("Activity cancelled")

    @contextlib.contextmanager
    def _shield(self) -> Iterator[None]:
        self._shields += 1
        try:
            yield
        finally:
            self._shields -= 1
            if not self._shields and self.context.cancelled.is_set():
                raise CancelledError("Activity cancelled")
