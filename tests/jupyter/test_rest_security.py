"""The REST API against hostile requests (issue 14, item 7): a state-changing call needs
the server's token (``Authorization``) or, from a browser session, Jupyter's XSRF token;
ids holding ``/``, ``..`` or ``%2F`` address exactly the run they name."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from tornado.httpclient import HTTPClientError, HTTPResponse

from engine import Client, workflow

from .rest import both_backends

db_url = both_backends  # every test here runs on SQLite and PostgreSQL

#: Ids that a careless router would confuse with each other or with another endpoint.
TRICKY_IDS = ["a", "b", "a/b", "..", ".", "a%2Fb", "%2F", "x/../a", "a/history", " a", "?a#b"]


@workflow.defn
class Idle:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def _segment(workflow_id: str) -> str:
    """An id as one path segment, every reserved character escaped. (The dot segments too:
    this client sends them as written, but a browser would resolve them, which is why the
    web UI uses the ``workflow/...?workflow_id=`` form for those.)"""
    quoted = urllib.parse.quote(workflow_id, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _by_query(workflow_id: str, sub: str = "") -> str:
    return f"workflow{sub}?" + urllib.parse.urlencode({"workflow_id": workflow_id})


async def _raw(
    http_server_client: Any,
    jp_base_url: str,
    path: str,
    *,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, HTTPResponse | None]:
    """A request to ``path`` exactly as written (no escaping), without raising on 4xx."""
    url = f"{jp_base_url}durable/api/v1/{path}"
    try:
        response = await http_server_client.fetch(
            url, method=method, body=body, headers=headers or {}, follow_redirects=False
        )
    except HTTPClientError as err:
        assert err.response is not None
        raw = err.response.body
        return err.code, json.loads(raw) if raw.strip().startswith(b"{") else raw, err.response
    return response.code, json.loads(response.body), response


def test_ids_with_slashes_and_dots_address_only_their_run(
    jp_fetch: Any,
    http_server_client: Any,
    jp_base_url: str,
    jp_auth_header: Any,
    run: Any,
    db_url: str,
) -> None:
    async def go() -> None:
        async with await Client.connect(db_url) as client:
            for wid in TRICKY_IDS:
                await client.start_workflow(Idle.run, id=wid, task_queue="nobody")
        for wid in TRICKY_IDS:
            status, body, _ = await _raw(
                http_server_client,
                jp_base_url,
                f"workflows/{_segment(wid)}",
                headers=jp_auth_header,
            )
            assert status == 200, (wid, body)
            assert body["id"] == wid
            status, body, _ = await _raw(
                http_server_client,
                jp_base_url,
                f"workflows/{_segment(wid)}/history",
                headers=jp_auth_header,
            )
            assert status == 200, (wid, body)
            started = body["events"][0]["workflowExecutionStartedEventAttributes"]
            assert started["workflowId"] == wid
            # The same endpoints with the id in the query (what the web UI uses for "..").
            for sub in ("", "/history", "/compact", "/timeline", "/attempts"):
                status, body, _ = await _raw(
                    http_server_client, jp_base_url, _by_query(wid, sub), headers=jp_auth_header
                )
                assert status == 200, (wid, sub, body)
                if sub == "":
                    assert body["id"] == wid
        for bad in (
            "workflow",
            "workflow/history?workflow_id=",
            "workflow?workflow_id=a&workflow_id=b",
        ):
            status, body, _ = await _raw(
                http_server_client, jp_base_url, bad, headers=jp_auth_header
            )
            assert status == 400 and "workflow_id" in body["error"]["message"], (bad, body)
        # Unescaped, "a/b" is not run "a" (nor "b"): it names no endpoint.
        status, body, _ = await _raw(
            http_server_client, jp_base_url, "workflows/a/b", headers=jp_auth_header
        )
        assert status == 404, body
        # Terminating "a/b" terminates it and nothing else.
        status, body, _ = await _raw(
            http_server_client,
            jp_base_url,
            f"workflows/{_segment('a/b')}/terminate",
            method="POST",
            body=json.dumps({"reason": "test"}),
            headers=jp_auth_header,
        )
        assert status == 200, body
        status, body, _ = await _raw(
            http_server_client,
            jp_base_url,
            _by_query("..", "/terminate"),
            method="POST",
            body=json.dumps({"reason": "test"}),
            headers=jp_auth_header,
        )
        assert status == 200, body
        async with await Client.connect(db_url) as client:
            for wid in TRICKY_IDS:
                described = await client.get_workflow_handle(wid).describe()
                expected = "TERMINATED" if wid in ("a/b", "..") else "RUNNING"
                assert described.status.name == expected, wid

    run(go())


def test_a_browser_session_needs_the_xsrf_token_to_change_anything(
    http_server_client: Any, jp_base_url: str, jp_serverapp: Any, run: Any, db_url: str
) -> None:
    """Logged in by cookie (as a browser is), a POST without Jupyter's XSRF token is
    refused and changes nothing; with it, it goes through. GETs need no XSRF token."""

    async def go() -> None:
        async with await Client.connect(db_url) as client:
            await client.start_workflow(Idle.run, id="target", task_queue="nobody")
        token = jp_serverapp.identity_provider.token
        # Log in as a browser does: the token once in the URL, a cookie afterwards.
        login = await http_server_client.fetch(
            f"{jp_base_url}durable/?token={token}", follow_redirects=False, raise_error=False
        )
        cookies = dict(
            header.split(";", 1)[0].split("=", 1) for header in login.headers.get_list("Set-Cookie")
        )
        assert "_xsrf" in cookies and len(cookies) >= 2, login.headers  # login + XSRF
        cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        status, body, _ = await _raw(
            http_server_client, jp_base_url, "workflows/target", headers={"Cookie": cookie}
        )
        assert status == 200, body  # the session reads
        refused = 0
        for path, payload in (
            ("workflows/target/terminate", {"reason": "x"}),
            ("workflows/target/cancel", {}),
            ("workflows/target/signal", {"name": "s", "args": []}),
            ("workflows", {"workflow": "Idle", "workflow_id": "new", "task_queue": "q"}),
        ):
            status, body, _ = await _raw(
                http_server_client,
                jp_base_url,
                path,
                method="POST",
                body=json.dumps(payload),
                headers={"Cookie": cookie},
            )
            assert status == 403, (path, body)
            refused += 1
        async with await Client.connect(db_url) as client:
            described = await client.get_workflow_handle("target").describe()
            assert described.status.name == "RUNNING"
            assert described.history_length == 2  # no signal, no cancel request
            assert [e.id async for e in client.list_workflows()] == ["target"]
        # With the XSRF token (header and cookie, as the web UI sends them): accepted.
        status, body, _ = await _raw(
            http_server_client,
            jp_base_url,
            "workflows/target/terminate",
            method="POST",
            body=json.dumps({"reason": "x"}),
            headers={"Cookie": cookie, "X-XSRFToken": urllib.parse.unquote(cookies["_xsrf"])},
        )
        assert status == 200, body
        assert refused == 4

    run(go())
