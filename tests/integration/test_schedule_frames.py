"""``schedule_actions_dataframe``: a schedule's action log as a DataFrame on both backends,
on the time-skipping clock: started rows with their run's current status, skipped rows
with their reason and no run, a trigger's row, fixed dtypes (also for no actions)."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from engine import Worker, workflow
from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from engine.dataframes import SCHEDULE_ACTION_COLUMNS, schedule_actions_dataframe
from engine.exceptions import ApplicationError
from engine.testing import WorkflowEnvironment


@workflow.defn
class Job:
    @workflow.run
    async def run(self) -> str:
        # 130 s: the next two minutely actions come while it runs. Runs started at an even
        # minute fail (SKIP starts one every third minute: they alternate).
        await workflow.sleep(130)
        if int(workflow.info().workflow_id[-6:-4]) % 2 == 0:
            raise ApplicationError("no", non_retryable=True)
        return "ok"


def _schedule() -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(Job.run, id="job", task_queue="frames"),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=1))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def test_started_and_skipped_rows_with_statuses(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue="frames", workflows=[Job]):
            handle = await client.create_schedule("s", _schedule())
            empty = await schedule_actions_dataframe(client, "s")
            await env.sleep(timedelta(minutes=8))
            desc = await handle.describe()
            df = await schedule_actions_dataframe(client, "s")
            log = await handle.actions()
            statuses = {}
            for e in log:
                if e.run_id:
                    d = await client.get_workflow_handle(
                        e.workflow_id or "", run_id=e.run_id
                    ).describe()
                    statuses[e.run_id] = d.status.name

    assert list(empty.columns) == list(SCHEDULE_ACTION_COLUMNS) and len(empty) == 0
    assert list(df.columns) == list(SCHEDULE_ACTION_COLUMNS)
    for frame in (empty, df):
        for column in ("nominal_time", "scheduled_time", "decided_time"):
            assert str(frame[column].dtype) == "datetime64[ns, UTC]"
        for column in ("workflow_id", "run_id", "detail"):
            assert frame[column].dtype == pd.StringDtype()
        for column in ("outcome", "source", "overlap", "status"):
            assert isinstance(frame[column].dtype, pd.CategoricalDtype)

    # one row per log entry, in order, with the same facts
    assert len(df) == len(log) >= 8
    assert list(df.outcome) == [e.outcome for e in log]
    assert list(df.nominal_time) == [pd.Timestamp(e.nominal_time) for e in log]
    assert list(df.workflow_id.fillna("-")) == [e.workflow_id or "-" for e in log]
    started = df[df.outcome == "started"]
    skipped = df[df.outcome == "skipped_overlap"]
    assert len(started) == desc.info.num_actions >= 3
    assert len(skipped) == desc.info.num_actions_skipped_overlap >= 4
    assert set(df.source) == {"spec"} and set(df.overlap) == {"SKIP"}
    # skipped rows: no run, no status, a reason
    assert skipped.run_id.isna().all() and skipped.status.isna().all()
    assert skipped.detail.notna().all() and (skipped.detail.str.len() > 0).all()
    # started rows: each run's current status, as describe() gives it
    assert started.run_id.notna().all()
    assert list(started.status) == [statuses[r] for r in started.run_id]
    assert {"COMPLETED", "FAILED"} <= set(started.status)
    assert "RUNNING" in set(started.status)  # the last one, still asleep
    # minute after minute: the nominal times are a minute apart
    gaps = df.nominal_time.diff().dropna().unique()
    assert list(gaps) == [pd.Timedelta(minutes=1)]


async def test_a_trigger_row_and_a_gone_run(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        handle = await client.create_schedule("s", _schedule())
        await handle.pause()
        await handle.trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL)
        [entry] = await handle.actions()
        df = await schedule_actions_dataframe(client, "s")
        assert df.status.tolist() == ["RUNNING"]  # no worker: it waits
        await client.get_workflow_handle(entry.workflow_id or "").terminate("stop")
        after = await schedule_actions_dataframe(client, "s")
    row = after.iloc[0]
    assert (row.outcome, row.source, row.overlap, row.status) == (
        "started",
        "trigger",
        "ALLOW_ALL",
        "TERMINATED",
    )
    assert row.run_id == entry.run_id and row.workflow_id == entry.workflow_id
