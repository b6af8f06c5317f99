"""Activation jobs: one dataclass per kind, one ``_apply_<job>`` method each, and the
instance's snapshot (what the stepper reads instead of the instance's private fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, get_args

import pytest

from engine import activity, workflow
from engine._model.definitions import WorkflowDefinition
from engine._model.events import HistoryEvent
from engine._replay import instance as instance_module
from engine._replay import jobs as j
from engine._replay.driver import HistoryDriver
from engine._replay.instance import WorkflowInstance
from engine.converter import DataConverter


@activity.defn
async def echo(x: int) -> int:
    return x


@workflow.defn
class Waits:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @workflow.run
    async def run(self, n: int) -> int:
        handle = workflow.start_activity(echo, n, start_to_close_timeout=timedelta(seconds=5))
        label = f"waiting for {n}"
        await workflow.sleep(30)
        self.seen.append(label)
        result: int = await handle
        return result

    @workflow.signal
    def note(self, text: str) -> None:
        self.seen.append(text)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _instance() -> WorkflowInstance:
    return WorkflowInstance(  # type: ignore[abstract]
        WorkflowDefinition.of(Waits),
        namespace="default",
        workflow_id="w",
        run_id="00000000-0000-0000-0000-000000000001",
        task_queue="q",
        converter=DataConverter(),
    )


def _started(converter: DataConverter, n: int) -> list[HistoryEvent]:
    start = {
        "workflowType": {"name": "Waits"},
        "taskQueue": {"name": "q"},
        "input": {"payloads": converter.to_payloads_json([n])},
    }
    return [
        HistoryEvent(1, 1000.0, "WorkflowExecutionStarted", start),
        HistoryEvent(2, 1000.0, "WorkflowTaskScheduled", {}),
        HistoryEvent(3, 1000.5, "WorkflowTaskStarted", {}),
    ]


def test_every_job_kind_has_its_apply_method() -> None:
    kinds = get_args(j.Job)
    assert set(instance_module._APPLIERS) == set(kinds)
    for kind in kinds:
        method = getattr(WorkflowInstance, f"_apply_{_snake(kind.__name__)}")
        assert instance_module._APPLIERS[kind] is method


def test_an_unknown_job_fails_loudly() -> None:
    @dataclass(frozen=True)
    class Unheard:
        seq: int

    unknown: Any = Unheard(1)
    with pytest.raises(TypeError, match="no _apply_ method"):
        _instance().activate([unknown], now=0.0, replaying=False, history_length=1)


def test_snapshot_shows_pending_work_locals_and_attributes() -> None:
    inst = _instance()
    driver = HistoryDriver(inst)
    before = inst.snapshot()
    assert before.workflow_time is None and before.source is None
    assert before.pending_timers == () and before.attributes == {}

    commands = driver.apply(_started(inst.converter, 7))
    assert [type(c).__name__ for c in commands] == ["ScheduleActivityTask", "StartTimer"]
    assert driver.unmatched_commands() == commands

    snap = inst.snapshot()
    assert snap.workflow_time == 1000.5 and not snap.replaying and not snap.completed
    assert [(t.timer_id, t.fires_at) for t in snap.pending_timers] == [("1", 1030.5)]
    assert [(a.seq, a.activity_type, a.scheduled_event_id) for a in snap.pending_activities] == [
        (1, "echo", None)
    ]
    assert snap.pending_children == ()
    assert snap.source is not None and snap.source.function == "run"
    assert snap.locals["label"] == "'waiting for 7'" and snap.locals["n"] == "7"
    assert snap.attributes == {"seen": "[]"}


def test_jobs_apply_in_order_signal_then_timer() -> None:
    inst = _instance()
    inst.activate(
        [j.InitializeWorkflow(_started(inst.converter, 3)[0])],
        now=1000.0,
        replaying=False,
        history_length=3,
    )
    inst.activate(
        [j.SignalWorkflow("note", inst.converter.to_payloads_json(["hi"])), j.FireTimer(1)],
        now=1030.0,
        replaying=False,
        history_length=9,
    )
    snap = inst.snapshot()
    assert snap.attributes["seen"] == "['hi', 'waiting for 3']"
    assert snap.pending_timers == ()
    inst.activate(
        [j.ResolveActivity(1, HistoryEvent(10, 1031.0, "ActivityTaskCompleted", {}))],
        now=1031.0,
        replaying=False,
        history_length=11,
    )
    assert inst.snapshot().completed
