"""``workflow.wait`` and ``workflow.as_completed``: ``asyncio.wait`` and ``as_completed`` as
workflow code needs them, with results in an order that is the same on every replay. Plain
asyncio on the running loop (in a workflow, the deterministic one): timeouts are its
``call_later``, which a workflow's loop turns into durable timers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


async def wait(
    fs: Iterable[asyncio.Future[Any]],
    *,
    timeout: float | None = None,
    return_when: str = asyncio.ALL_COMPLETED,
) -> tuple[list[asyncio.Future[Any]], list[asyncio.Future[Any]]]:
    """``asyncio.wait`` for workflow code: wait for the tasks or futures ``fs`` (an
    activity or child handle, ``asyncio.create_task(...)``) until ``return_when``
    (``asyncio.FIRST_COMPLETED``, ``FIRST_EXCEPTION`` or ``ALL_COMPLETED``) or ``timeout``
    seconds (a durable timer). Returns ``(done, pending)`` as lists in the order given:
    ``asyncio.wait``'s sets iterate in an order that can differ on replay."""
    if asyncio.isfuture(fs) or asyncio.iscoroutine(fs):
        raise TypeError(f"wait() takes an iterable of tasks or futures, not {type(fs).__name__}")
    if return_when not in (asyncio.FIRST_COMPLETED, asyncio.FIRST_EXCEPTION, asyncio.ALL_COMPLETED):
        raise ValueError(f"return_when must be an asyncio constant, not {return_when!r}")
    futures = list(fs)
    if not futures:
        raise ValueError("wait() needs at least one task or future")
    if any(asyncio.iscoroutine(f) for f in futures):
        raise TypeError("wait() takes tasks, not coroutines: wrap each in asyncio.create_task()")
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()
    left = len(futures)

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    def one_done(f: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        failed = not f.cancelled() and f.exception() is not None
        if (
            left <= 0
            or return_when == asyncio.FIRST_COMPLETED
            or (return_when == asyncio.FIRST_EXCEPTION and failed)
        ):
            wake()

    for f in futures:
        f.add_done_callback(one_done)
    timer = loop.call_later(timeout, wake) if timeout is not None else None
    try:
        await woken
    finally:
        if timer is not None:
            timer.cancel()
        for f in futures:
            f.remove_done_callback(one_done)
    return [f for f in futures if f.done()], [f for f in futures if not f.done()]


def as_completed(
    fs: Iterable[Awaitable[T]], *, timeout: float | None = None
) -> Iterator[Awaitable[T]]:
    """``asyncio.as_completed`` for workflow code: an iterator of awaitables, each giving
    the next result (or raising the next failure) in the order the awaitables finish;
    after ``timeout`` seconds (a durable timer) the rest raise ``TimeoutError``."""
    if asyncio.isfuture(fs) or asyncio.iscoroutine(fs):
        raise TypeError(f"as_completed() takes an iterable of awaitables, not {type(fs).__name__}")
    loop = asyncio.get_running_loop()
    todo: list[asyncio.Future[T]] = [asyncio.ensure_future(f) for f in list(fs)]
    finished: asyncio.Queue[asyncio.Future[T] | None] = asyncio.Queue()
    count = len(todo)
    timer: asyncio.TimerHandle | None = None

    def one_done(f: asyncio.Future[T]) -> None:
        if f in todo:
            todo.remove(f)
            finished.put_nowait(f)
        if not todo and timer is not None:
            timer.cancel()

    def expire() -> None:
        for f in todo:
            f.remove_done_callback(one_done)
            finished.put_nowait(None)
        todo.clear()

    async def next_result() -> T:
        f = await finished.get()
        if f is None:
            raise TimeoutError("as_completed() timed out")
        return f.result()

    for f in todo:
        f.add_done_callback(one_done)
    if todo and timeout is not None:
        timer = loop.call_later(timeout, expire)
    for _ in range(count):
        yield next_result()
