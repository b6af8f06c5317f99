"""The REST API for finding runs (issue 15, item 4): the full List Filter on the list,
``workflows/count`` with ``GROUP BY ExecutionStatus``, search attributes listed,
registered and removed, and listed runs carrying their attributes decoded. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import logging
import urllib.parse
from datetime import UTC, datetime
from typing import Any

import pytest

from engine import Client, workflow
from engine.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from engine.exceptions import RPCError, RPCStatusCode
from engine.operator import AddSearchAttributesRequest

from .rest import both_backends
from .rest import request_json as _request

db_url = both_backends  # every test here runs on SQLite and PostgreSQL

PLACED = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


@workflow.defn
class Idle:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def _seed(db_url: str) -> None:
    """Four open runs: two of customer abc (one with every attribute), one of def, one
    with none; then one of them terminated."""
    async with await Client.connect(db_url) as client:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                {"CustomerId": "Keyword", "Amount": "Int", "PlacedAt": "Datetime", "Tags": 7}
            )
        )
        key = SearchAttributeKey
        full = [
            SearchAttributePair(key.for_keyword("CustomerId"), "abc"),
            SearchAttributePair(key.for_int("Amount"), 5),
            SearchAttributePair(key.for_datetime("PlacedAt"), PLACED),
            SearchAttributePair(key.for_keyword_list("Tags"), ["gift", "rush"]),
        ]
        for wid, pairs in (
            ("a1", full),
            ("a2", full[:1]),
            ("d1", [SearchAttributePair(key.for_keyword("CustomerId"), "def")]),
            ("none", []),
        ):
            await client.start_workflow(
                Idle.run,
                id=wid,
                task_queue="nobody",
                search_attributes=TypedSearchAttributes(pairs) if pairs else None,
            )
        await client.get_workflow_handle("a2").terminate("done")


def test_count_endpoint_counts_and_groups_by_status(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        await _seed(db_url)
        assert await _request(jp_fetch, "workflows", "count") == (200, {"count": 4, "groups": []})
        status, body = await _request(
            jp_fetch, "workflows", "count", params={"query": "CustomerId = 'abc'"}
        )
        assert (status, body) == (200, {"count": 2, "groups": []})
        status, body = await _request(
            jp_fetch,
            "workflows",
            "count",
            params={"query": "CustomerId IS NOT NULL GROUP BY ExecutionStatus"},
        )
        assert status == 200 and body["count"] == 3
        groups = {tuple(g["group_values"]): g["count"] for g in body["groups"]}
        assert groups == {("Running",): 2, ("Terminated",): 1}

        # A filter the engine cannot read: 400 with its message and column.
        for query, said in (
            ("CustomerId = ", "column 13 of the list filter: the filter ends too soon"),
            ("Nope = 'x'", "column 1 of the list filter: unknown search attribute 'Nope'"),
            ("Amount = 'five'", "column 10 of the list filter"),
            ("WorkflowId = 'a' ORDER BY StartTime", "a count takes no ORDER BY"),
            ("GROUP BY WorkflowType", "GROUP BY takes ExecutionStatus only"),
        ):
            status, body = await _request(jp_fetch, "workflows", "count", params={"query": query})
            assert status == 400, (query, body)
            assert body["error"]["code"] == "invalid_argument"
            assert said in body["error"]["message"], (query, body)

    run(go())


def test_list_takes_the_full_language_and_shows_attributes_decoded(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    async def go() -> None:
        await _seed(db_url)
        query = "(CustomerId IN ('abc', 'def') OR Amount > 1) AND ExecutionStatus = 'Running'"
        status, body = await _request(jp_fetch, "workflows", params={"query": query})
        assert status == 200, body
        listed = {e["id"]: e for e in body["executions"]}
        assert sorted(listed) == ["a1", "d1"]
        assert listed["a1"]["search_attributes"] == {
            "Amount": 5,
            "CustomerId": "abc",
            "PlacedAt": "2026-03-04T05:06:07+00:00",
            "Tags": ["gift", "rush"],
        }
        assert listed["d1"]["search_attributes"] == {"CustomerId": "def"}
        assert "raw_search_attributes" not in listed["a1"]  # no payload noise
        # Described, the same.
        status, body = await _request(jp_fetch, "workflows", "a1")
        assert status == 200 and body["search_attributes"]["Tags"] == ["gift", "rush"]
        assert "raw_search_attributes" not in body
        status, body = await _request(jp_fetch, "workflows", params={"query": "WorkflowId='none'"})
        assert [e["search_attributes"] for e in body["executions"]] == [{}]

        # A bad filter: 400 with the engine's message (not a page token complaint).
        status, body = await _request(
            jp_fetch, "workflows", params={"query": "CustomerId = 'a' AND AND"}
        )
        assert status == 400 and body["error"]["code"] == "invalid_argument"
        assert body["error"]["message"].startswith(
            "column 22 of the list filter: expected an attribute name, not the keyword AND"
        ), body

    run(go())


def test_search_attributes_are_listed_registered_and_removed(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    async def go() -> None:
        status, body = await _request(jp_fetch, "search-attributes")
        assert status == 200 and body["custom"] == {}
        system = body["system"]
        assert system["WorkflowId"] == "Keyword" and system["StartTime"] == "Datetime"
        assert system["TemporalChangeVersion"] == "KeywordList"
        assert system["HistoryLength"] == "Int"

        def post(payload: Any) -> Any:
            raw = payload if isinstance(payload, str) else json.dumps(payload)
            return _request(jp_fetch, "search-attributes", method="POST", body=raw)

        assert await post({"name": "CustomerId", "type": "Keyword"}) == (
            201,
            {"name": "CustomerId", "type": "Keyword"},
        )
        assert (await post({"name": "Amount", "type": "Int"}))[0] == 201
        # Registering again leaves it as it is (as Temporal does), whatever type is asked.
        assert await post({"name": "CustomerId", "type": "Int"}) == (
            201,
            {"name": "CustomerId", "type": "Keyword"},
        )
        status, body = await _request(jp_fetch, "search-attributes")
        assert body["custom"] == {"Amount": "Int", "CustomerId": "Keyword"}

        # Each bad body says which field was wrong.
        for payload, said in (
            ({"name": "X", "type": "String"}, "field 'type': 'String' is not a search"),
            ({"name": "X"}, "missing field 'type'"),
            ({"type": "Keyword"}, "missing field 'name'"),
            ({"name": "", "type": "Keyword"}, "field 'name' must be a non-empty string"),
            ({"name": "X", "type": 2}, "field 'type' must be a non-empty string"),
            ({"name": "WorkflowId", "type": "Keyword"}, "field 'name': WorkflowId is a system"),
            ({"name": "X", "type": "Int", "size": 1}, "unknown field(s) size"),
            ("[]", "must be a JSON object"),
        ):
            status, body = await post(payload)
            assert status == 400, (payload, body)
            assert said in body["error"]["message"], (payload, body)
        # A fourth Int is past Temporal's SQL limit of three: the name is named.
        for name in ("I2", "I3"):
            assert (await post({"name": name, "type": "Int"}))[0] == 201
        status, body = await post({"name": "I4", "type": "Int"})
        assert status == 400 and "field 'name' ('I4')" in body["error"]["message"], body

        # A registered attribute filters at once; removing it makes the filter refused.
        async with await Client.connect(db_url) as client:
            await client.start_workflow(
                Idle.run,
                id="c",
                task_queue="nobody",
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SearchAttributeKey.for_int("Amount"), 9)]
                ),
            )
        status, body = await _request(
            jp_fetch, "workflows", "count", params={"query": "Amount = 9"}
        )
        assert (status, body["count"]) == (200, 1)
        status, body = await _request(jp_fetch, "search-attributes", "Amount", method="DELETE")
        assert (status, body) == (200, {"ok": True})
        status, body = await _request(jp_fetch, "search-attributes")
        assert "Amount" not in body["custom"] and "CustomerId" in body["custom"]
        status, body = await _request(
            jp_fetch, "workflows", "count", params={"query": "Amount = 9"}
        )
        assert status == 400 and "unknown search attribute 'Amount'" in body["error"]["message"]
        status, body = await _request(jp_fetch, "search-attributes", "Amount", method="DELETE")
        assert status == 404 and body["error"]["code"] == "not_found", body
        status, body = await _request(jp_fetch, "search-attributes", "WorkflowId", method="DELETE")
        assert status == 404, body

    run(go())


def test_a_workflow_named_count_stays_reachable(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        async with await Client.connect(db_url) as client:
            await client.start_workflow(Idle.run, id="count", task_queue="nobody")
        # workflows/count is the count ...
        assert await _request(jp_fetch, "workflows", "count") == (200, {"count": 1, "groups": []})
        # ... and the run is described by query; its other endpoints keep their path.
        status, body = await _request(jp_fetch, "workflow", params={"workflow_id": "count"})
        assert status == 200 and body["id"] == "count"
        status, body = await _request(jp_fetch, "workflows", "count", "history")
        assert (
            status == 200
            and body["events"][0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
        )

    run(go())


def test_changing_search_attributes_needs_the_xsrf_token(
    http_server_client: Any, jp_base_url: str, jp_serverapp: Any, run: Any, db_url: str
) -> None:
    """Logged in by cookie (as a browser is), POST and DELETE without Jupyter's XSRF token
    are refused and change nothing; with it they go through."""

    async def go() -> None:
        token = jp_serverapp.identity_provider.token
        login = await http_server_client.fetch(
            f"{jp_base_url}durable/?token={token}", follow_redirects=False, raise_error=False
        )
        cookies = dict(
            header.split(";", 1)[0].split("=", 1) for header in login.headers.get_list("Set-Cookie")
        )
        cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        xsrf = {"Cookie": cookie, "X-XSRFToken": urllib.parse.unquote(cookies["_xsrf"])}
        url = f"{jp_base_url}durable/api/v1/search-attributes"
        body = json.dumps({"name": "CustomerId", "type": "Keyword"})

        async def fetch(path: str, method: str, headers: dict[str, str]) -> int:
            response = await http_server_client.fetch(
                url + path,
                method=method,
                body=body if method == "POST" else None,
                headers=headers,
                raise_error=False,
            )
            return int(response.code)

        assert await fetch("", "POST", {"Cookie": cookie}) == 403
        async with await Client.connect(db_url) as client:
            listed = await client.operator_service.list_search_attributes()
            assert listed.custom_attributes == {}
        assert await fetch("", "POST", xsrf) == 201
        assert await fetch("/CustomerId", "DELETE", {"Cookie": cookie}) == 403
        assert await fetch("", "GET", {"Cookie": cookie}) == 200  # reading needs no XSRF
        assert await fetch("/CustomerId", "DELETE", xsrf) == 200

    run(go())


@pytest.mark.parametrize(
    ("status", "quiet"),
    [
        (RPCStatusCode.NOT_FOUND, True),
        (RPCStatusCode.ALREADY_EXISTS, True),
        (RPCStatusCode.INTERNAL, False),
        (RPCStatusCode.FAILED_PRECONDITION, False),
        (RPCStatusCode.UNAVAILABLE, False),
    ],
)
def test_only_not_found_and_already_exists_rpc_errors_are_logged_quietly(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    status: RPCStatusCode,
    quiet: bool,
) -> None:
    """An RPCError the API answers as the client's (NOT_FOUND, ALREADY_EXISTS) is one
    info line; any other keeps the default logging, traceback and all."""
    from jupyter_server.base.handlers import APIHandler

    from kernel_ext.server.handlers import DurableAPIHandler

    default: list[BaseException] = []
    monkeypatch.setattr(
        APIHandler, "log_exception", lambda self, typ, value, tb: default.append(value)
    )
    handler = DurableAPIHandler.__new__(DurableAPIHandler)  # log_exception reads no request
    error = RPCError("refused", status)
    with caplog.at_level(logging.INFO):
        handler.log_exception(RPCError, error, None)
    if quiet:
        assert default == []
        assert [r.getMessage() for r in caplog.records] == ["durable API: refused"]
        assert all(r.levelno == logging.INFO and not r.exc_info for r in caplog.records)
    else:
        assert default == [error]
        assert not [r for r in caplog.records if "durable API" in r.getMessage()]
