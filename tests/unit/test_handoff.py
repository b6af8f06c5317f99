"""The hand-off registry (``engine._service.handoff``) with stand-in runners: who is offered
what, and that a reservation or a set of activity slots is settled exactly once."""

from __future__ import annotations

from typing import Any

import pytest

from engine._service.handoff import ActivitySlots, Handoffs, Reservation


class FakeWorkflows:
    def __init__(self, queue: str, *, free: int = 1, cached: tuple[str, ...] = ()) -> None:
        self.namespace = "default"
        self.task_queue = queue
        self.free = free
        self.cached = {run_id: 5 for run_id in cached}
        self.settled: list[tuple[str, Any]] = []
        self.warmed: list[list[str]] = []

    def warm(self, run_ids: Any) -> None:
        self.warmed.append(sorted(run_ids))

    def reserve_workflow_task(self, run_id: str | None) -> Reservation | None:
        if self.free <= 0 or (run_id is not None and run_id not in self.cached):
            return None
        self.free -= 1
        kind = "start" if run_id is None else "next"
        return Reservation(self, kind, self.task_queue, "id-" + self.task_queue, self.cached)

    def settle_workflow_task(self, reservation: Reservation, task: Any) -> None:
        self.settled.append((reservation.kind, task))
        if task is None:
            self.free += 1


class FakeActivities:
    def __init__(self, queue: str, free: int) -> None:
        self.namespace = "default"
        self.task_queue = queue
        self.free = free
        self.started: list[Any] = []

    def reserve_activity_slots(self, wanted: int) -> int:
        n = min(wanted, self.free)
        self.free -= n
        return n

    def release_activity_slots(self, n: int) -> None:
        self.free += n

    def start_reserved_activity(self, task: Any) -> None:
        self.started.append(task)


def test_a_start_goes_to_the_first_runner_of_the_queue_with_a_free_slot() -> None:
    handoffs = Handoffs()
    full, free = FakeWorkflows("q", free=0), FakeWorkflows("q", free=1)
    handoffs.register_workflows(full)
    handoffs.register_workflows(free)
    handoffs.register_workflows(FakeWorkflows("other", free=5))
    offer = handoffs.offer_start("default", "q")
    assert offer is not None and offer.taker is free and offer.kind == "start"
    assert handoffs.offer_start("default", "q") is None  # both full now
    assert handoffs.offer_start("elsewhere", "q") is None  # another namespace
    offer.settle("task")
    assert free.settled == [("start", "task")] and free.free == 0  # the slot runs the task


def test_the_next_task_of_a_run_goes_to_the_runner_that_caches_it_on_any_queue() -> None:
    handoffs = Handoffs()
    holder = FakeWorkflows("workflows", cached=("run-1",))
    handoffs.register_workflows(FakeWorkflows("activities", cached=()))
    handoffs.register_workflows(holder)
    offer = handoffs.offer_next("default", "run-1")
    assert offer is not None and offer.taker is holder and offer.cached["run-1"] == 5
    assert handoffs.offer_next("default", "run-2") is None
    offer.release()
    assert holder.settled == [("next", None)] and holder.free == 1


def test_a_reservation_is_settled_exactly_once() -> None:
    handoffs = Handoffs()
    runner = FakeWorkflows("q")
    handoffs.register_workflows(runner)
    offer = handoffs.offer_start("default", "q")
    assert offer is not None
    offer.release()
    with pytest.raises(RuntimeError, match="settled twice"):
        offer.settle("task")
    assert runner.settled == [("start", None)] and runner.free == 1


def test_an_unregistered_runner_is_offered_nothing_and_the_registry_forgets_the_queue() -> None:
    handoffs = Handoffs()
    runner, acts = FakeWorkflows("q"), FakeActivities("q", 3)
    handoffs.register_workflows(runner)
    handoffs.register_activities(acts)
    assert handoffs.serves("default", "q")
    handoffs.unregister(runner)
    handoffs.unregister(acts)
    handoffs.unregister(runner)  # twice is harmless
    assert not handoffs.serves("default", "q")
    assert handoffs.offer_start("default", "q") is None
    assert handoffs.offer_activities("default", "q", 2).count == 0
    assert runner.free == 1 and acts.free == 3


def test_activity_slots_run_what_was_started_and_give_the_rest_back() -> None:
    handoffs = Handoffs()
    acts = FakeActivities("q", 3)
    handoffs.register_activities(acts)
    assert handoffs.offer_activities("default", "q", 0).count == 0
    slots = handoffs.offer_activities("default", "q", 5)
    assert slots.count == 3 and acts.free == 0
    slots.settle(["a1"])
    assert acts.started == ["a1"] and acts.free == 2
    with pytest.raises(RuntimeError, match="settled twice"):
        slots.release()
    too_many = handoffs.offer_activities("default", "q", 1)
    with pytest.raises(RuntimeError, match="2 eager activities started for 1 slots"):
        too_many.settle(["a2", "a3"])


def test_no_runner_means_no_slots_and_settling_them_does_nothing() -> None:
    slots = Handoffs().offer_activities("default", "q", 4)
    assert slots.count == 0 and slots.taker is None
    slots.settle([])
    assert isinstance(slots, ActivitySlots) and slots.settled


def test_warm_tells_every_workflow_runner_of_every_queue_which_runs_are_due() -> None:
    handoffs = Handoffs()
    runners = [FakeWorkflows("q"), FakeWorkflows("q"), FakeWorkflows("other")]
    for runner in runners:
        handoffs.register_workflows(runner)
    handoffs.register_activities(FakeActivities("q", 1))
    handoffs.unregister(runners[1])
    handoffs.warm(["r2", "r1"])
    assert [r.warmed for r in runners] == [[["r1", "r2"]], [], [["r1", "r2"]]]
