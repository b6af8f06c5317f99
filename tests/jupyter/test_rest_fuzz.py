"""Fuzzing the REST API (issue 14, item 5): request bodies, URL paths and query strings.

Hypothesis generates requests to ``/durable/api/v1/``: GETs and POSTs to paths built
from the real endpoints' segments and junk (random text, percent-encodings such as
``%2F``, ``%00`` and ``%ff``, ``..``), query strings with ``limit``, ``page_token``,
``run_id``, ``query`` and ``page`` holding junk, and POST bodies that are random bytes,
random JSON values, or objects with each endpoint's real field names (``workflow_type``,
``workflow_id``, ``task_queue``, ``args``, ``name``, ``reason``) holding good and bad
values. The property: never a 5xx; every 4xx is JSON of the form
``{"error": {"code", "message"}}``; a refused (4xx) request leaves the store as it was.
Deterministic (``derandomize=True``) and bounded in examples.

One server serves every example: the examples run inside one test (an inner ``@given``
function called once, on the server's loop), not as a ``@given`` test taking pytest's
function-scoped fixtures, which Hypothesis would not reset between examples (its
``function_scoped_fixture`` health check). Sharing is sound here because the property
is about each request on its own: a refused request changes nothing (checked after each
one), and an accepted one (a start, a signal, a cancel) leaves a store that later
examples may use like any other.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Client

from . import test_rest_security
from .test_rest_security import Idle
from .test_server_ext import _store_state

#: The extension's database on SQLite and on PostgreSQL (test_rest_security's fixture).
db_url = test_rest_security.db_url

RUN_IDS = ["idle-1", "idle-2", "a/b"]
ENDPOINTS = ["history", "attempts", "compact", "timeline", "signal", "query", "update"]
ENDPOINTS += ["cancel", "terminate"]
# Query and update wait for a worker (there is none), so they only ever address runs
# that do not exist: they are refused with a 404 (or a 400 for a bad body) at once.
WAITING = {"query", "update"}
NASTY = ["\x00", "\ud800", "x" * 5000, "é€😀", "", " ", "'", '"', "%", "..", "/", "\\"]

segment_text = st.text(max_size=10)
raw_segments = st.sampled_from(
    [
        *("..", ".", "%2F", "%2f", "%2E%2E", "%00", "%ff", "%fe%ff", "%", "%zz", "%C3"),
        *("a%20b", "%25", "%3F", "%23", "~", "workflows", "info", *ENDPOINTS, "", "x" * 300),
    ]
)
ids = st.sampled_from(["nope", "..", "%2E%2E", "a%2Fb", "%00", "%ff"]) | segment_text.map(
    lambda t: urllib.parse.quote(t, safe="")
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(NASTY),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
field_values = st.sampled_from(["Idle", "nobody", "idle-1", "w-new", *NASTY]) | json_values
query_values = (
    st.sampled_from(["", "0", "-1", "50", "1000", "1001", "2**70", "1e3", "nan", "\x00", "é"])
    | st.sampled_from(["WorkflowId = 'idle-1'", "WorkflowId = 'a' AND WorkflowId = 'b'", "x ="])
    | st.sampled_from(["eyJ2IjoxLCJzdGFydCI6MSwicnVuIjoiXHVkODAwIn0=", "bm90IGpzb24="])
    | st.text(max_size=12)
)
QUERY_NAMES = ["limit", "page_token", "run_id", "query", "page", "x"]


def _forged(run_id: str, start: str = "1") -> str:
    """A page token of the engine's form, naming a position it never handed out."""
    text = f'{{"v": 1, "start": {start}, "run": {json.dumps(run_id)}}}'
    return base64.urlsafe_b64encode(text.encode()).decode()


page_tokens = st.sampled_from(
    [
        *(_forged("\ud800"), _forged("\x00"), _forged("x", "1e400"), _forged("x", "NaN")),
        *(_forged("x" * 2000), _forged("r"), "bm90IGpzb24=", "=", "é", "A" * 1001),
    ]
) | st.text(st.characters(codec="ascii"), max_size=20)


@st.composite
def bodies(draw: st.DrawFn, endpoint: str) -> bytes | None:
    """A POST body: random bytes, a random JSON value, or an object with the endpoint's
    real field names (and sometimes a stray one) holding good and bad values."""
    kind = draw(st.sampled_from(["fields", "fields", "fields", "json", "bytes", "empty"]))
    if kind == "bytes":
        return draw(st.binary(max_size=30))
    if kind == "empty":
        return draw(st.sampled_from([b"", b"  ", b"\n"]))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    fields = {
        "workflows": ["workflow_type", "workflow_id", "task_queue", "args"],
        "signal": ["name", "args"],
        "query": ["name", "args"],
        "update": ["name", "args"],
        "cancel": ["reason"],
        "terminate": ["reason"],
    }.get(endpoint, ["name", "reason"])
    data: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields))):
        if name == "args":
            data[name] = draw(st.lists(json_values, max_size=3) | json_values)
        else:
            data[name] = draw(field_values)
    if draw(st.integers(0, 5)) == 0:
        data[draw(st.sampled_from(["arg", "id", "", "Name"]))] = 1
    text = json.dumps(data)
    if (
        draw(st.integers(0, 5)) == 0
    ):  # JSON the server's parser reads, but json.dumps does not write
        text = text.replace("}", ', "name": NaN}', 1) if data else '{"reason": 1e400}'
    return text.encode("utf-8", "surrogatepass")


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None]:
    """(method, path below the API prefix with its query string, body)."""
    shape = draw(st.sampled_from(["endpoint", "endpoint", "list", "random"]))
    if shape == "endpoint":
        endpoint = draw(st.sampled_from(["", *ENDPOINTS]))
        if endpoint in WAITING:
            wid = draw(ids.filter(lambda i: i not in RUN_IDS and i != "a%2Fb"))
        else:
            wid = draw(st.sampled_from(["idle-1", "idle-2", "a%2Fb"]) | ids)
        path = f"workflows/{wid}" + (f"/{endpoint}" if endpoint else "")
        if endpoint in WAITING and draw(st.booleans()):
            path += "/"
        method = (
            "POST" if endpoint in ENDPOINTS[4:] else draw(st.sampled_from(["GET", "GET", "POST"]))
        )
    elif shape == "list":
        endpoint, path = "workflows", draw(st.sampled_from(["workflows", "workflows/", "info"]))
        method = draw(st.sampled_from(["GET", "GET", "POST"]))
    else:
        endpoint = "random"
        parts = draw(st.lists(raw_segments | segment_text.map(urllib.parse.quote), max_size=4))
        path = "/".join(parts)
        if any(p in WAITING for p in parts):
            path += "/nope"  # never a query or update that reaches a run
        method = draw(st.sampled_from(["GET", "POST"]))
    params = draw(st.lists(st.tuples(st.sampled_from(QUERY_NAMES), query_values), max_size=3))
    if shape == "list" and draw(st.booleans()):
        params.append(("page_token", draw(page_tokens)))
    if params:
        path += "?" + urllib.parse.urlencode(params, errors="surrogatepass")
    body = draw(bodies(endpoint)) if method == "POST" else None
    return method, path, body


def test_fuzzed_requests_are_never_a_5xx_and_refused_ones_change_nothing(
    http_server_client: Any, jp_base_url: str, jp_auth_header: Any, run: Any, db_url: str
) -> None:
    async def start() -> None:
        async with await Client.connect(db_url) as client:
            for wid in RUN_IDS:
                await client.start_workflow(Idle.run, id=wid, task_queue="nobody")

    run(start())
    statuses: dict[int, int] = {}

    async def fetch(method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        response = await http_server_client.fetch(
            f"{jp_base_url}durable/api/v1/{path}",
            method=method,
            body=body,
            headers=jp_auth_header,
            follow_redirects=False,
            raise_error=False,
            allow_nonstandard_methods=True,
        )
        return response.code, response.body

    @settings(
        derandomize=True,
        max_examples=250,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests())
    def prop(request: tuple[str, str, bytes | None]) -> None:
        method, path, body = request
        before = run(_store_state(db_url))
        status, raw = run(fetch(method, path, body))
        statuses[status // 100] = statuses.get(status // 100, 0) + 1
        assert status < 500, (request, status, raw[:500])
        data = json.loads(raw)
        if status >= 400:
            assert set(data) == {"error"}, (request, data)
            error = data["error"]
            assert set(error) == {"code", "message"}, (request, data)
            assert isinstance(error["code"], str) and error["code"], (request, data)
            assert isinstance(error["message"], str) and error["message"], (request, data)
            assert run(_store_state(db_url)) == before, request

    prop()
    assert statuses.get(2) and statuses.get(4), statuses  # both outcomes were exercised
