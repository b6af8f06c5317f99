"""The widgets' background loop: engine calls and live refreshes, off the kernel's thread.

One daemon thread ("durable-widgets") runs an asyncio loop while at least one widget is
live. The first subscription starts it; when the last one ends (its widget stopped or
closed, or its run finished) the loop stops and the thread exits, so no live widget means
no thread.
Engine calls from a widget's constructor also run here, so they work the same whether the
kernel's own loop is busy with a cell, idle, or absent (plain Python, tests).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = [
    "IDLE_AFTER",
    "MAX_FAILURES",
    "THREAD_NAME",
    "Subscription",
    "Views",
    "call",
    "live_thread",
    "refresh_loop",
    "subscribe",
    "subscriptions",
]

T = TypeVar("T")

#: The name of the widgets' background thread.
THREAD_NAME = "durable-widgets"
#: Seconds after the last front-end view of a widget went away before its refresh pauses.
IDLE_AFTER = 10.0
#: Consecutive failed reads after which a live widget stops refreshing and says so.
MAX_FAILURES = 5

log = logging.getLogger("widgets")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_subs: set[Subscription] = set()
_calls = 0


class Subscription:
    """A live refresh running on the widgets' loop; :meth:`cancel` ends it and waits."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.cancelled = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def active(self) -> bool:
        """Whether the refresh is still running."""
        return not self.done.is_set()

    def cancel(self, timeout: float = 10.0) -> None:
        """Stop the refresh; from any thread but the loop's, wait until it has stopped
        (and the loop thread has exited, when this was the last live widget)."""
        self.cancelled = True  # a refresh not started yet never starts
        loop, task = self._loop, self._task
        if loop is None or task is None or self.done.is_set():
            return
        if threading.current_thread() is _thread:
            task.cancel()
            return
        thread = _thread
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # the loop is already closed: nothing runs
            return
        self.done.wait(timeout)
        if thread is not None and thread is not threading.current_thread():
            with _lock:
                ending = _thread is not thread
            if ending:
                thread.join(timeout)


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _ensure_loop() -> asyncio.AbstractEventLoop:
    """The running loop (started if needed); call with ``_lock`` held."""
    global _loop, _thread
    if _loop is None:
        _loop = asyncio.new_event_loop()
        _thread = threading.Thread(target=_run_loop, args=(_loop,), name=THREAD_NAME, daemon=True)
        _thread.start()
    return _loop


def _release() -> None:
    """Stop the loop when nothing uses it; call with ``_lock`` held."""
    global _loop, _thread
    if _subs or _calls or _loop is None:
        return
    loop, _loop, _thread = _loop, None, None
    loop.call_soon_threadsafe(loop.stop)


def call(coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
    """Run an engine coroutine on the widgets' loop and wait for its result.

    Safe from the kernel's main thread even while its own event loop runs a cell.
    """
    global _calls
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("widgets._live.call() was used on the widgets' own loop thread")
    with _lock:
        loop = _ensure_loop()
        _calls += 1
    thread = _thread
    try:
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the store did not answer within {timeout:g}s") from None
    finally:
        with _lock:
            _calls -= 1
            _release()
            stopped = _thread is not thread
        if stopped and thread is not None:
            thread.join(10)


def subscribe(refresh: Callable[[], Awaitable[None]], name: str) -> Subscription:
    """Run ``refresh()`` on the widgets' loop until it returns or is cancelled."""
    sub = Subscription(name)

    async def body() -> None:
        try:
            await refresh()
        except asyncio.CancelledError:
            pass
        except BaseException as err:  # kept for the widget to show; never kills the loop
            sub.error = err

    def finished(_task: asyncio.Task[None]) -> None:
        with _lock:
            _subs.discard(sub)
            _release()
        sub.done.set()

    with _lock:
        loop = _ensure_loop()
        _subs.add(sub)
        sub._loop = loop

    def start() -> None:
        if sub.cancelled:
            finished_early()
            return
        sub._task = loop.create_task(body(), name=f"durable-widget {name}")
        sub._task.add_done_callback(finished)

    def finished_early() -> None:
        with _lock:
            _subs.discard(sub)
            _release()
        sub.done.set()

    ready = threading.Event()

    def start_and_signal() -> None:
        try:
            start()
        finally:
            ready.set()

    loop.call_soon_threadsafe(start_and_signal)
    if threading.current_thread() is not _thread:
        ready.wait(10)
    return sub


def subscriptions() -> int:
    """How many live refreshes are running."""
    with _lock:
        return len(_subs)


def live_thread() -> threading.Thread | None:
    """The widgets' loop thread, when one runs."""
    with _lock:
        return _thread


class Views:
    """How many front-end views of a widget are open, as its ES module reports them.

    Each view sends ``{"type": "view", "open": true}`` when it renders and ``false`` when
    it is removed (its output cleared, its notebook closed). A widget that has been seen
    and has had no view for :data:`IDLE_AFTER` seconds is idle: its refresh pauses (no
    database reads) until a view opens again. A widget never rendered (a test, a script)
    is never idle.
    """

    def __init__(self, idle_after: float | None = None) -> None:
        self.idle_after = IDLE_AFTER if idle_after is None else idle_after
        self.open = 0
        self.seen = False
        self._since = time.monotonic()
        self._lock = threading.Lock()

    def message(self, content: object) -> bool:
        """Take a message from the front end; True if it was a view message."""
        if not isinstance(content, dict) or content.get("type") != "view":
            return False
        with self._lock:
            if content.get("open"):
                self.open += 1
                self.seen = True
            else:
                self.open = max(0, self.open - 1)
            self._since = time.monotonic()
        return True

    def idle(self) -> bool:
        """Whether nobody has looked for a while (the refresh may pause)."""
        with self._lock:
            return (
                self.seen and self.open == 0 and time.monotonic() - self._since >= self.idle_after
            )


async def refresh_loop(
    read: Callable[[], Awaitable[T]],
    apply: Callable[[T], bool],
    *,
    interval: float,
    views: Views,
    on_error: Callable[[str, bool], None],
    name: str,
    what: str = "",
    fatal: tuple[type[BaseException], ...] = (),
) -> None:
    """What every live widget runs on the widgets' loop: every ``interval`` seconds
    ``apply(await read())``, until ``apply`` returns False.

    While no front-end view is open (``views``) nothing is read. A failed read is shown
    through ``on_error(message, stopped)`` (``what`` opens the reason) and retried after a
    growing pause; after :data:`MAX_FAILURES` in a row, or an error of a ``fatal`` type,
    the refresh stops (``stopped=True``). A read that works again clears the message
    (``on_error("", False)``). A failing ``apply`` (a view bug) stops it too, saying so.
    """
    failures = 0
    while True:
        if views.idle():
            await asyncio.sleep(interval)
            continue
        try:
            value = await read()
        except Exception as err:
            failures += 1
            stop = isinstance(err, fatal) or failures >= MAX_FAILURES
            log.warning("refresh of %s failed (%d in a row): %s", name, failures, err)
            message = f"live refresh {'stopped' if stop else 'failed'}: {what}"
            message += str(err) or type(err).__name__
            if not stop:
                message += f" (retrying, {failures} of {MAX_FAILURES})"
            on_error(message, stop)
            if stop:
                return
            await asyncio.sleep(interval * 2**failures)
            continue
        if failures:
            failures = 0
            on_error("", False)
        try:
            going = apply(value)
        except Exception as err:
            log.exception("refresh of %s could not show what it read", name)
            on_error(f"live refresh stopped: {type(err).__name__}: {err}", True)
            return
        if not going:
            return
        await asyncio.sleep(interval)
