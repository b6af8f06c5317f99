"""ScheduleView: what it draws from a schedule's description and action log (every kind
of mark, the counters, the state), live refresh, the static fallbacks; on both backends,
on the time-skipping clock."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import pytest

from engine import Worker, workflow
from engine.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleNotFoundError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from engine.exceptions import ApplicationError
from engine.testing import WorkflowEnvironment
from widgets import ScheduleView, _live
from widgets.models import STATUS_COLOURS
from widgets.schedule_view import KINDS, mark_kind, time_ticks

from .conftest import eventually, widget_threads

P = ScheduleOverlapPolicy
MINUTE = 60.0
XSS = "<img src=x onerror=window.__xss=1><b>bold</b>"


@workflow.defn
class ThreeMinutes:
    """A scheduled run that takes three minutes (or fails after them, if told)."""

    @workflow.run
    async def run(self, plan: str) -> str:
        await workflow.sleep(3 * MINUTE)
        if plan == "fails":
            raise ApplicationError("the report broke", non_retryable=True)
        return plan


def every_minute(
    policy: P = P.SKIP, *, plan: str = "ok", every: float = MINUTE, **kw: Any
) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(ThreeMinutes.run, plan, id="report", task_queue="sched"),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every))]),
        policy=SchedulePolicy(overlap=policy, **kw),
    )


async def until_next(env: WorkflowEnvironment, k: float, every: float = MINUTE) -> None:
    """Sleep until ``k`` intervals past the next action time (the first one)."""
    now = env.client.clock.now()
    first = (math.floor(now / every) + 1) * every
    await env.sleep(first + k * every - now)


def kinds(view: ScheduleView) -> list[str]:
    return [m["kind"] for m in view.marks]


async def mixed_schedule(env: WorkflowEnvironment) -> Client:
    """Schedule ``mixed`` with every kind of mark: started (one running, some completed),
    skipped by overlap, missed after ten minutes of downtime with a catch-up window of
    three, a buffered start, upcoming times; paused with a note that is markup."""
    client = env.client
    schedule = every_minute(catchup_window=timedelta(minutes=3))
    async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
        handle = await client.create_schedule("mixed", schedule)
        await until_next(env, 4.5)
    client.clock.advance(10 * MINUTE)  # type: ignore[attr-defined]  # nobody hosts it
    # The catch-up pass before any worker is back: the run left open still is (its timer
    # is due, not fired), so the actions inside the window are all skipped. Left to the
    # worker's first sleep, the pass would race the run's end and sometimes start one
    # that the trigger below then finds open.
    await client.service.fire_due_schedules()
    async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
        await env.sleep(1)
        await handle.trigger()  # starts at once: nothing is open any more
        await handle.trigger(overlap=P.BUFFER_ONE)  # waits for that run
        await handle.pause(note=XSS)
    return client


# -- the pure parts ---------------------------------------------------------------------


def test_every_outcome_has_a_kind_of_mark_with_a_legend() -> None:
    outcomes = [
        "started",
        "skipped_overlap",
        "missed_catchup_window",
        "superseded",
        "not_taken",
        "start_failed",
        "cancelled_other",
        "terminated_other",
    ]
    assert [mark_kind(o) for o in outcomes] == [
        "started",
        "skipped",
        "missed",
        "not_taken",
        "not_taken",
        "not_taken",
        "ended_other",
        "ended_other",
    ]
    assert set(KINDS) == {
        "started",
        "skipped",
        "missed",
        "waiting",
        "ended_other",
        "not_taken",
        "upcoming",
    }
    assert all(k["label"] and k["help"] and k["colour"].startswith("#") for k in KINDS.values())
    # The kinds not taken are told apart from each other and from a started run's colours.
    assert len({k["colour"] for k in KINDS.values()}) == len(KINDS)


def test_time_ticks_fall_on_round_utc_times() -> None:
    start = 1_796_220_000.0 + 17  # 14:00:17 UTC
    ticks = time_ticks(start, start + 600)
    assert [label for _, label in ticks][:3] == ["14:02", "14:04", "14:06"]
    assert all(at % 120 == 0 for at, _ in ticks)
    week = time_ticks(start, start + 7 * 86400)
    assert all(at % 86400 == 0 for at, _ in week)
    assert week[0][1] == "12-03"
    seconds = time_ticks(start, start + 20)
    assert seconds[0][1] == "14:00:20"


def test_a_schedule_that_does_not_exist_is_an_error_and_leaves_nothing(tmp_path: Any) -> None:
    async def go() -> None:
        async with await WorkflowEnvironment.start_time_skipping() as env:
            with pytest.raises(ScheduleNotFoundError):
                ScheduleView(env.client, "nope")

    asyncio.run(go())
    assert widget_threads() == []
    with pytest.raises(TypeError, match="expected an engine Client"):
        ScheduleView("sqlite://", "x")  # type: ignore[arg-type]


# -- on both backends -------------------------------------------------------------------


async def test_skip_draws_the_skipped_times_beside_the_run_that_was_open(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
            handle = await client.create_schedule("s", every_minute())
            await until_next(env, 8.5)
            view = ScheduleView(client, "s", upcoming=4)
            try:
                desc = await handle.describe()
                log = await handle.actions()
                data = view.data
            finally:
                view.stop()
    info = desc.info
    # Every log entry is a mark, in the log's order, as its kind; then 4 upcoming times.
    assert [m["id"] for m in data["marks"] if m["id"] is not None] == [e.id for e in log]
    assert kinds(view).count("started") == info.num_actions > 0
    assert kinds(view).count("skipped") == info.num_actions_skipped_overlap > 0
    assert kinds(view)[-4:] == ["upcoming"] * 4
    assert [m["at"] for m in view.marks[-4:]] == [t.timestamp() for t in info.next_action_times[:4]]
    assert data["counters"] == {
        "num_actions": info.num_actions,
        "num_actions_skipped_overlap": info.num_actions_skipped_overlap,
        "num_actions_missed_catchup_window": 0,
        "running_actions": 1,
        "buffered_actions": 0,
    }
    # A started time is drawn in its run's status colour, its run as a bar to its close.
    started = [m for m in view.marks if m["kind"] == "started"]
    assert [m["status"] for m in started] == ["completed"] * (len(started) - 1) + ["running"]
    assert started[0]["colour"] == STATUS_COLOURS["completed"]
    assert [b["run_id"] for b in data["runs"]] == [m["run_id"] for m in started]
    first = data["runs"][0]
    assert first["end"] - first["start"] == pytest.approx(3 * MINUTE, abs=1)
    assert data["runs"][-1]["end"] is None
    # A skipped one says why, on hover and in the table.
    skipped = next(m for m in view.marks if m["kind"] == "skipped")
    assert skipped["detail"] == "a run of this schedule is still open (SKIP)"
    assert skipped["text"].endswith(": a run of this schedule is still open (SKIP)")
    assert data["policy"]["overlap"] == "SKIP" and data["spec"] == "every 1 min"
    assert not data["paused"]
    assert data["start"] < view.marks[0]["at"] and data["end"] > view.marks[-1]["at"]
    html = view._static_html()
    assert html is not None and "skipped (overlap)" in html and "upcoming (UTC)" in html
    assert f"{info.num_actions_skipped_overlap} skipped" in view._static_text()
    assert not view.refreshing and not view.live


async def test_buffer_one_shows_the_waiting_start_and_misses_after_downtime(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
            await client.create_schedule(
                "b", every_minute(P.BUFFER_ONE, catchup_window=timedelta(minutes=2))
            )
            await until_next(env, 1.5)
            view = ScheduleView(client, "b", refresh_interval=0.05)
            view.stop()
            assert kinds(view)[:3] == ["started", "waiting", "upcoming"]
            assert view.data["counters"]["buffered_actions"] == 1
            waiting = view.marks[1]
            assert waiting["text"].endswith("buffered: starts when the open run closes")
        # The service is down for ten minutes (nobody hosts the schedule) ...
        client.clock.advance(10 * MINUTE)  # type: ignore[attr-defined]
        async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
            await env.sleep(1)
            view.refresh()
            missed = [m for m in view.marks if m["kind"] == "missed"]
            desc = await client.get_schedule_handle("b").describe()
            view.close()
    # ... and only what is inside the catch-up window is made up; the rest is missed.
    assert len(missed) == desc.info.num_actions_missed_catchup_window > 0
    assert view.data["counters"]["num_actions_missed_catchup_window"] == len(missed)
    assert all("past the catch-up window" in m["detail"] for m in missed)
    assert view.data["policy"]["catchup_window"] == "2 min"


async def test_the_view_follows_the_schedule_live(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
            await client.create_schedule("live", every_minute())
            view = ScheduleView(client, "live", refresh_interval=0.05)
            try:
                assert view.live and view.refreshing and _live.subscriptions() == 1
                assert kinds(view) == ["upcoming"] * 5
                assert view.data["logged"] == 0
                await until_next(env, 2.5)
                await eventually(
                    lambda: kinds(view)[:3] == ["started", "skipped", "skipped"],
                    "the new action times in the live view",
                )
                assert view.data["logged"] == 3
            finally:
                view.stop()
    assert not view.refreshing and _live.subscriptions() == 0


async def test_pause_on_failure_shows_paused_with_the_note(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[ThreeMinutes]):
            sched = every_minute(plan="fails", every=10 * MINUTE, pause_on_failure=True)
            await client.create_schedule("f", sched)
            await until_next(env, 3.5, every=10 * MINUTE)
            view = ScheduleView(client, "f")
            view.stop()
    data = view.data
    assert data["paused"] and data["note"].startswith("paused due to workflow failure")
    assert "the report broke" in data["note"]
    started = [m for m in view.marks if m["kind"] == "started"]
    assert [m["status"] for m in started] == ["failed"]
    assert started[0]["colour"] == STATUS_COLOURS["failed"]
    assert all("paused: it will not be taken" in m["text"] for m in view.marks[1:])
    assert "PAUSED: paused due to workflow failure" in view._static_text()
    assert "pause on failure yes" in view._static_text()


async def test_static_html_escapes_every_piece_of_data(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = await mixed_schedule(env)
        view = ScheduleView(client, "mixed")
        view.stop()
    assert {"started", "skipped", "missed", "waiting", "upcoming"} <= set(kinds(view))
    html = view._static_html()
    assert html is not None
    assert "<img" not in html and "<b>" not in html
    assert "&lt;img src=x onerror=window.__xss=1&gt;" in html
    assert view.data["note"] == XSS


async def test_the_display_data_holds_the_static_fallbacks(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = await mixed_schedule(env)
        view = ScheduleView(client, "mixed")
        view.stop()
        bundle = view._repr_mimebundle_()
        view.close()
    assert bundle is not None
    data, _metadata = bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("<ScheduleView mixed · ")
    assert "missed (catch-up window)" in data["text/plain"]
    assert "PAUSED: &lt;img" in data["text/html"] and "<img" not in data["text/html"]


async def test_a_deleted_schedule_stops_the_live_view_saying_so(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule("gone", every_minute())
        view = ScheduleView(client, "gone", refresh_interval=0.05)
        try:
            await handle.delete()
            await eventually(lambda: not view.live, "the view to stop")
            assert "live refresh stopped: could not read schedule 'gone'" in view.error
            await eventually(lambda: not view.refreshing, "the refresh to end")
            assert kinds(view) == ["upcoming"] * 5  # what it showed last stays
        finally:
            view.close()
