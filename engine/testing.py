"""Test environments: a time-skipping one where timers take no real time, a local one, and
one that runs an activity function on its own.

``WorkflowEnvironment.start_time_skipping()`` gives a client on a fresh database whose
clock jumps to the next timer whenever no task is ready or running, so a 30-day timer or a
retry backoff completes at once. ``start_local()`` runs in real time.
``ActivityEnvironment().run(fn, *args)`` runs activity code with ``engine.activity``'s
functions answering from the environment, as ``temporalio.testing.ActivityEnvironment``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

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
from .common import Priority
from .converter import DataConverter
from .exceptions import CancelledError

__all__ = ["ActivityEnvironment", "WorkflowEnvironment"]


class WorkflowEnvironment:
    """A client plus a private database (and clock) for tests and teaching."""

    def __init__(self, client: Client, clock: Clock, tmpdir: Path | None) -> None:
        self.client = client
        self._clock = clock
        self._tmpdir = tmpdir

    @classmethod
    async def start_time_skipping(
        cls,
        *,
        data_converter: DataConverter | None = None,
        database_url: str | None = None,
    ) -> WorkflowEnvironment:
        """An environment whose clock skips ahead to the next timer when all is waiting."""
        return await cls._start(SkippingClock(), data_converter, database_url)

    @classmethod
    async def start_local(
        cls,
        *,
        data_converter: DataConverter | None = None,
        database_url: str | None = None,
    ) -> WorkflowEnvironment:
        """An environment in real time on a fresh temporary SQLite database."""
        return await cls._start(Clock(), data_converter, database_url)

    @classmethod
    async def _start(
        cls, clock: Clock, data_converter: DataConverter | None, database_url: str | None
    ) -> WorkflowEnvironment:
        tmpdir = None
        if database_url is None:
            tmpdir = Path(tempfile.mkdtemp(prefix="durable-env-"))
            database_url = f"sqlite:///{tmpdir / 'durable.db'}"
        store = await asyncio.to_thread(_open_private, database_url)
        store._users = 1
        client = Client(store, data_converter=data_converter, clock=clock)
        client._acquire_host()
        return cls(client, clock, tmpdir)

    @property
    def supports_time_skipping(self) -> bool:
        """Whether the clock skips."""
        return isinstance(self._clock, SkippingClock)

    async def get_current_time(self) -> datetime:
        """The environment's current time."""
        return datetime.fromtimestamp(self._clock.now(), UTC)

    async def sleep(self, duration: timedelta | float) -> None:
        """Let ``duration`` pass: instantly when skipping, in real time otherwise."""
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        if isinstance(self._clock, SkippingClock):
            self._clock.advance(seconds)
            self.client.store.notifier.notify("timers")
            await asyncio.sleep(0.01)
        else:
            await asyncio.sleep(seconds)

    async def shutdown(self) -> None:
        """Stop the timer loop, close the database, remove a temporary one."""
        await self.client._release_host()
        await self.client.close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    async def __aenter__(self) -> WorkflowEnvironment:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()


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
