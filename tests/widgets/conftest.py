"""Helpers for widget tests: waiting for a widget's state, and checking nothing is left."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from widgets import _live


async def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll ``check()`` until it returns something truthy (the test's loop keeps running,
    so workers on it make progress)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def widget_threads() -> list[threading.Thread]:
    """The widgets' background threads that are alive."""
    return [t for t in threading.enumerate() if t.name == _live.THREAD_NAME]


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    """Every widget test ends with no live refresh and no widgets thread."""
    yield
    assert _live.subscriptions() == 0, "a widget refresh was left running"
    assert widget_threads() == [], "the widgets thread was left running"
