"""Test environments: a time-skipping one where timers take no real time, and a local one.

``WorkflowEnvironment.start_time_skipping()`` gives a client on a fresh database whose
clock jumps to the next timer whenever no task is ready or running, so a 30-day timer or a
retry backoff completes at once. ``start_local()`` runs in real time.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType

from ._service.clock import Clock, SkippingClock
from ._store.gateway import Store
from .client import Client
from .converter import DataConverter

__all__ = ["WorkflowEnvironment"]


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
