"""Stepping through a history: events in order, source line and locals, step back, breakpoints."""

from __future__ import annotations

import uuid
from datetime import timedelta

from engine import Worker, activity, workflow
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer


@activity.defn
async def double(x: int) -> int:
    return 2 * x


@workflow.defn
class FiveSteps:
    def __init__(self) -> None:
        self.total = 0

    @workflow.run
    async def run(self, n: int) -> int:
        for step in range(n):
            value = await workflow.execute_activity(
                double, step, start_to_close_timeout=timedelta(seconds=5)
            )
            self.total += value
        await workflow.sleep(1)
        return self.total


async def _recorded_history(tmp_path):  # type: ignore[no-untyped-def]
    env = await WorkflowEnvironment.start_time_skipping(
        database_url=f"sqlite:///{tmp_path / 'step.db'}"
    )
    try:
        async with Worker(
            env.client, task_queue="steps", workflows=[FiveSteps], activities=[double]
        ):
            handle = await env.client.start_workflow(
                FiveSteps.run, 5, id="five-" + uuid.uuid4().hex, task_queue="steps"
            )
            assert await handle.result() == 20
        return await handle.fetch_history()
    finally:
        await env.shutdown()


async def test_stepping_visits_each_event_with_source_and_locals(tmp_path) -> None:  # type: ignore[no-untyped-def]
    history = await _recorded_history(tmp_path)
    session = Replayer(workflows=[FiveSteps]).debug(history)
    seen = []
    lines = set()
    while True:
        snap = session.step()
        assert snap.diverged is None
        seen.append(snap.event.event_id if snap.event else None)
        if snap.source is not None:
            lines.add(snap.source.line)
            assert snap.source.function == "run"
            assert "step" in snap.locals and "n" in snap.locals
        if snap.at_end:
            break
    assert seen == [e.event_id for e in history.events]
    assert len(lines) >= 2  # suspended at the activity, then at the timer
    assert snap.completed and snap.attributes["total"] == "20"


async def test_step_back_returns_the_earlier_state(tmp_path) -> None:  # type: ignore[no-untyped-def]
    history = await _recorded_history(tmp_path)
    session = Replayer(workflows=[FiveSteps]).debug(history)
    third = [e for e in history.events if e.event_type == "ActivityTaskCompleted"][2]
    at_third = session.run_to(event_id=third.event_id)
    assert at_third.event.event_id == third.event_id
    forward = session.step_task()
    assert forward.attributes["total"] != at_third.attributes["total"]
    back = session.goto(at_third.position)
    assert back.attributes == at_third.attributes
    assert back.locals == at_third.locals
    one_back = session.step_back()
    assert one_back.position == at_third.position - 1


async def test_breakpoint_on_event_type_and_divergence(tmp_path) -> None:  # type: ignore[no-untyped-def]
    history = await _recorded_history(tmp_path)
    session = Replayer(workflows=[FiveSteps]).debug(history)
    snap = session.run_to(event_type="TimerStarted")
    assert snap.event.event_type == "TimerStarted"
    assert snap.pending_timers and snap.pending_timers[0]["timer_id"] == "1"
    assert any("StartTimer" in c.description for c in snap.commands)

    @workflow.defn(name="FiveSteps")
    class FourSteps(FiveSteps):
        @workflow.run
        async def run(self, n: int) -> int:
            return await super().run(n - 1)

    diverging = Replayer(workflows=[FourSteps]).debug(history).run()
    assert diverging.diverged is not None
    assert "StartTimer" in str(diverging.diverged) and "ScheduleActivityTask" in str(
        diverging.diverged
    )
