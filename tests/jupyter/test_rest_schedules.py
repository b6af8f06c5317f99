"""The REST API of schedules (issue 16, the web UI's endpoints): list with a List Filter,
describe with the action log's latest rows (skipped and missed actions with their
reason), trigger, pause, unpause, delete; 404 for an unknown schedule, 400 naming the
field. On SQLite and PostgreSQL.

The schedule ``mixed`` (tests/widgets/test_schedule_view.mixed_schedule) is driven on the
time-skipping clock before the server's first request: started runs, actions skipped by
overlap, actions missed after downtime, a buffered start, paused with a note of markup.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from datetime import timedelta
from typing import Any

from engine import Client
from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from engine.testing import WorkflowEnvironment

from ..widgets.test_schedule_view import XSS, mixed_schedule
from .rest import both_backends
from .rest import request_json as _request

db_url = both_backends  # every test here runs on SQLite and PostgreSQL

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
ODD_ID = "<img src=x onerror=alert(1)>"


async def _seed_mixed(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        await mixed_schedule(env)


async def _create_idle(db_url: str, schedule_id: str, *, paused: bool = False) -> None:
    """A schedule every hour whose runs nobody works on (a queue nobody polls)."""
    async with await Client.connect(db_url) as client:
        await client.create_schedule(
            schedule_id,
            Schedule(
                action=ScheduleActionStartWorkflow(
                    "Nightly", id=f"{schedule_id}-run", task_queue="nobody-polls"
                ),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
                state=ScheduleState(paused=paused, note="set up by the test" if paused else None),
            ),
        )


def _post(body: Any = None) -> dict[str, Any]:
    return {"method": "POST", "body": "" if body is None else json.dumps(body)}


def test_list_shows_paused_state_next_times_and_counts(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    async def go() -> None:
        await _seed_mixed(db_url)
        await _create_idle(db_url, "idle")
        status, body = await _request(jp_fetch, "schedules")
        assert status == 200, body
        by_id = {s["id"]: s for s in body["schedules"]}
        assert sorted(by_id) == ["idle", "mixed"]
        assert body["truncated"] is False
        mixed = by_id["mixed"]
        assert mixed["workflow_type"] == "ThreeMinutes"
        assert mixed["paused"] is True and mixed["note"] == XSS
        assert mixed["spec"] == "every 1 min"
        assert mixed["next_action_times"] and all(
            ISO_UTC.match(t) for t in mixed["next_action_times"]
        )
        assert mixed["recent_actions"] and all(
            ISO_UTC.match(r["scheduled_at"]) and r["run_id"] for r in mixed["recent_actions"]
        )
        counts = mixed["counts"]
        assert counts["started"] >= 3
        assert counts["skipped_overlap"] >= 2
        assert counts["missed_catchup_window"] >= 5
        assert counts["buffered"] == 1
        assert by_id["idle"]["paused"] is False
        assert by_id["idle"]["counts"]["started"] == 0

        # The List Filter of list_schedules.
        status, body = await _request(
            jp_fetch, "schedules", params={"query": "TemporalSchedulePaused = true"}
        )
        assert status == 200 and [s["id"] for s in body["schedules"]] == ["mixed"]
        status, body = await _request(
            jp_fetch, "schedules", params={"query": "ScheduleId = 'idle'", "limit": "5"}
        )
        assert status == 200 and [s["id"] for s in body["schedules"]] == ["idle"]
        status, body = await _request(jp_fetch, "schedules", params={"limit": "1"})
        assert status == 200 and [s["id"] for s in body["schedules"]] == ["idle"]
        assert body["truncated"] is True

    run(go())


def test_bad_list_input_is_a_400_naming_the_field(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        await _create_idle(db_url, "idle")
        for query, words in (
            ("ScheduleId = ", "the filter ends too soon"),
            ("NoSuchAttribute = 'x'", "invalid search attribute: NoSuchAttribute"),
            ("ExecutionStatus = 'Running'", 'cannot filter on "ExecutionStatus"'),
            ("ScheduleId = 'a' ORDER BY ScheduleId", "filter only"),
        ):
            status, body = await _request(jp_fetch, "schedules", params={"query": query})
            assert status == 400, (query, body)
            assert body["error"]["message"].startswith("query: "), body
            assert words in body["error"]["message"], (query, body)
        status, body = await _request(jp_fetch, "schedules", params={"limit": "0"})
        assert status == 400 and "limit" in body["error"]["message"]
        status, body = await _request(jp_fetch, "schedules", params={"namespace": "nowhere"})
        assert status == 404, body

    run(go())


def test_describe_shows_skipped_and_missed_actions_with_their_reason(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    async def go() -> None:
        await _seed_mixed(db_url)
        status, body = await _request(jp_fetch, "schedules", "mixed")
        assert status == 200, body
        sched = body["schedule"]
        assert sched["id"] == "mixed" and sched["workflow_type"] == "ThreeMinutes"
        assert sched["action"]["workflow_id"] == "report"
        assert sched["action"]["task_queue"] == "sched" and sched["action"]["args"] == ["ok"]
        assert sched["spec"]["text"] == "every 1 min"
        assert sched["spec"]["intervals"] == [{"every_seconds": 60.0, "offset_seconds": None}]
        assert sched["policy"] == {
            "overlap": "SKIP",
            "catchup_window_seconds": 180.0,
            "catchup_window_text": "3 min",
            "pause_on_failure": False,
        }
        assert sched["state"]["paused"] is True and sched["state"]["note"] == XSS
        info = sched["info"]
        assert len(info["buffered_actions"]) == 1 and ISO_UTC.match(info["buffered_actions"][0])
        assert len(info["running_actions"]) == 1
        assert ISO_UTC.match(info["created_at"]) and info["next_action_times"]

        actions = body["actions"]
        assert body["logged"] == body["shown"] == len(actions) > 0
        assert sum(body["by_outcome"].values()) == body["logged"]
        assert [a["id"] for a in actions] == sorted(a["id"] for a in actions)
        assert info["num_actions_skipped_overlap"] == body["by_outcome"]["skipped_overlap"]
        assert (
            info["num_actions_missed_catchup_window"] == body["by_outcome"]["missed_catchup_window"]
        )
        skipped = [a for a in actions if a["outcome"] == "skipped_overlap"]
        missed = [a for a in actions if a["outcome"] == "missed_catchup_window"]
        started = [a for a in actions if a["outcome"] == "started"]
        assert skipped and missed and started
        assert {a["kind"] for a in skipped} == {"skipped"}
        assert skipped[0]["label"] == "skipped (overlap)"
        assert "still open (SKIP)" in skipped[0]["detail"]
        assert missed[0]["label"] == "missed (catch-up window)"
        assert "past the catch-up window of 180s" in missed[0]["detail"]
        assert all(a["run_id"] is None for a in skipped + missed)
        assert all(a["run_id"] and a["workflow_id"].startswith("report-") for a in started)
        statuses = {a["run_status"] for a in started}
        assert {"COMPLETED", "RUNNING"} <= statuses, statuses
        assert any(a["source"] == "trigger" for a in started)
        for a in actions:
            assert all(ISO_UTC.match(a[k]) for k in ("nominal_time", "decided_time"))
        assert set(body["kinds"]) >= {"started", "skipped", "missed", "waiting", "upcoming"}

        # The latest rows only.
        status, tail = await _request(jp_fetch, "schedules", "mixed", params={"log_limit": "2"})
        assert status == 200 and tail["logged"] == body["logged"] and tail["shown"] == 2
        assert [a["id"] for a in tail["actions"]] == [a["id"] for a in actions[-2:]]
        assert tail["by_outcome"] == body["by_outcome"]
        for bad in ("-1", "many", "100000"):
            status, err = await _request(jp_fetch, "schedules", "mixed", params={"log_limit": bad})
            assert status == 400 and "log_limit" in err["error"]["message"], err

    run(go())


def test_unknown_schedules_are_404(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        for parts, kwargs in (
            (("schedules", "nope"), {}),
            (("schedules", "nope", "trigger"), _post()),
            (("schedules", "nope", "pause"), _post({"note": "x"})),
            (("schedules", "nope", "unpause"), _post()),
            (("schedules", "nope"), {"method": "DELETE"}),
            (("schedule",), {"params": {"schedule_id": "nope"}}),
        ):
            status, body = await _request(jp_fetch, *parts, **kwargs)
            assert status == 404, (parts, body)
            assert body["error"]["code"] == "not_found"
            assert "nope" in body["error"]["message"]

    run(go())


async def _until(predicate: Any, what: str) -> None:
    for _ in range(300):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


def test_trigger_pause_unpause_delete(jp_fetch: Any, run: Any, db_url: str) -> None:
    async def go() -> None:
        await _create_idle(db_url, ODD_ID, paused=True)
        sid = ODD_ID

        async def described() -> dict[str, Any]:
            status, body = await _request(jp_fetch, "schedules", sid)
            assert status == 200, body
            return body

        assert (await described())["schedule"]["state"]["note"] == "set up by the test"
        # A trigger takes an action even while paused.
        status, body = await _request(jp_fetch, "schedules", sid, "trigger", **_post())
        assert status == 202 and body["ok"] is True and body["outcome"] == "started", body
        assert body["detail"].startswith(f"{sid}-run-")

        async def started() -> bool:
            return any(a["outcome"] == "started" for a in (await described())["actions"])

        await _until(started, "the trigger started no run")
        row = (await described())["actions"][-1]
        assert row["source"] == "trigger" and row["run_id"]
        assert row["workflow_id"].startswith(f"{sid}-run-")
        # A second one under SKIP, while that run is open: skipped, and said why.
        status, body = await _request(
            jp_fetch, "schedules", sid, "trigger", **_post({"overlap": "skip"})
        )
        assert status == 202 and body["outcome"] == "skipped_overlap", body
        assert "still open" in body["detail"]

        async def skipped() -> bool:
            return any(a["outcome"] == "skipped_overlap" for a in (await described())["actions"])

        await _until(skipped, "the second trigger was not skipped")
        # Bad bodies name the field.
        for body_in, words in (
            ({"overlap": "SOMETIMES"}, "field 'overlap'"),
            ({"overlap": 3}, "field 'overlap'"),
            ({"when": "now"}, "unknown field(s) when"),
        ):
            status, body = await _request(jp_fetch, "schedules", sid, "trigger", **_post(body_in))
            assert status == 400 and words in body["error"]["message"], body
        status, body = await _request(jp_fetch, "schedules", sid, "pause", **_post({"note": 5}))
        assert status == 400 and "field 'note'" in body["error"]["message"]
        status, body = await _request(
            jp_fetch, "schedules", sid, "pause", method="POST", body="[1]"
        )
        assert status == 400 and "JSON object" in body["error"]["message"]

        status, _ = await _request(
            jp_fetch, "schedules", sid, "unpause", **_post({"note": "back on"})
        )
        assert status == 200
        state = (await described())["schedule"]["state"]
        assert state == {**state, "paused": False, "note": "back on"}
        status, _ = await _request(jp_fetch, "schedules", sid, "pause", **_post({"note": XSS}))
        assert status == 200
        state = (await described())["schedule"]["state"]
        assert state["paused"] is True and state["note"] == XSS
        status, _ = await _request(jp_fetch, "schedules", sid, "pause", **_post())
        assert (await described())["schedule"]["state"]["note"] == "Paused via Python SDK"
        # The id in the query form reaches the same schedule.
        status, body = await _request(jp_fetch, "schedule", params={"schedule_id": sid})
        assert status == 200 and body["schedule"]["id"] == sid

        status, body = await _request(jp_fetch, "schedules", sid, method="DELETE")
        assert (status, body) == (200, {"ok": True})
        status, body = await _request(jp_fetch, "schedules", sid)
        assert status == 404
        status, body = await _request(jp_fetch, "schedules")
        assert body["schedules"] == []

    run(go())


def test_a_browser_session_needs_the_xsrf_token_to_change_a_schedule(
    http_server_client: Any, jp_base_url: str, jp_serverapp: Any, run: Any, db_url: str
) -> None:
    """Logged in by cookie, trigger, pause, unpause and delete without Jupyter's XSRF
    token are refused with 403 and change nothing; a GET reads; with the token the pause
    goes through. An id ``.`` is reached in the query form."""
    from tornado.httpclient import HTTPClientError

    async def fetch(path: str, **kwargs: Any) -> tuple[int, Any]:
        try:
            response = await http_server_client.fetch(
                f"{jp_base_url}durable/api/v1/{path}", follow_redirects=False, **kwargs
            )
        except HTTPClientError as err:
            assert err.response is not None
            return err.code, err.response.body
        return response.code, json.loads(response.body)

    async def go() -> None:
        await _create_idle(db_url, ".")
        token = jp_serverapp.identity_provider.token
        login = await http_server_client.fetch(
            f"{jp_base_url}durable/?token={token}", follow_redirects=False, raise_error=False
        )
        cookies = dict(
            header.split(";", 1)[0].split("=", 1) for header in login.headers.get_list("Set-Cookie")
        )
        cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
        where = "?schedule_id=."
        status, body = await fetch(f"schedule{where}", headers={"Cookie": cookie})
        assert status == 200 and body["schedule"]["id"] == ".", body
        for sub, method in (("/trigger", "POST"), ("/pause", "POST"), ("/unpause", "POST")):
            status, _ = await fetch(
                f"schedule{sub}{where}", method=method, body="{}", headers={"Cookie": cookie}
            )
            assert status == 403, sub
        status, _ = await fetch(f"schedule{where}", method="DELETE", headers={"Cookie": cookie})
        assert status == 403
        async with await Client.connect(db_url) as client:
            desc = await client.get_schedule_handle(".").describe()
            assert desc.schedule.state.paused is False and desc.info.num_actions == 0
            assert await client.get_schedule_handle(".").actions() == []
        status, body = await fetch(
            f"schedule/pause{where}",
            method="POST",
            body=json.dumps({"note": "with the token"}),
            headers={"Cookie": cookie, "X-XSRFToken": urllib.parse.unquote(cookies["_xsrf"])},
        )
        assert (status, body) == (200, {"ok": True})
        async with await Client.connect(db_url) as client:
            state = (await client.get_schedule_handle(".").describe()).schedule.state
            assert state.paused is True and state.note == "with the token"

    run(go())


def test_the_jupyter_server_takes_the_schedules_actions(
    jp_fetch: Any, run: Any, db_url: str
) -> None:
    """The server extension hosts the background duties: a schedule created elsewhere
    (a notebook's client, no worker, no host of its own) gets its actions taken."""

    async def go() -> None:
        async with await Client.connect(db_url) as client:
            await client.create_schedule(
                "every-second",
                Schedule(
                    action=ScheduleActionStartWorkflow("Job", id="job", task_queue="nobody"),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                    policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
                ),
            )
        started = 0
        for _ in range(100):  # the server's first request connects it, and it hosts
            status, body = await _request(jp_fetch, "schedules", "every-second")
            assert status == 200, body
            started = body["schedule"]["info"]["num_actions"]
            if started >= 2:
                break
            await asyncio.sleep(0.1)
        assert started >= 2

    run(go())
