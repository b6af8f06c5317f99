"""What the REST tests share: the extension's database on each backend, and a request
that answers (status, JSON) instead of raising on 4xx/5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.conftest import _fresh_pg_schema


def _db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """The extension's database, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store' / 'durable.db'}"
    else:
        yield from _fresh_pg_schema()


#: A module that runs its tests on both backends says ``db_url = both_backends`` (it
#: overrides conftest's SQLite-only ``db_url``).
both_backends = pytest.fixture(params=["sqlite", "postgres"], name="db_url")(_db_url)


async def request_json(jp_fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, Any]:
    """``/durable/api/v1/<parts>``: (status, decoded JSON) without raising on 4xx/5xx."""
    try:
        response = await jp_fetch("durable", "api", "v1", *parts, **kwargs)
    except HTTPClientError as err:
        assert err.response is not None
        return err.code, json.loads(err.response.body)
    return response.code, json.loads(response.body)
