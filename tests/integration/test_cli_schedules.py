"""``durable schedule list|describe|create|trigger|pause|unpause|backfill|delete``, run
in-process (``main([...])``) on both backends: what each command prints and what it did to
the schedule, the skipped actions ``describe`` shows with their reason, and bad flags
refused in one line naming the flag, with nothing created."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine.client import ScheduleNotFoundError, ScheduleOverlapPolicy
from engine.testing import WorkflowEnvironment

from .test_cli import _assert_one_line_error, arun_cli, run_cli


@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(seconds)
        return "rested"


def _create(db: str, *extra: str) -> list[str]:
    return [
        "schedule", "create", "--db", db, "-s", "nightly", "--workflow-id", "job",
        "--type", "Nap", "--task-queue", "sched", "--input", "130", *extra,
    ]  # fmt: skip


async def _describe(db: str, schedule_id: str) -> Any:
    client = await Client.connect(db)
    try:
        return await client.get_schedule_handle(schedule_id).describe()
    finally:
        await client.close()


def test_create_describe_list_trigger_pause_backfill_delete(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys,
        *_create(db_url, "--interval", "5m", "--cron", "30 9 * * MON-FRI", "--calendar",
                 '{"dayOfWeek": "Sat", "hour": 12, "minute": "0,30"}',
                 "--overlap-policy", "BufferOne", "--catchup-window", "10m",
                 "--pause-on-failure", "--notes", "the report", "--remaining-actions", "4",
                 "--jitter", "30s", "--time-zone", "Europe/Paris"),
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("Created schedule nightly (workflow Nap, task queue sched)")
    assert "Next action: 20" in out
    d = asyncio.run(_describe(db_url, "nightly"))
    assert d.schedule.policy.overlap == ScheduleOverlapPolicy.BUFFER_ONE
    assert d.schedule.policy.catchup_window == timedelta(minutes=10)
    assert d.schedule.policy.pause_on_failure
    assert d.schedule.spec.intervals[0].every == timedelta(minutes=5)
    assert d.schedule.spec.jitter == timedelta(seconds=30)
    assert d.schedule.spec.time_zone_name == "Europe/Paris"
    saturday = [c for c in d.schedule.spec.calendars if c.day_of_week[0].start == 6]
    assert [(r.start, r.end) for r in saturday[0].minute] == [(0, 0), (30, 30)]
    assert (d.schedule.state.note, d.schedule.state.limited_actions) == ("the report", True)
    assert d.schedule.state.remaining_actions == 4

    # describe: the text, then JSON with the same facts
    code, out, err = run_cli(capsys, "schedule", "describe", "--db", db_url, "-s", "nightly")
    assert code == 0, err
    assert "Workflow:       Nap (id job, task queue sched)" in out
    assert "Input:          [130]" in out
    assert "Interval      every 5m" in out
    assert "Overlap policy: BufferOne" in out
    assert "Catch-up window: 10m" in out
    assert "Pause on failure: yes" in out
    assert "State:          active (the report)" in out
    assert "Remaining actions: 4" in out
    assert "Skipped (overlap): 0" in out and "Missed (catch-up window): 0" in out
    assert "Next action times: 10" in out and "Action log: empty" in out
    code, out, err = run_cli(
        capsys, "schedule", "describe", "--db", db_url, "-s", "nightly", "-o", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["id"] == "nightly" and doc["action_log"] == []
    assert doc["schedule"]["action"]["workflow"] == "Nap"
    assert doc["schedule"]["action"]["args"] == [130]
    assert doc["schedule"]["policy"]["overlap"] == "BUFFER_ONE"
    assert doc["schedule"]["spec"]["intervals"] == [{"every": 300.0, "offset": None}]
    assert doc["info"]["num_actions"] == 0
    assert len(doc["info"]["next_action_times"]) == 10

    # a second schedule, paused; list with a query
    code, _, err = run_cli(
        capsys,
        "schedule", "create", "--db", db_url, "-s", "hourly", "--workflow-id", "h",
        "--type", "Nap", "--task-queue", "sched", "--interval", "1h/15m", "--paused",
    )  # fmt: skip
    assert code == 0, err
    hourly = asyncio.run(_describe(db_url, "hourly"))
    assert hourly.schedule.spec.intervals[0].offset == timedelta(minutes=15)
    assert all(t.minute == 15 for t in hourly.info.next_action_times)
    code, out, _ = run_cli(capsys, "schedule", "list", "--db", db_url)
    header, *rows = out.strip().splitlines()
    assert header.split()[:2] == ["SCHEDULE", "ID"]
    assert [r.split()[:3] for r in rows] == [
        ["hourly", "Nap", "PAUSED"],
        ["nightly", "Nap", "active"],
    ]
    code, out, _ = run_cli(
        capsys, "schedule", "list", "--db", db_url, "-q", "TemporalSchedulePaused = true", "-o",
        "json",
    )  # fmt: skip
    assert code == 0
    [entry] = json.loads(out)
    assert (entry["id"], entry["paused"], entry["workflow_type"]) == ("hourly", True, "Nap")
    code, out, err = run_cli(capsys, "schedule", "list", "--db", db_url, "-q", "ScheduleId = 'x'")
    assert code == 0 and "no schedules match" in err

    # pause and unpause keep the reason as the note
    code, out, _ = run_cli(
        capsys, "schedule", "pause", "--db", db_url, "-s", "nightly", "--reason", "maintenance"
    )
    assert (code, out.strip()) == (0, "Paused schedule nightly")
    state = asyncio.run(_describe(db_url, "nightly")).schedule.state
    assert (state.paused, state.note) == (True, "maintenance")
    code, out, _ = run_cli(capsys, "schedule", "unpause", "--db", db_url, "-s", "hourly")
    assert (code, out.strip()) == (0, "Unpaused schedule hourly")
    state = asyncio.run(_describe(db_url, "hourly")).schedule.state
    assert (state.paused, state.note) == (False, "(no reason provided)")

    # trigger starts a run at once (even paused): no host needed. Under the schedule's
    # BufferOne it is a running action; one with --overlap-policy AllowAll starts beside it.
    code, out, _ = run_cli(capsys, "schedule", "trigger", "--db", db_url, "-s", "nightly")
    assert code == 0 and out.strip().startswith("Triggered schedule nightly: started: job-"), out
    d = asyncio.run(_describe(db_url, "nightly"))
    assert d.info.num_actions == 1
    [running] = d.info.running_actions
    assert running.workflow_id.startswith("job-")  # type: ignore[attr-defined]
    time.sleep(1.05)  # workflow ids end in the action's second: one a second later is new
    code, out, _ = run_cli(
        capsys, "schedule", "trigger", "--db", db_url, "-s", "nightly", "--overlap-policy",
        "allow_all",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run_cli(
        capsys, "schedule", "describe", "--db", db_url, "-s", "nightly", "-o", "json"
    )
    doc = json.loads(out)
    assert doc["info"]["num_actions"] == 2, doc["action_log"]
    assert [(e["source"], e["outcome"], e["overlap"]) for e in doc["action_log"]] == [
        ("trigger", "started", "BUFFER_ONE"),
        ("trigger", "started", "ALLOW_ALL"),
    ]
    assert doc["info"]["running_actions"] == [
        {
            "workflow_id": running.workflow_id,
            "first_execution_run_id": running.first_execution_run_id,
        }  # type: ignore[attr-defined]
    ]

    # backfill: the times in [start, end] (both ends, as the dev server), each started under AllowAll (hourly has no
    # jitter: a jittered time after the end would not be in the period)
    start = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    code, out, err = run_cli(
        capsys, "schedule", "backfill", "--db", db_url, "-s", "hourly",
        "--start-time", "2026-01-05T08:15:00Z", "--end-time", "2026-01-05T11:15:00+00:00",
        "--overlap-policy", "AllowAll",
    )  # fmt: skip
    assert (code, out.strip()) == (0, "Backfilled schedule hourly: 4 started"), err
    code, out, _ = run_cli(
        capsys, "schedule", "describe", "--db", db_url, "-s", "hourly", "-o", "json"
    )
    log = json.loads(out)["action_log"]
    assert [e["nominal_time"] for e in log] == [
        (start + timedelta(hours=k, minutes=15)).isoformat() for k in (0, 1, 2, 3)
    ]
    assert [(e["source"], e["outcome"], e["overlap"]) for e in log] == [
        ("backfill", "started", "ALLOW_ALL")
    ] * 4
    assert [e["workflow_id"] for e in log] == [
        f"h-2026-01-05T{h}:15:00Z" for h in ("08", "09", "10", "11")
    ]
    code, out, _ = run_cli(
        capsys, "schedule", "describe", "--db", db_url, "-s", "hourly", "--log-rows", "2"
    )
    assert "Action log (last 2):" in out
    assert "2026-01-05T11:15:00.000Z  started  backfill  AllowAll" in out
    assert "2026-01-05T09:15:00.000Z" not in out.split("Action log")[1]
    assert "Recent actions: 4" in out

    # delete; then the schedule is gone, and describing it is an error
    code, out, _ = run_cli(capsys, "schedule", "delete", "--db", db_url, "-s", "hourly")
    assert (code, out.strip()) == (0, "Deleted schedule hourly (the runs it started go on)")
    with pytest.raises(ScheduleNotFoundError):
        asyncio.run(_describe(db_url, "hourly"))
    code, _, err = run_cli(capsys, "schedule", "describe", "--db", db_url, "-s", "hourly")
    assert code == 2
    _assert_one_line_error(err, "'hourly'", "durable schedule list")


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--interval", "0s"], ["--interval '0s' must be more than 0"]),
        (["--interval", "5 minutes"], ["--interval '5 minutes' is not a duration"]),
        (["--interval", "1h/soon"], ["--interval (its offset", "'soon' is not a duration"]),
        (["--cron", "61 * * * *"], ["Invalid schedule spec", "Minute"]),
        (["--cron", "not a cron"], ["CronString does not have 5-7 fields"]),
        (["--interval", "1m", "--time-zone", "Mars/Olympus"], ["unknown time zone Mars/Olympus"]),
        (["--calendar", '{"hour": 25}'], ["--calendar #1 hour", "'25' is outside 0-23"]),
        (["--calendar", '{"hours": 1}'], ["--calendar #1: unknown field 'hours'"]),
        (["--calendar", '{"hour": "17-9"}'], ["'17-9' ends before it starts", "'17-23,0-9'"]),
        (["--calendar", "[1]"], ["--calendar '[1]' must be a JSON object"]),
        (["--calendar", "{"], ["--calendar '{' is not valid JSON"]),
        (["--interval", "1m", "--overlap-policy", "Never"], ["--overlap-policy 'Never'"]),
        (["--interval", "1m", "--catchup-window", "soon"], ["--catchup-window 'soon'"]),
        (["--interval", "1m", "--start-time", "2026-01-01"], ["--start-time '2026-01-01'"]),
        (["--interval", "1m", "--remaining-actions", "-1"], ["--remaining-actions"]),
        (["--interval", "1m", "--jitter=-5s"], ["--jitter '-5s' must be at least 0"]),
    ],
)
def test_bad_create_flags_name_the_flag_and_create_nothing(
    db_url: str, capsys: pytest.CaptureFixture[str], extra: list[str], fragments: list[str]
) -> None:
    code, out, err = run_cli(capsys, *_create(db_url, *extra))
    assert code == 2 and out == ""
    _assert_one_line_error(err, *fragments)
    code, out, err = run_cli(capsys, "schedule", "list", "--db", db_url, "-o", "json")
    if code == 0:  # (a SQLite file that was never created is refused: nothing there either)
        assert json.loads(out) == []


def test_other_bad_input(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *_create(db_url, "--interval", "1m"))
    assert code == 0, err
    code, _, err = run_cli(capsys, *_create(db_url, "--interval", "1m"))
    assert code == 2
    _assert_one_line_error(err, "--schedule-id 'nightly'", "exists already")
    code, _, err = run_cli(
        capsys, "schedule", "backfill", "--db", db_url, "-s", "nightly",
        "--start-time", "2026-01-02T00:00:00Z", "--end-time", "2026-01-01T00:00:00Z",
    )  # fmt: skip
    assert code == 2
    _assert_one_line_error(err, "--end-time must not be before --start-time")
    code, _, err = run_cli(
        capsys, "schedule", "trigger", "--db", db_url, "-s", "nightly", "--overlap-policy", "x"
    )
    assert code == 2
    _assert_one_line_error(err, "--overlap-policy 'x' is not an overlap policy", "BufferOne")
    code, _, err = run_cli(capsys, "schedule", "trigger", "--db", db_url, "-s", "nope")
    assert code == 2
    _assert_one_line_error(err, "'nope'", "durable schedule list")
    code, _, err = run_cli(capsys, "schedule", "list", "--db", db_url, "-q", "Nope = 'x'")
    assert code == 2
    _assert_one_line_error(err, "list filter", "Nope")
    code, _, err = run_cli(capsys, "schedule", "describe", "--db", db_url)
    assert code == 2 and "--schedule-id/-s" in err  # argparse: required
    assert asyncio.run(_describe(db_url, "nightly")).info.num_actions == 0
    code, out, _ = run_cli(capsys, "schedule", "create", "--help")
    assert code == 0 and "background duties" in " ".join(out.split())


async def test_describe_shows_skipped_actions_with_their_reason(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Created by the CLI (which hosts nothing), run by the time-skipping environment's
    worker: under Skip, a 130 s run every minute skips the next two actions, and describe
    shows them in the action log with why."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="sched", workflows=[Nap]):
            code, out, err = await arun_cli(capsys, *_create(db_url, "--interval", "1m"))
            assert code == 0, err
            await env.sleep(4 * 60)
            # The text and the JSON of one state: the schedule's last passes may still be
            # committing as the sleep returns (the text is read between two equal JSONs).
            describe = ("schedule", "describe", "--db", db_url, "-s", "nightly")
            code, js, err = await arun_cli(capsys, *describe, "-o", "json")
            for _ in range(20):
                assert code == 0, err
                code, out, err = await arun_cli(capsys, *describe)
                assert code == 0, err
                before, (code, js, err) = js, await arun_cli(capsys, *describe, "-o", "json")
                if js == before:
                    break
                await asyncio.sleep(0.1)
            assert code == 0, err
    doc = json.loads(js)
    outcomes = [e["outcome"] for e in doc["action_log"]]
    assert outcomes[:3] == ["started", "skipped_overlap", "skipped_overlap"]
    assert doc["info"]["num_actions_skipped_overlap"] == outcomes.count("skipped_overlap") >= 2
    skipped = [e for e in doc["action_log"] if e["outcome"] == "skipped_overlap"]
    assert all(e["detail"] and e["workflow_id"] is None for e in skipped)
    assert f"Skipped (overlap): {outcomes.count('skipped_overlap')}" in out
    log_text = out.split("Action log")[1]
    lines = [line.split() for line in log_text.splitlines()[2:]]
    assert [cells[1] for cells in lines] == outcomes
    assert lines[1][2:4] == ["spec", "Skip"]
    assert skipped[0]["detail"] in log_text


def test_a_calendar_step_from_a_value_runs_to_the_fields_end(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, *_create(db_url, "--calendar", '{"minute": "5/15", "hour": "*"}')
    )
    assert code == 0, err
    d = asyncio.run(_describe(db_url, "nightly"))
    [cal] = d.schedule.spec.calendars
    assert [(r.start, r.end, r.step) for r in cal.minute] == [(5, 59, 15)]  # 5, 20, 35, 50
    assert {t.minute for t in d.info.next_action_times} == {5, 20, 35, 50}


async def test_a_trigger_says_what_became_of_it(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under Skip with a run open, a trigger starts nothing: the command says so."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        code, _, err = await arun_cli(capsys, *_create(db_url))  # no spec: triggers only
        assert code == 0, err
        trigger = ("schedule", "trigger", "--db", db_url, "-s", "nightly")
        code, first, err = await arun_cli(capsys, *trigger)
        assert code == 0, err
        assert first.strip().startswith("Triggered schedule nightly: started: job-")
        env.client.clock.advance(2)  # type: ignore[attr-defined]  # another second's id
        code, second, err = await arun_cli(capsys, *trigger)
        assert code == 0, err
    assert second.strip() == (
        "Triggered schedule nightly: skipped overlap (a run of this schedule is still open (SKIP))"
    )
