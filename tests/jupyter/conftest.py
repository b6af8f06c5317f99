"""pytest-jupyter's server fixtures (jp_serverapp, jp_fetch, ...) for tests/jupyter only.

Tests here are plain functions that drive pytest-jupyter's event loop themselves (``run``):
the server, the extension's client and the test's worker must share that one loop, and
pytest-asyncio (auto mode, for the rest of the suite) would otherwise run them on its own.
"""

from __future__ import annotations

from pytest_jupyter.jupyter_server import *  # noqa: F403
