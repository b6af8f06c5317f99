"""pytest-jupyter's server fixtures (jp_serverapp, jp_fetch, ...) for tests/jupyter only.

Tests here are plain functions that drive pytest-jupyter's event loop themselves (``run``):
the server, the extension's client and the test's worker must share that one loop, and
pytest-asyncio (auto mode, for the rest of the suite) would otherwise run them on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """The extension's database (a test module may override this fixture)."""
    return f"sqlite:///{tmp_path / 'store' / 'durable.db'}"


@pytest.fixture
def jp_server_config(db_url: str) -> dict[str, Any]:
    """A Jupyter server with the extension, on ``db_url``."""
    return {
        "ServerApp": {"jpserver_extensions": {"kernel_ext": True}},
        "DurableExtension": {"database_url": db_url},
    }


@pytest.fixture
def run(jp_asyncio_loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a coroutine on the server's loop (where the extension's client lives)."""
    return jp_asyncio_loop.run_until_complete
