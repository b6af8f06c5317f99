"""The Jupyter server extension: store lifecycle, REST API (auth, every endpoint, 400s)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from engine import (
    ApplicationError,
    Client,
    DataConverter,
    RetryPolicy,
    Worker,
    activity,
    workflow,
)
from kernel_ext.server.app import backend_of, redact_url, resolve_url
from tests.codecs import WrapCodec
from widgets.models import HistoryModel, axis_ticks
from widgets.timeline_model import timeline

from .rest import request_json as _request

TASK_QUEUE = "jupyter-tests"


@activity.defn
async def flaky_greet(name: str) -> str:
    """Fails on the first attempt, so the attempts endpoint has a failure to show."""
    if activity.info().attempt < 2:
        raise ApplicationError("first attempt always fails", type="Flaky")
    return f"hello {name}"


@workflow.defn
class Greeter:
    """Waits for a signal, greets through an activity, and answers a query."""

    def __init__(self) -> None:
        self.names: list[str] = []

    @workflow.run
    async def run(self, expected: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self.names) >= expected)
        await workflow.sleep(timedelta(milliseconds=10))
        return [
            await workflow.execute_activity(
                flaky_greet,
                args=[name],
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
            )
            for name in self.names
        ]

    @workflow.signal
    def add(self, name: str) -> None:
        self.names.append(name)

    @workflow.query
    def seen(self) -> list[str]:
        return list(self.names)


@workflow.defn
class Sleeper:
    """Sleeps for a long time: something to cancel and terminate."""

    @workflow.run
    async def run(self) -> None:
        await workflow.sleep(timedelta(hours=1))


def _json(response: Any) -> Any:
    return json.loads(response.body)


async def _post(jp_fetch: Any, *parts: str, body: Any) -> tuple[int, Any]:
    raw = body if isinstance(body, str) else json.dumps(body)
    return await _request(jp_fetch, *parts, method="POST", body=raw)


async def _walk_pages(jp_fetch: Any, params: dict[str, str]) -> list[dict[str, Any]]:
    """Every page of a listing, following next_page_token from the first page."""
    pages: list[dict[str, Any]] = []
    token = None
    while True:
        status, body = await _request(
            jp_fetch, "workflows", params={**params, **({"page_token": token} if token else {})}
        )
        assert status == 200, body
        pages.append(body)
        assert len(pages) <= 50, "next_page_token never ran out"
        token = body["next_page_token"]
        if token is None:
            return pages
        assert isinstance(token, str) and token


def _run_ids(pages: list[dict[str, Any]]) -> list[str]:
    return [e["run_id"] for page in pages for e in page["executions"]]


async def _store_state(db_url: str) -> list[tuple[str, str, str, int]]:
    """Every run in the store (id, run id, status, history length): to see nothing changed."""
    async with await Client.connect(db_url) as client:
        return [
            (e.id, e.run_id, e.status.name, e.history_length) async for e in client.list_workflows()
        ]


# -- lifecycle and authentication ----------------------------------------------------------


def test_extension_opens_store_and_exports_url(
    jp_serverapp: Any, jp_fetch: Any, run: Any, db_url: str
) -> None:
    assert os.environ["DURABLE_DATABASE_URL"] == db_url
    status, body = run(_request(jp_fetch, "workflows"))
    assert status == 200
    assert body == {"executions": [], "limit": 50, "next_page_token": None}
    assert Path(db_url.removeprefix("sqlite:///")).exists()


def test_extension_is_enabled_by_shipped_config() -> None:
    config = Path(__file__).parents[2] / "jupyter-config/jupyter_server_config.d/kernel_ext.json"
    assert json.loads(config.read_text()) == {
        "ServerApp": {"jpserver_extensions": {"kernel_ext": True}}
    }


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "info"),
        ("GET", "workflows"),
        ("GET", "workflows/x"),
        ("GET", "workflows/x/history"),
        ("GET", "workflows/x/attempts"),
        ("POST", "workflows"),
        ("POST", "workflows/x/signal"),
        ("POST", "workflows/x/query"),
        ("POST", "workflows/x/cancel"),
        ("POST", "workflows/x/terminate"),
    ],
)
def test_requests_without_token_are_refused(
    jp_fetch: Any, run: Any, method: str, path: str
) -> None:
    body = json.dumps({}) if method == "POST" else None
    status, payload = run(
        _request(
            jp_fetch, *path.split("/"), method=method, body=body, headers={"Authorization": ""}
        )
    )
    assert status == 403
    assert payload["error"]["code"] == "forbidden"


def test_info_names_the_database_the_server_reads(jp_fetch: Any, run: Any, db_url: str) -> None:
    status, body = run(_request(jp_fetch, "info"))
    assert status == 200, body
    assert body == {
        "database": {
            "url": db_url,
            "backend": "sqlite",
            "source": "config",  # DurableExtension.database_url, in jp_server_config
            "env_var": "DURABLE_DATABASE_URL",
        }
    }


# Never connected to: the info endpoint answers without opening the store.
SECRET_PG_URL = (
    "postgresql+psycopg://ada:s3cr%40t:x@127.0.0.1:9/shop?sslmode=disable&password=hunter2"
)


@pytest.mark.parametrize("db_url", [SECRET_PG_URL])
def test_info_hides_the_password(jp_fetch: Any, run: Any, db_url: str) -> None:
    status, body = run(_request(jp_fetch, "info"))
    assert status == 200, body
    assert body["database"] == {
        "url": "postgresql+psycopg://ada:***@127.0.0.1:9/shop?sslmode=disable&password=***",
        "backend": "postgresql",
        "source": "config",
        "env_var": "DURABLE_DATABASE_URL",
    }
    assert "s3cr" not in json.dumps(body) and "hunter2" not in json.dumps(body)


def test_where_the_url_comes_from(tmp_path: Path) -> None:
    env = "sqlite:////data/shared.db"
    assert resolve_url(env, env, tmp_path) == (env, "environment")
    assert resolve_url("sqlite:///other.db", env, tmp_path) == ("sqlite:///other.db", "config")
    assert resolve_url("sqlite:///other.db", None, tmp_path) == ("sqlite:///other.db", "config")
    default = f"sqlite:///{tmp_path / '.durable' / 'durable.db'}"
    assert resolve_url("", None, tmp_path) == (default, "default")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:////tmp/a b/durable.db", "sqlite:////tmp/a b/durable.db"),
        ("sqlite:///relative.db", "sqlite:///relative.db"),
        ("postgresql+psycopg://bob@db/app", "postgresql+psycopg://bob@db/app"),
        ("postgresql+psycopg://bob:pw@db:5432/app", "postgresql+psycopg://bob:***@db:5432/app"),
        ("postgresql://bob:p/w:x@db/app", "postgresql://bob:***@db/app"),
        ("postgresql+psycopg://:pw@db/app", "postgresql+psycopg://:***@db/app"),
        (
            "postgresql+psycopg:///app?host=/run/pg&password=pw&PassWord=x&user=bob",
            "postgresql+psycopg:///app?host=/run/pg&password=***&PassWord=***&user=bob",
        ),
        (
            "postgresql+psycopg://db/app?sslpassword=k",
            "postgresql+psycopg://db/app?sslpassword=***",
        ),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_backend_of() -> None:
    assert backend_of("sqlite:///x.db") == "sqlite"
    assert backend_of("postgresql+psycopg://u@h/db") == "postgresql"
    assert backend_of("postgres://u@h/db") == "postgresql"
    assert backend_of("::") == "unknown"


def test_page_without_token_redirects_to_login(jp_fetch: Any, run: Any) -> None:
    async def fetch() -> Any:
        return await jp_fetch(
            "durable/", headers={"Authorization": ""}, follow_redirects=False, raise_error=False
        )

    response = run(fetch())
    assert response.code == 302
    assert "/login" in response.headers["Location"]


def test_page_and_static_files_are_served(jp_fetch: Any, run: Any) -> None:
    page = run(jp_fetch("durable/"))
    html = page.body.decode()
    assert "<title>Durable executions" in html
    assert "{{" not in html  # base URL and XSRF token filled in
    for name in ("app.js", "style.css"):
        asset = run(jp_fetch("durable", "static", name))
        assert asset.code == 200 and asset.body


# -- every endpoint, for a run started through the API and run by a worker ---------------


def test_endpoints_for_a_run_started_through_the_api(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def scenario() -> None:
        status, started = await _post(
            jp_fetch,
            "workflows",
            body={
                "workflow_type": "Greeter",
                "workflow_id": "greet-1",
                "task_queue": TASK_QUEUE,
                "args": [2],
            },
        )
        assert status == 201, started
        run_id = started["run_id"]
        assert started["workflow_id"] == "greet-1" and run_id

        # Starting it again while open: 409.
        status, body = await _post(
            jp_fetch,
            "workflows",
            body={"workflow_type": "Greeter", "workflow_id": "greet-1", "task_queue": TASK_QUEUE},
        )
        assert status == 409
        assert body["error"]["code"] == "already_started" and "greet-1" in body["error"]["message"]

        client = await Client.connect(db_url)
        async with Worker(
            client, task_queue=TASK_QUEUE, workflows=[Greeter, Sleeper], activities=[flaky_greet]
        ):
            for name in ("ada", "grace"):
                status, body = await _post(
                    jp_fetch, "workflows", "greet-1", "signal", body={"name": "add", "args": [name]}
                )
                assert status == 202, body
            status, body = await _post(
                jp_fetch, "workflows", "greet-1", "query", body={"name": "seen"}
            )
            assert status == 200, body
            assert body == {"result": ["ada", "grace"]}
            result = await client.get_workflow_handle("greet-1").result()
            assert result == ["hello ada", "hello grace"]

            # Describe (latest run, and by run id).
            status, desc = await _request(jp_fetch, "workflows", "greet-1")
            assert status == 200
            assert desc["id"] == "greet-1" and desc["run_id"] == run_id
            assert desc["workflow_type"] == "Greeter" and desc["status"] == "COMPLETED"
            assert desc["pending_activities"] == [] and desc["pending_timers"] == []
            assert desc["close_time"] is not None
            status, desc = await _request(
                jp_fetch, "workflows", "greet-1", params={"run_id": run_id}
            )
            assert status == 200 and desc["run_id"] == run_id

            # History in Temporal's JSON.
            status, history = await _request(jp_fetch, "workflows", "greet-1", "history")
            assert status == 200
            types = [e["eventType"] for e in history["events"]]
            assert types[0] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
            assert types[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
            assert types.count("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED") == 2
            assert "EVENT_TYPE_TIMER_FIRED" in types

            # Attempts: each activity failed once, then succeeded.
            status, body = await _request(jp_fetch, "workflows", "greet-1", "attempts")
            assert status == 200
            outcomes = [(a["activity_type"], a["attempt"], a["outcome"]) for a in body["attempts"]]
            assert outcomes.count(("flaky_greet", 1, "failed")) == 2
            assert outcomes.count(("flaky_greet", 2, "completed")) == 2
            failed = next(a for a in body["attempts"] if a["outcome"] == "failed")
            assert "first attempt always fails" in json.dumps(failed["failure"])

            # The compact rows and the timeline: what widgets.models computes for the
            # same history and attempts (the notebook widgets draw the same thing).
            handle = client.get_workflow_handle("greet-1", run_id=run_id)
            await _same_view_model(jp_fetch, handle, run_id)

            # A run to cancel and one to terminate: pending timers are described.
            for wid in ("sleep-cancel", "sleep-terminate"):
                status, _ = await _post(
                    jp_fetch,
                    "workflows",
                    body={"workflow_type": "Sleeper", "workflow_id": wid, "task_queue": TASK_QUEUE},
                )
                assert status == 201
            for _ in range(200):
                status, desc = await _request(jp_fetch, "workflows", "sleep-cancel")
                if desc["pending_timers"]:
                    break
                await asyncio.sleep(0.02)
            assert desc["status"] == "RUNNING" and len(desc["pending_timers"]) == 1
            assert desc["pending_timers"][0]["fire_at"].startswith("20")
            # An open run's timeline has a "now" line, and its timer's due time marked.
            status, lanes = await _request(jp_fetch, "workflows", "sleep-cancel", "timeline")
            assert status == 200 and lanes["now"] is not None and lanes["now"] >= 0
            timer = next(lane for lane in lanes["lanes"] if lane["category"] == "timer")
            assert [b["end"] for b in timer["bars"]] == [None]
            assert [t["kind"] for t in timer["ticks"]] == ["due"]
            assert lanes["ticks"][-1][0] >= 3600 > lanes["ticks"][-2][0]

            status, body = await _post(
                jp_fetch, "workflows", "sleep-cancel", "cancel", body={"reason": "test"}
            )
            assert status == 202, body
            status, body = await _post(
                jp_fetch, "workflows", "sleep-terminate", "terminate", body={"reason": "enough"}
            )
            assert status == 200, body
            for _ in range(200):
                status, desc = await _request(jp_fetch, "workflows", "sleep-cancel")
                if desc["status"] != "RUNNING":
                    break
                await asyncio.sleep(0.02)
            assert desc["status"] == "CANCELED"
            status, desc = await _request(jp_fetch, "workflows", "sleep-terminate")
            assert desc["status"] == "TERMINATED"
        await client.close()

        # List: filter query, limit and paging.
        status, body = await _request(jp_fetch, "workflows")
        assert status == 200
        assert {e["id"] for e in body["executions"]} == {
            "greet-1",
            "sleep-cancel",
            "sleep-terminate",
        }
        everything = _run_ids([body])
        assert len(everything) == 3 and body["next_page_token"] is None

        # Following next_page_token visits every run exactly once, newest first, whatever
        # the page size; the last page says so with a null token (no empty page after a
        # full one).
        for limit, sizes in [(1, [1, 1, 1]), (2, [2, 1]), (3, [3]), (50, [3])]:
            pages = await _walk_pages(jp_fetch, {"limit": str(limit)})
            assert [len(p["executions"]) for p in pages] == sizes, limit
            assert all(p["limit"] == limit for p in pages)
            assert _run_ids(pages) == everything, limit
            assert pages[-1]["next_page_token"] is None
        pages = await _walk_pages(jp_fetch, {"query": "WorkflowType = 'Sleeper'", "limit": "1"})
        assert [[e["id"] for e in p["executions"]] for p in pages] in (
            [["sleep-cancel"], ["sleep-terminate"]],
            [["sleep-terminate"], ["sleep-cancel"]],
        )
        assert pages[-1]["next_page_token"] is None

        # A run started while a client pages through does not shift the later pages.
        status, first = await _request(jp_fetch, "workflows", params={"limit": "1"})
        assert status == 200 and _run_ids([first]) == everything[:1]
        status, _ = await _post(
            jp_fetch,
            "workflows",
            body={"workflow_type": "Sleeper", "workflow_id": "late-1", "task_queue": TASK_QUEUE},
        )
        assert status == 201
        rest: list[dict[str, Any]] = []
        token = first["next_page_token"]
        while token is not None:
            status, body = await _request(
                jp_fetch, "workflows", params={"limit": "1", "page_token": token}
            )
            assert status == 200, body
            rest.append(body)
            token = body["next_page_token"]
        assert _run_ids(rest) == everything[1:]
        status, body = await _request(jp_fetch, "workflows", params={"limit": "1"})
        assert [e["id"] for e in body["executions"]] == ["late-1"]

        status, body = await _request(
            jp_fetch, "workflows", params={"query": "ExecutionStatus = 'Completed'"}
        )
        assert [e["id"] for e in body["executions"]] == ["greet-1"]
        assert body["executions"][0]["status"] == "COMPLETED"

    run(scenario())


async def _same_view_model(jp_fetch: Any, handle: Any, run_id: str) -> None:
    """``compact`` and ``timeline`` of a closed run equal ``widgets.models``' rows and
    lanes for its history and attempts, read through the engine."""
    events = (await handle.fetch_history()).events
    attempts = await handle.fetch_attempts()
    model = HistoryModel(events)
    for params in ({}, {"run_id": run_id}):
        status, compact = await _request(jp_fetch, "workflows", handle.id, "compact", params=params)
        assert status == 200, compact
        assert compact["rows"] == json.loads(json.dumps([r.to_json() for r in model.compact()]))
        assert compact["run_id"] == run_id and compact["closed"] is True
        assert compact["event_count"] == len(events)
        assert compact["failure_count"] == model.failures == 0  # retried, then completed

        status, lanes = await _request(jp_fetch, "workflows", handle.id, "timeline", params=params)
        assert status == 200, lanes
        expected = timeline(model, attempts).to_json()
        ticks = lanes.pop("ticks")
        assert lanes == json.loads(json.dumps(expected))
        assert ticks == [[at, label] for at, label in axis_ticks(expected["end"])]
        assert lanes["now"] is None

    kinds = [(r["kind"], r["label"], r["status"]) for r in compact["rows"]]
    assert kinds[0] == ("workflow", "Greeter", "completed")
    assert kinds.count(("signal", "add", "received")) == 2
    assert kinds.count(("activity", "flaky_greet", "completed")) == 2
    assert [r["attempts"] for r in compact["rows"] if r["kind"] == "activity"] == [2, 2]
    by_category = [lane["category"] for lane in lanes["lanes"]]
    assert by_category == ["workflow_task", "timer", "activity", "activity", "signal"]
    activity = lanes["lanes"][2]
    assert [b["kind"] for b in activity["bars"]] == ["attempt", "backoff", "attempt"]
    assert [b["status"] for b in activity["bars"]] == ["failed", "waiting", "completed"]
    assert "first attempt always fails" in activity["bars"][0]["detail"]
    assert all(b["colour"].startswith("#") for lane in lanes["lanes"] for b in lane["bars"])


def test_unknown_workflow_is_404(jp_fetch: Any, run: Any) -> None:
    for parts, method, body in [
        (("workflows", "nope"), "GET", None),
        (("workflows", "nope", "history"), "GET", None),
        (("workflows", "nope", "attempts"), "GET", None),
        (("workflows", "nope", "compact"), "GET", None),
        (("workflows", "nope", "timeline"), "GET", None),
        (("workflows", "nope", "signal"), "POST", {"name": "add"}),
        (("workflows", "nope", "query"), "POST", {"name": "seen"}),
        (("workflows", "nope", "cancel"), "POST", {}),
        (("workflows", "nope", "terminate"), "POST", {}),
    ]:
        status, payload = run(
            _request(
                jp_fetch, *parts, method=method, body=None if body is None else json.dumps(body)
            )
        )
        assert status == 404, (parts, payload)
        assert payload["error"]["code"] == "not_found"
        assert "nope" in payload["error"]["message"]


# -- malformed input: 400, a message, and no change in the store --------------------------

# Well-formed base64 JSON whose time does not fit a float.
_FORGED_TOKEN = base64.urlsafe_b64encode(
    json.dumps({"v": 1, "start": 10**400, "run": "x"}).encode()
).decode()

MALFORMED: list[tuple[str, str, Any, str]] = [
    # (method, path, body or query params, a word the message must contain)
    ("POST", "workflows", "{not json", "JSON"),
    ("POST", "workflows", "[1, 2]", "object"),
    ("POST", "workflows", "", "object"),
    ("POST", "workflows", {"workflow_id": "w", "task_queue": "q"}, "workflow_type"),
    ("POST", "workflows", {"workflow_type": "Greeter", "task_queue": "q"}, "workflow_id"),
    ("POST", "workflows", {"workflow_type": "Greeter", "workflow_id": "w"}, "task_queue"),
    (
        "POST",
        "workflows",
        {"workflow_type": "Greeter", "workflow_id": "", "task_queue": "q"},
        "workflow_id",
    ),
    (
        "POST",
        "workflows",
        {"workflow_type": "Greeter", "workflow_id": "w", "task_queue": "q", "args": 3},
        "args",
    ),
    (
        "POST",
        "workflows",
        {"workflow_type": "Greeter", "workflow_id": "w", "task_queue": "q", "arg": [1]},
        "unknown field",
    ),
    ("POST", "workflows/sleep-1/signal", "{oops", "JSON"),
    ("POST", "workflows/sleep-1/signal", {"args": []}, "name"),
    ("POST", "workflows/sleep-1/signal", {"name": 5}, "name"),
    ("POST", "workflows/sleep-1/signal", {"name": "add", "args": {"a": 1}}, "args"),
    ("POST", "workflows/sleep-1/query", "{oops", "JSON"),
    ("POST", "workflows/sleep-1/query", {}, "name"),
    ("POST", "workflows/sleep-1/query", {"name": "seen", "args": "x"}, "args"),
    ("POST", "workflows/sleep-1/cancel", "{oops", "JSON"),
    ("POST", "workflows/sleep-1/cancel", {"reason": 5}, "reason"),
    ("POST", "workflows/sleep-1/cancel", {"why": "x"}, "unknown field"),
    ("POST", "workflows/sleep-1/terminate", "{oops", "JSON"),
    ("POST", "workflows/sleep-1/terminate", {"reason": ["x"]}, "reason"),
    ("POST", "workflows/sleep-1/terminate", "42", "object"),
    ("GET", "workflows", {"query": "WorkflowType = "}, ""),
    ("GET", "workflows", {"query": "NoSuchField = 'x'"}, "NoSuchField"),
    ("GET", "workflows", {"limit": "ten"}, "limit"),
    ("GET", "workflows", {"limit": "0"}, "limit"),
    ("GET", "workflows", {"page": "1"}, "page_token"),
    ("GET", "workflows", {"page_token": "not-a-token"}, "page_token"),
    ("GET", "workflows", {"page_token": "bm90IGpzb24="}, "page_token"),  # "not json"
    ("GET", "workflows", {"page_token": _FORGED_TOKEN}, "page_token"),
    ("GET", "workflows", {"page_token": "é"}, "page_token"),
    ("GET", "workflows", {"page_token": "A" * 2000}, "page_token"),
    ("GET", "workflows/sleep-1", {"run_id": ""}, "run_id"),
    ("GET", "workflows/sleep-1/history", {"run_id": ""}, "run_id"),
    ("GET", "workflows/sleep-1/attempts", {"run_id": ""}, "run_id"),
    ("GET", "workflows/sleep-1/compact", {"run_id": ""}, "run_id"),
    ("GET", "workflows/sleep-1/timeline", {"run_id": ""}, "run_id"),
]


def test_malformed_input_is_400_and_changes_nothing(jp_fetch: Any, run: Any, db_url: str) -> None:
    status, _ = run(
        _post(
            jp_fetch,
            "workflows",
            body={"workflow_type": "Sleeper", "workflow_id": "sleep-1", "task_queue": TASK_QUEUE},
        )
    )
    assert status == 201
    before = run(_store_state(db_url))
    assert [row[0] for row in before] == ["sleep-1"]

    for method, path, data, word in MALFORMED:
        if method == "POST":
            status, payload = run(_post(jp_fetch, *path.split("/"), body=data))
        else:
            status, payload = run(_request(jp_fetch, *path.split("/"), params=data))
        where = f"{method} {path} {data!r}"
        assert status == 400, (where, payload)
        error = payload["error"]
        assert error["code"] in ("bad_request", "invalid_argument"), where
        assert error["message"], where
        assert word.lower() in error["message"].lower(), (where, error["message"])

    assert run(_store_state(db_url)) == before


# -- the server keeps time while kernels are gone ------------------------------------------


def test_timer_fires_while_no_kernel_runs_and_the_run_completes_when_one_returns(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    """A notebook's kernel started a run that sleeps, then was shut down. The server
    extension hosts the timers: the timer fires with no worker anywhere, and the run
    completes as soon as a kernel's worker polls again."""

    async def scenario() -> None:
        await _request(jp_fetch, "workflows")  # the extension is up and hosting timers
        async with await Client.connect(db_url) as kernel:
            # The "kernel": a worker that does not host timers itself.
            worker = Worker(kernel, task_queue="nb", workflows=[ShortNap], run_service=False)
            async with worker:
                handle = await kernel.start_workflow(ShortNap.run, id="nap-1", task_queue="nb")
                for _ in range(200):
                    events = (await handle.fetch_history()).events
                    if any(e.event_type == "TimerStarted" for e in events):
                        break
                    await asyncio.sleep(0.02)
            # The kernel is shut down; the timer is due in the meantime.
            for _ in range(200):
                events = (await handle.fetch_history()).events
                if any(e.event_type == "TimerFired" for e in events):
                    break
                await asyncio.sleep(0.05)
            assert any(e.event_type == "TimerFired" for e in events), "the server fired it"
            assert events[-1].event_type == "WorkflowTaskScheduled"  # waiting for a worker
            async with Worker(kernel, task_queue="nb", workflows=[ShortNap], run_service=False):
                assert await asyncio.wait_for(handle.result(), 20) == "rested"

    run(scenario())


@workflow.defn
class ShortNap:
    """Sleeps half a second."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(0.5)
        return "rested"


@workflow.defn
class Tally:
    """Counts through an update with a validator; ends on a signal."""

    def __init__(self) -> None:
        self.total = 0
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return self.total

    @workflow.update
    def add(self, n: int) -> int:
        self.total += n
        return self.total

    @add.validator
    def check_add(self, n: int) -> None:
        if n <= 0:
            raise ApplicationError("only positive amounts", type="NotPositive")

    @workflow.signal
    def finish(self) -> None:
        self.done = True


def test_update_endpoint(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def scenario() -> None:
        client = await Client.connect(db_url)
        async with client, Worker(client, task_queue="tally", workflows=[Tally]):
            status, body = await _post(
                jp_fetch,
                "workflows",
                body={
                    "workflow_type": "Tally",
                    "workflow_id": "tally-1",
                    "task_queue": "tally",
                },
            )
            assert status == 201, body
            status, body = await _post(
                jp_fetch, "workflows", "tally-1", "update", body={"name": "add", "args": [2]}
            )
            assert (status, body) == (200, {"result": 2})
            status, body = await _post(
                jp_fetch, "workflows", "tally-1", "update", body={"name": "add", "args": [0]}
            )
            assert status == 422 and body["error"]["code"] == "update_failed", body
            assert "only positive amounts" in body["error"]["message"]
            status, body = await _post(
                jp_fetch, "workflows", "tally-1", "update", body={"args": [1]}
            )
            assert status == 400, body
            await client.get_workflow_handle("tally-1").signal("finish")
            assert await client.get_workflow_handle("tally-1").result() == 2

    run(scenario())


@activity.defn
async def wrap_gift(item: str) -> str:
    return f"wrapped {item}"


@workflow.defn
class GiftWrap:
    """A timer and an activity, each with a summary (one holding markup)."""

    @workflow.run
    async def run(self, item: str) -> str:
        await workflow.sleep(timedelta(milliseconds=5), summary="let the glue dry")
        return await workflow.execute_activity(
            wrap_gift, item, start_to_close_timeout=timedelta(seconds=10), summary="wrap <b>x</b>"
        )


def test_summaries_are_decoded_by_the_server(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def scenario() -> None:
        client = await Client.connect(db_url)
        coded = await Client.connect(
            db_url, data_converter=DataConverter(payload_codec=WrapCodec())
        )
        try:
            async with Worker(
                client, task_queue=TASK_QUEUE, workflows=[GiftWrap], activities=[wrap_gift]
            ):
                handle = await client.start_workflow(
                    GiftWrap.run,
                    "teapot",
                    id="gift-1",
                    task_queue=TASK_QUEUE,
                    static_summary="A gift <i>for Ada</i>",
                    static_details="Wrapped **twice**.\nWith a bow.",
                )
                assert await handle.result() == "wrapped teapot"
            await coded.start_workflow(
                GiftWrap.run, "cup", id="gift-coded", task_queue="nobody", static_summary="secret"
            )
        finally:
            await coded.close()
            await client.close()

        status, desc = await _request(jp_fetch, "workflows", "gift-1")
        assert status == 200, desc
        assert desc["static_summary"] == "A gift <i>for Ada</i>"
        assert desc["static_details"] == "Wrapped **twice**.\nWith a bow."
        assert "data_converter" not in desc
        status, compact = await _request(jp_fetch, "workflows", "gift-1", "compact")
        assert status == 200, compact
        assert compact["static_summary"] == desc["static_summary"]
        assert compact["static_details"] == desc["static_details"]
        by_kind = {r["kind"]: r["user_summary"] for r in compact["rows"]}
        assert by_kind == {
            "workflow": "A gift <i>for Ada</i>",
            "timer": "let the glue dry",
            "activity": "wrap <b>x</b>",
        }
        status, history = await _request(jp_fetch, "workflows", "gift-1", "history")
        ids = {
            e["eventType"]: e["eventId"] for e in history["events"] if "userMetadata" in e
        }  # the history itself stays in Temporal's JSON, summaries encoded
        assert compact["event_summaries"] == {
            str(ids["EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"]): "A gift <i>for Ada</i>",
            str(ids["EVENT_TYPE_TIMER_STARTED"]): "let the glue dry",
            str(ids["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"]): "wrap <b>x</b>",
        }
        status, lanes = await _request(jp_fetch, "workflows", "gift-1", "timeline")
        assert status == 200, lanes
        assert lanes["summary"] == "A gift <i>for Ada</i>"
        assert {lane["category"]: lane["summary"] for lane in lanes["lanes"]} == {
            "workflow_task": "",
            "timer": "let the glue dry",
            "activity": "wrap <b>x</b>",
        }

        # A payload codec the server's client lacks: "(encoded)", not an error.
        status, desc = await _request(jp_fetch, "workflows", "gift-coded")
        assert status == 200 and desc["static_summary"] == "(encoded)"
        status, compact = await _request(jp_fetch, "workflows", "gift-coded", "compact")
        assert status == 200 and compact["static_summary"] == "(encoded)"

    run(scenario())
