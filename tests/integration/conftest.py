"""Fixtures of the integration tests that several modules share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engine import Client
from engine._store.gateway import Store


@pytest.fixture
async def elsewhere(db_url: str) -> AsyncIterator[Client]:
    """A client on another store of the same database: another process, in effect."""
    store = Store(db_url)
    store.open()
    other = Client(store)
    try:
        yield other
    finally:
        await other.close()
        store.close()


@pytest.fixture
def calls_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any, str], list[list[Any]]]:
    """``calls_of(obj, name)``: wraps the async method ``obj.name`` of one list argument
    (for the test's length) and returns the list of the arguments it is called with."""

    def spy(obj: Any, name: str) -> list[list[Any]]:
        seen: list[list[Any]] = []
        real = getattr(obj, name)

        async def recorded(arg: Any) -> Any:
            seen.append(list(arg))
            return await real(arg)

        monkeypatch.setattr(obj, name, recorded)
        return seen

    return spy
