"""The REST API for namespaces (issue 15, item 3): list, create, describe and update, and
``?namespace=`` on the other endpoints; an unknown namespace is a 404, a taken name a
409. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from engine import Client, workflow

from .rest import both_backends
from .rest import request_json as _request

db_url = both_backends  # every test here runs on SQLite and PostgreSQL


@workflow.defn
class Idle:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def _post(body: Any) -> dict[str, Any]:
    return {"method": "POST", "body": json.dumps(body)}


def test_create_describe_list_and_update(jp_fetch: Any, run: Any) -> None:
    async def go() -> None:
        status, body = await _request(jp_fetch, "namespaces")
        assert status == 200 and [n["name"] for n in body["namespaces"]] == ["default"]
        assert body["namespaces"][0]["retention_seconds"] == 7 * 86400

        status, body = await _request(
            jp_fetch, "namespaces", **_post({"name": "shop", "description": "the shop"})
        )
        assert status == 201, body
        assert (body["name"], body["retention_seconds"], body["state"]) == (
            "shop",
            3 * 86400,  # Temporal's CLI default
            "Registered",
        )
        status, body = await _request(jp_fetch, "namespaces", **_post({"name": "shop"}))
        assert status == 409 and body["error"]["code"] == "already_exists"
        assert body["error"]["message"] == 'Namespace "shop" already exists'

        status, body = await _request(
            jp_fetch,
            "namespaces",
            "shop",
            method="PATCH",
            body=json.dumps({"retention_seconds": 86400, "data": {"team": "a"}}),
        )
        assert status == 200, body
        assert (body["retention_seconds"], body["description"], body["data"]) == (
            86400,
            "the shop",
            {"team": "a"},
        )
        status, body = await _request(jp_fetch, "namespaces", "shop")
        assert status == 200 and body["data"] == {"team": "a"}

        status, body = await _request(jp_fetch, "namespaces", params={"limit": "1"})
        assert [n["name"] for n in body["namespaces"]] == ["default"]
        token = body["next_page_token"]
        status, body = await _request(
            jp_fetch, "namespaces", params={"limit": "1", "page_token": token}
        )
        assert [n["name"] for n in body["namespaces"]] == ["shop"]
        assert body["next_page_token"] is None

    run(go())


def test_bad_namespace_requests(jp_fetch: Any, run: Any) -> None:
    async def go() -> None:
        for body, said in (
            ({}, "field 'name'"),
            ({"name": "x", "retention_seconds": "3d"}, "field 'retention_seconds'"),
            ({"name": "x", "retention_seconds": 60}, "at least a day"),
            ({"name": "x", "color": "red"}, "unknown field(s) color"),
            ({"name": "x", "data": {"k": 1}}, "field 'data'"),
            ({"name": "n" * 300}, "namespace is 300 bytes"),
        ):
            status, answer = await _request(jp_fetch, "namespaces", **_post(body))
            assert status == 400, (body, answer)
            assert said in answer["error"]["message"], (body, answer)
        status, answer = await _request(jp_fetch, "namespaces", "nope")
        assert status == 404 and answer["error"]["message"].startswith(
            "Namespace nope is not found."
        )
        status, answer = await _request(
            jp_fetch, "namespaces", "default", method="PATCH", body="{}"
        )
        assert status == 400 and "nothing to update" in answer["error"]["message"]
        status, answer = await _request(jp_fetch, "namespaces", params={"page_token": "forged"})
        assert status == 400 and "next_page_token" in answer["error"]["message"]
        # Nothing was created along the way.
        status, answer = await _request(jp_fetch, "namespaces")
        assert [n["name"] for n in answer["namespaces"]] == ["default"]

    run(go())


def test_the_other_endpoints_take_a_namespace(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        status, _ = await _request(
            jp_fetch, "namespaces", **_post({"name": "shop", "retention_seconds": 86400})
        )
        assert status == 201
        async with await Client.connect(db_url, namespace="shop") as shop:
            await shop.start_workflow(Idle.run, id="cart", task_queue="nobody")
        listed = await _request(jp_fetch, "workflows", params={"namespace": "shop"})
        assert [e["id"] for e in listed[1]["executions"]] == ["cart"]
        assert listed[1]["executions"][0]["namespace"] == "shop"
        assert (await _request(jp_fetch, "workflows"))[1]["executions"] == []
        status, body = await _request(jp_fetch, "workflows", "count", params={"namespace": "shop"})
        assert (status, body["count"]) == (200, 1)
        status, body = await _request(jp_fetch, "workflows", "cart", params={"namespace": "shop"})
        assert status == 200 and body["id"] == "cart"
        status, body = await _request(jp_fetch, "workflows", "cart")  # not in default
        assert status == 404
        status, body = await _request(
            jp_fetch,
            "workflows",
            "cart",
            "terminate",
            params={"namespace": "shop"},
            method="POST",
            body=json.dumps({"reason": "test"}),
        )
        assert status == 200, body
        status, body = await _request(jp_fetch, "workflows", params={"namespace": "nope"})
        assert status == 404 and "Namespace nope is not found." in body["error"]["message"]
        status, body = await _request(jp_fetch, "workflows", params={"namespace": ""})
        assert status == 400 and "namespace must not be empty" in body["error"]["message"]

    run(go())
