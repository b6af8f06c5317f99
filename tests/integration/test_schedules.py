"""Schedules as Temporal has them, on both backends, on the time-skipping clock: each
overlap policy against a run that outlasts the interval, the catch-up window after the
service was down, pause on failure, limited actions, triggers and backfills, the schedule
search attributes on the runs, bad input refused with nothing created. Ids, messages and
the overlap rules were checked on ``temporal server start-dev``
(``tests/integration/data/schedules_dev_server.json``)."""

from __future__ import annotations

import asyncio
import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleNotFoundError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from engine.common import WorkflowExecutionStatus
from engine.exceptions import ApplicationError, InvalidArgumentError, RPCError, RPCStatusCode
from engine.testing import WorkflowEnvironment

P = ScheduleOverlapPolicy
S = WorkflowExecutionStatus
MINUTE = 60.0
#: How long a scheduled run takes: more than two intervals, so actions overlap.
RUN_SECONDS = 130.0


@workflow.defn
class Slow:
    @workflow.run
    async def run(self, plan: str) -> str:
        try:
            await workflow.sleep(RUN_SECONDS)
        except asyncio.CancelledError:
            if plan == "cleans-up":
                await workflow.sleep(20)  # the next run waits for this (CANCEL_OTHER)
            raise
        if plan == "fails":
            raise ApplicationError("boom", non_retryable=True)
        return plan


@workflow.defn
class Quick:
    @workflow.run
    async def run(self) -> str:
        last = (
            workflow.get_last_completion_result(str)
            if workflow.has_last_completion_result()
            else None
        )
        return f"after {last}" if last else "first"


def _schedule(
    policy: P = P.SKIP, *, plan: str = "ok", every: float = MINUTE, wf: Any = Slow.run, **kw: Any
) -> Schedule:
    args = [plan] if wf is Slow.run else []
    return Schedule(
        action=ScheduleActionStartWorkflow(wf, args=args, id="job", task_queue="sched"),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every))]),
        policy=SchedulePolicy(overlap=policy, **kw),
    )


def _first_action(now: float, every: float = MINUTE) -> float:
    return (math.floor(now / every) + 1) * every


async def _outcomes(client: Client, schedule_id: str, m1: float) -> list[tuple[str, int]]:
    """(outcome, which action: 1 for the first) of each logged action time."""
    log = await client.get_schedule_handle(schedule_id).actions()
    return [(e.outcome, round((e.nominal_time.timestamp() - m1) / MINUTE) + 1) for e in log]


async def _runs(client: Client, schedule_id: str) -> dict[str, S]:
    found = {}
    async for wf in client.list_workflows(f"TemporalScheduledById = '{schedule_id}'"):
        found[wf.id] = wf.status
    return found


def _id(m1: float, k: int) -> str:
    t = datetime.fromtimestamp(m1 + (k - 1) * MINUTE, UTC)
    return "job-" + t.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the overlap policies ------------------------------------------------------------------

#: What becomes of actions 1 to 6 (a minute apart) when each run takes 130 s, by 30 s
#: after the sixth: worked out from Temporal's rules, as the docstring of
#: ``engine._service.schedule_pass._Pass.process_buffer`` states them.
EXPECTED: dict[P, dict[str, Any]] = {
    # 1 runs to 3+10 s; 2 and 3 are skipped; 4 starts; 5 and 6 are skipped.
    P.SKIP: {"started": [1, 4], "skipped": [2, 3, 5, 6], "buffered": 0},
    # 2 waits and starts when 1 closes (3+10 s), 3 is skipped (one waits already); 4 waits,
    # 5 is skipped; 4 starts when 2 closes (5+20 s); 6 waits.
    P.BUFFER_ONE: {"started": [1, 2, 4], "skipped": [3, 5], "buffered": 1},
    # Nothing is skipped: 2 starts at 3+10 s, 3 at 5+20 s; 4, 5, 6 wait.
    P.BUFFER_ALL: {"started": [1, 2, 3], "skipped": [], "buffered": 3},
    # Each action asks the open run to cancel and starts once it has (20 s of clean-up).
    P.CANCEL_OTHER: {"started": [1, 2, 3, 4, 5, 6], "skipped": [], "buffered": 0},
    # Each action terminates the open run and starts at once.
    P.TERMINATE_OTHER: {"started": [1, 2, 3, 4, 5, 6], "skipped": [], "buffered": 0},
    # Every action starts beside the open ones.
    P.ALLOW_ALL: {"started": [1, 2, 3, 4, 5, 6], "skipped": [], "buffered": 0},
}


@pytest.mark.parametrize("policy", list(EXPECTED), ids=lambda p: p.name)
async def test_each_overlap_policy_with_a_run_that_outlasts_the_interval(
    db_url: str, policy: P
) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[Slow]):
            handle = await client.create_schedule("s", _schedule(policy, plan="cleans-up"))
            m1 = _first_action(client.clock.now())
            await env.sleep(m1 + 5 * MINUTE + 30 - client.clock.now())
            desc = await handle.describe()
            outcomes = await _outcomes(client, "s", m1)
            runs = await _runs(client, "s")
    want = EXPECTED[policy]
    started = [k for o, k in outcomes if o == "started"]
    skipped = [k for o, k in outcomes if o == "skipped_overlap"]
    assert started == want["started"]
    assert skipped == want["skipped"]
    assert desc.info.num_actions == len(want["started"])
    assert desc.info.num_actions_skipped_overlap == len(want["skipped"])
    assert len(desc.info.buffered_actions) == want["buffered"]
    assert sorted(runs) == sorted(_id(m1, k) for k in want["started"])
    recent = [a.action.workflow_id for a in desc.info.recent_actions]  # type: ignore[attr-defined]
    assert recent == [_id(m1, k) for k in started]
    by_start = [runs[_id(m1, k)] for k in want["started"]]
    if policy == P.CANCEL_OTHER:
        assert by_start == [S.CANCELED] * 5 + [S.RUNNING]
        assert [k for o, k in outcomes if o == "cancelled_other"] == [2, 3, 4, 5, 6]
    elif policy == P.TERMINATE_OTHER:
        assert by_start == [S.TERMINATED] * 5 + [S.RUNNING]
        assert [k for o, k in outcomes if o == "terminated_other"] == [2, 3, 4, 5, 6]
    elif policy == P.ALLOW_ALL:
        assert by_start == [S.COMPLETED] * 4 + [S.RUNNING] * 2
    if policy in (P.BUFFER_ONE, P.BUFFER_ALL):
        # A buffered action starts when the run before it closes, not at its own time.
        log = await _log_after(db_url, m1)
        second = next(e for e in log if e[0] == "started" and e[1] == 2)
        assert second[2] == pytest.approx(m1 + RUN_SECONDS, abs=1.0)
        assert runs[_id(m1, 1)] == S.COMPLETED


async def _log_after(db_url: str, m1: float) -> list[tuple[str, int, float]]:
    client = await Client.connect(db_url)
    try:
        log = await client.get_schedule_handle("s").actions()
        return [
            (
                e.outcome,
                round((e.nominal_time.timestamp() - m1) / MINUTE) + 1,
                e.decided_time.timestamp(),
            )
            for e in log
        ]
    finally:
        await client.close()


# -- catch-up ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [P.ALLOW_ALL, P.SKIP], ids=lambda p: p.name)
async def test_catch_up_after_downtime_only_within_the_window(db_url: str, policy: P) -> None:
    """Down for 10 intervals with a catch-up window of 3: the 3 inside it are taken (under
    SKIP one runs and the others overlap it), the 7 before it are missed."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        schedule = _schedule(policy, wf=Quick.run, catchup_window=timedelta(minutes=3))
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            handle = await client.create_schedule("s", schedule)
            m1 = _first_action(client.clock.now())
            await env.sleep(m1 + 5 - client.clock.now())
            assert (await handle.describe()).info.num_actions == 1
        # The worker was the only host: nothing takes the schedule's actions now.
        client.clock.advance(10 * MINUTE)  # type: ignore[attr-defined]
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            await env.sleep(1)
            desc = await handle.describe()
            outcomes = await _outcomes(client, "s", m1)
    assert desc.info.num_actions_missed_catchup_window == 7
    assert [k for o, k in outcomes if o == "missed_catchup_window"] == list(range(2, 9))
    if policy == P.ALLOW_ALL:
        assert [k for o, k in outcomes if o == "started"] == [1, 9, 10, 11]
        assert desc.info.num_actions == 4
    else:
        assert [k for o, k in outcomes if o == "started"] == [1, 9]
        assert [k for o, k in outcomes if o == "skipped_overlap"] == [10, 11]


# -- ids, search attributes, results -------------------------------------------------------


async def test_scheduled_runs_carry_temporals_ids_and_search_attributes(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            await client.create_schedule("s", _schedule(wf=Quick.run))
            m1 = _first_action(client.clock.now())
            await env.sleep(m1 + 2 * MINUTE + 5 - client.clock.now())
            first = client.get_workflow_handle(_id(m1, 1))
            second = client.get_workflow_handle(_id(m1, 2))
            assert await first.result() == "first"
            # Each run gets the result of the one before (not under ALLOW_ALL).
            assert await second.result() == "after first"
            desc = await second.describe()
    attrs = desc.search_attributes
    assert attrs["TemporalScheduledById"] == ["s"]
    # A run's workflow id and start time attribute are the nominal time, to the second.
    assert attrs["TemporalScheduledStartTime"] == [datetime.fromtimestamp(m1 + MINUTE, UTC)]


# -- pause on failure, limited actions, pause, trigger, backfill ---------------------------


async def test_pause_on_failure_pauses_with_the_failure_in_the_note(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[Slow]):
            handle = await client.create_schedule(
                "s", _schedule(plan="fails", every=10 * MINUTE, pause_on_failure=True)
            )
            m1 = _first_action(client.clock.now(), 10 * MINUTE)
            await env.sleep(m1 + 35 * MINUTE - client.clock.now())
            desc = await handle.describe()
            outcomes = await _outcomes(client, "s", m1)
    assert desc.schedule.state.paused
    first = _id(m1, 1)
    assert desc.schedule.state.note == f"paused due to workflow failure: {first}: boom"
    assert desc.info.num_actions == 1  # the later times pass without an action
    assert [o for o, _ in outcomes] == ["started"]


async def test_limited_actions_run_out_and_triggers_still_start(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        schedule = _schedule(P.ALLOW_ALL, wf=Quick.run)
        schedule.state = ScheduleState(limited_actions=True, remaining_actions=2)
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            handle = await client.create_schedule("s", schedule)
            m1 = _first_action(client.clock.now())
            await env.sleep(m1 + 4 * MINUTE + 5 - client.clock.now())
            desc = await handle.describe()
            assert desc.info.num_actions == 2
            assert desc.schedule.state.remaining_actions == 0
            assert desc.info.next_action_times == []  # none left to take
            await handle.trigger()
            assert (await handle.describe()).info.num_actions == 3


async def test_pause_trigger_backfill_and_update(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            handle = await client.create_schedule("s", _schedule(P.ALLOW_ALL, wf=Quick.run))
            await handle.pause()
            desc = await handle.describe()
            assert desc.schedule.policy.catchup_window == timedelta(days=365)  # the default
            assert desc.schedule.state.paused
            assert desc.schedule.state.note == "Paused via Python SDK"
            assert desc.info.last_updated_at is None
            await handle.trigger()  # a trigger starts even while paused
            assert (await handle.describe()).info.num_actions == 1
            m1 = _first_action(client.clock.now())
            await env.sleep(m1 + 3 * MINUTE - client.clock.now())
            assert (await handle.describe()).info.num_actions == 1  # paused: none taken
            await handle.unpause(note="back")
            assert (await handle.describe()).schedule.state.note == "back"
            # A backfill of a past period: its times, both ends included (the dev server's).
            start = datetime.fromtimestamp(m1 - 10 * MINUTE, UTC)
            await handle.backfill(ScheduleBackfill(start, start + timedelta(minutes=3)))
            log = await handle.actions()
            backfilled = [e for e in log if e.source == "backfill"]
            assert [e.nominal_time for e in backfilled] == [
                start + timedelta(minutes=k) for k in (0, 1, 2, 3)
            ]
            assert all(e.outcome == "started" for e in backfilled)

            def every_five(inp: ScheduleUpdateInput) -> ScheduleUpdate:
                sched = inp.description.schedule
                sched.spec.intervals = [ScheduleIntervalSpec(every=timedelta(minutes=5))]
                return ScheduleUpdate(schedule=sched)

            await handle.update(every_five)
            desc = await handle.describe()
    assert desc.schedule.spec.intervals[0].every == timedelta(minutes=5)
    assert desc.info.last_updated_at is not None
    gaps = {
        (b - a).total_seconds()
        for a, b in zip(desc.info.next_action_times, desc.info.next_action_times[1:], strict=False)
    }
    assert gaps == {300.0}
    assert desc.info.num_actions == 5  # the trigger and the four backfilled


async def test_a_year_of_a_daily_schedule_runs_in_seconds(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        schedule = _schedule(wf=Quick.run, every=86400.0)
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            handle = await client.create_schedule("daily", schedule)
            await env.sleep(timedelta(days=365))
            desc = await handle.describe()
            odd = [e for e in await handle.actions() if e.outcome != "started"]
    assert not odd, odd
    assert desc.info.num_actions == 365
    assert desc.info.num_actions_skipped_overlap == 0
    assert desc.info.num_actions_missed_catchup_window == 0


# -- specs through the client --------------------------------------------------------------


async def test_calendar_in_a_zone_across_a_dst_change_and_end_at(db_url: str) -> None:
    """02:30 every day in New York: the spring change skips it on 14 March 2027 (the same
    rule as the dev server's recordings in tests/unit/data/schedule_spec_dev_server.json);
    end_at stops it."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        spec = ScheduleSpec(
            calendars=[ScheduleCalendarSpec(hour=[ScheduleRange(2)], minute=[ScheduleRange(30)])],
            time_zone_name="America/New_York",
            start_at=datetime(2027, 3, 11, tzinfo=UTC),
            end_at=datetime(2027, 3, 17, 12, tzinfo=UTC),
        )
        sched = _schedule(wf=Quick.run)
        sched.spec = spec
        handle = await client.create_schedule("s", sched)
        times = (await handle.describe()).info.next_action_times
    assert times == [
        datetime(2027, 3, 11, 7, 30, tzinfo=UTC),
        datetime(2027, 3, 12, 7, 30, tzinfo=UTC),
        datetime(2027, 3, 13, 7, 30, tzinfo=UTC),
        # 14 March: 02:30 does not exist in New York; then summer time (UTC-4)
        datetime(2027, 3, 15, 6, 30, tzinfo=UTC),
        datetime(2027, 3, 16, 6, 30, tzinfo=UTC),
        datetime(2027, 3, 17, 6, 30, tzinfo=UTC),
    ]


# -- bad input -----------------------------------------------------------------------------


def _with_spec(spec: ScheduleSpec) -> Schedule:
    sched = _schedule(wf=Quick.run)
    sched.spec = spec
    return sched


def not_a_workflow() -> None:
    pass


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: _with_spec(ScheduleSpec(cron_expressions=["not a cron"])),
            "Invalid schedule spec",
        ),
        (
            lambda: _with_spec(ScheduleSpec(cron_expressions=["61 * * * *"])),
            "Minute",
        ),
        (
            lambda: _with_spec(
                ScheduleSpec(
                    intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))],
                    time_zone_name="Mars/Olympus",
                )
            ),
            "Mars/Olympus",
        ),
        (
            lambda: _with_spec(ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(0))])),
            "ScheduleSpec.intervals[0].every",
        ),
    ],
    ids=["bad-cron", "cron-out-of-range", "unknown-zone", "zero-interval"],
)
async def test_bad_specs_are_refused_and_nothing_is_created(
    db_url: str, make: Any, message: str
) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        with pytest.raises(InvalidArgumentError, match=re.escape(message)):
            await client.create_schedule("s", make())
        assert [s.id async for s in await client.list_schedules()] == []
        with pytest.raises(ScheduleNotFoundError):
            await client.get_schedule_handle("s").describe()


async def test_bad_actions_and_duplicates_are_refused(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        with pytest.raises(
            InvalidArgumentError, match=r"ScheduleActionStartWorkflow.workflow.*not a workflow"
        ):
            ScheduleActionStartWorkflow(not_a_workflow, id="x", task_queue="q")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="task_queue is required"):
            ScheduleActionStartWorkflow(Quick.run, id="x", task_queue="")
        bad = _schedule(wf=Quick.run)
        bad.state = ScheduleState(remaining_actions=3)
        with pytest.raises(InvalidArgumentError, match="Must set limited actions to true"):
            await client.create_schedule("s", bad)
        bad.state = ScheduleState(limited_actions=True, remaining_actions=0)
        with pytest.raises(InvalidArgumentError, match="Must set limited actions to false"):
            await client.create_schedule("s", bad)
        assert [s.id async for s in await client.list_schedules()] == []
        await client.create_schedule("s", _schedule(wf=Quick.run))
        with pytest.raises(ScheduleAlreadyRunningError, match="Schedule already running"):
            await client.create_schedule("s", _schedule(wf=Quick.run))
        await client.get_schedule_handle("s").delete()
        with pytest.raises(ScheduleNotFoundError):
            await client.get_schedule_handle("s").delete()


async def test_list_schedules_with_a_filter(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        for name in ("a", "b", "c"):
            await client.create_schedule(name, _schedule(wf=Quick.run))
        await client.get_schedule_handle("b").pause(note="hold")
        everything = [s async for s in await client.list_schedules()]
        paused = [s.id async for s in await client.list_schedules("TemporalSchedulePaused = true")]
        prefixed = [s.id async for s in await client.list_schedules("ScheduleId IN ('a', 'c')")]
        with pytest.raises(InvalidArgumentError, match="invalid search attribute: NoSuchThing"):
            [s async for s in await client.list_schedules("NoSuchThing = 'x'")]
        with pytest.raises(InvalidArgumentError, match='cannot filter on "WorkflowType"'):
            [s async for s in await client.list_schedules("WorkflowType = 'Quick'")]
    assert [s.id for s in everything] == ["a", "b", "c"]
    assert everything[1].schedule is not None and everything[1].schedule.state.note == "hold"
    assert everything[0].schedule is not None
    assert everything[0].schedule.action.workflow == "Quick"  # type: ignore[attr-defined]
    assert paused == ["b"]
    assert prefixed == ["a", "c"]


async def test_a_short_catch_up_window_is_kept_as_ten_seconds(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule(
            "s", _schedule(wf=Quick.run, catchup_window=timedelta(seconds=1))
        )
        desc = await handle.describe()
    assert desc.schedule.policy.catchup_window == timedelta(seconds=10)  # as the dev server


async def test_a_trigger_names_its_run_by_the_second_it_came(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        sched = _schedule(P.ALLOW_ALL, wf=Quick.run)
        sched.spec = ScheduleSpec()  # no times of its own: only the triggers
        handle = await client.create_schedule("s", sched)
        client.clock.advance_to(math.ceil(client.clock.now()) + 0.001)  # type: ignore[attr-defined]
        before = client.clock.now()  # both triggers come within this second
        await handle.trigger()
        await handle.trigger()  # the same second: the same workflow id, so it cannot start
        desc = await handle.describe()
        log = await handle.actions()
    second = datetime.fromtimestamp(math.floor(before), UTC)
    assert [e.outcome for e in log] == ["started", "start_failed"]
    assert log[0].workflow_id == "job-" + second.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "already" in (log[1].detail or "")
    assert desc.info.num_actions == 1  # the dev server counts one too
    assert desc.info.running_actions == []  # ALLOW_ALL starts are not waited for


async def test_a_backfill_too_long_for_one_go_is_refused_whole(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule("s", _schedule(P.ALLOW_ALL, wf=Quick.run))
        end = datetime.fromtimestamp(_first_action(client.clock.now()) - 3600, UTC)
        with pytest.raises(InvalidArgumentError, match="at most 1000 action times"):
            await handle.backfill(ScheduleBackfill(end - timedelta(days=1), end))
        assert await handle.actions() == []  # nothing of it was taken
        await handle.backfill(ScheduleBackfill(end - timedelta(minutes=2), end))
        assert [e.outcome for e in await handle.actions()] == ["started"] * 3


# -- messages as the dev server words them ------------------------------------------------

_RECORDED = json.loads((Path(__file__).parent / "data" / "schedules_dev_server.json").read_text())[
    "3_errors"
]

_BAD_SPECS = {
    "cron_not_a_cron": ScheduleSpec(cron_expressions=["not a cron"]),
    "cron_61": ScheduleSpec(cron_expressions=["61 * * * *"]),
    "tz_mars": ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))], time_zone_name="Mars/Olympus"
    ),
    "interval_zero": ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(0))]),
    "interval_negative": ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(-1))]),
    "interval_offset_ge_every": ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=timedelta(seconds=10), offset=timedelta(seconds=15))]
    ),
}


@pytest.mark.parametrize("case", sorted(_BAD_SPECS))
async def test_a_bad_spec_says_what_the_dev_server_says(db_url: str, case: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        with pytest.raises(InvalidArgumentError) as raised:
            await env.client.create_schedule("s", _with_spec(_BAD_SPECS[case]))
    assert _RECORDED[case]["message"] in str(raised.value)
    # An RPCError too, as temporalio code catches the server's refusal.
    assert isinstance(raised.value, RPCError)
    assert raised.value.status == RPCStatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "call",
    ["describe", "pause", "unpause", "trigger", "delete", "update", "backfill"],
)
async def test_a_missing_schedule_is_not_found_in_temporals_words(db_url: str, call: str) -> None:
    recorded = _RECORDED[f"{call}_missing"]
    assert recorded["rpc_status"] == "NOT_FOUND"
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        handle = env.client.get_schedule_handle("does-not-exist")
        args: dict[str, Any] = {
            "update": {"updater": lambda inp: None},
            "backfill": {},
        }.get(call, {})
        method = getattr(handle, call)
        with pytest.raises(ScheduleNotFoundError) as raised:
            if call == "backfill":
                now = datetime.now(UTC)
                await method(ScheduleBackfill(now - timedelta(hours=1), now))
            else:
                await method(**args)
    assert raised.value.status.name == "NOT_FOUND"
    assert str(raised.value).startswith(recorded["message"])


# -- found by review -------------------------------------------------------------------------


async def test_a_pass_between_a_nominal_time_and_its_jitter_does_not_lose_it(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        sched = _schedule(P.ALLOW_ALL, wf=Quick.run, every=3600.0)
        sched.spec.jitter = timedelta(minutes=50)
        handle = await client.create_schedule("s", sched)
        times = (await handle.describe()).info.next_action_times
        # An action whose jitter moves it well after its nominal time (the hour).
        actual = next(t for t in times if (t.timestamp() % 3600) > 60)
        nominal = actual.timestamp() - actual.timestamp() % 3600
        client.clock.advance_to((nominal + actual.timestamp()) / 2)  # type: ignore[attr-defined]
        await handle.trigger()  # a pass in between
        async with Worker(client, task_queue="sched", workflows=[Quick]):
            await env.sleep(actual.timestamp() + 5 - client.clock.now())
        log = await handle.actions()
    spec = [e for e in log if e.source == "spec"]
    assert [e.nominal_time.timestamp() for e in spec][-1] == nominal
    assert spec[-1].scheduled_time == actual
    assert spec[-1].outcome == "started"


async def test_a_paused_schedule_holds_no_timer_and_makes_nothing_up(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        sched = _schedule(wf=Quick.run)
        sched.state = ScheduleState(paused=True)
        handle = await client.create_schedule("s", sched)
        await env.sleep(timedelta(days=30))  # nothing to stop at: one jump
        desc = await handle.describe()
        assert desc.info.next_action_times[0].timestamp() > client.clock.now()
        await handle.unpause()
        desc = await handle.describe()
        log = await handle.actions()
    assert desc.info.num_actions == 0
    assert desc.info.num_actions_missed_catchup_window == 0  # paused is not missed
    assert log == []


async def test_the_buffer_is_capped_and_the_overflow_logged(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        # No worker: the triggered run stays open, and every second's start is buffered.
        handle = await client.create_schedule(
            "s", _schedule(P.BUFFER_ALL, wf=Quick.run, every=1.0), trigger_immediately=True
        )
        client.clock.advance(1010)  # type: ignore[attr-defined]
        # A pass takes at most TIMES_PER_PASS (1000) times and leaves a timer due now for
        # the rest. The environment's own host runs passes too: when it holds the
        # schedule, ours finds its timer taken and does nothing, though the host's pass
        # will leave the rest due. So: until no schedule timer is due (a pass in progress
        # keeps its timer visible until it commits).
        svc = client.service
        while await svc.fire_due_schedules() or await svc.due_schedule_timers():
            pass
        desc = await handle.describe()
        log = await handle.actions(limit=5000)
    assert len(desc.info.buffered_actions) == 1000
    overflow = [e for e in log if e.outcome == "not_taken"]
    assert len(overflow) >= 9
    assert all("buffer holds 1000" in (e.detail or "") for e in overflow)


async def test_a_backfill_of_exactly_a_thousand_times_is_taken(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule("s", _schedule(P.ALLOW_ALL, wf=Quick.run))
        end = datetime.fromtimestamp(_first_action(client.clock.now()) - 3600, UTC)
        await handle.backfill(ScheduleBackfill(end - timedelta(minutes=999), end))
        assert (await handle.describe()).info.num_actions == 1000


async def test_the_newest_log_entries_are_read_at_once(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule("s", _schedule(P.ALLOW_ALL, wf=Quick.run))
        end = datetime.fromtimestamp(_first_action(client.clock.now()) - 3600, UTC)
        await handle.backfill(ScheduleBackfill(end - timedelta(minutes=9), end))
        everything = await handle.actions()
        newest = await handle.actions(limit=3, newest=True)
    assert len(everything) == 10
    assert newest == everything[-3:]  # oldest first, as every read of the log
