"""In-process hand-offs: work a transaction of this process makes, given straight to a worker
of this process instead of through its task queue.

Four hand-offs exist, each one an optimisation that never changes a history:

- an **eager start**: a client's start runs a new run's first workflow task for a worker
  polling the run's queue (Temporal's eager workflow start);
- the **next task of a cached run**: an activity outcome that schedules a workflow task for a
  run a worker holds in its sticky cache starts that task for the worker in the same
  transaction;
- **eager activities**: a workflow task's completion starts the activities it schedules on its
  own queue for a worker polling that queue (Temporal's eager activity dispatch);
- the **task a timer schedules**: the timer loop reserves a slot with the worker that holds
  the run of a timer coming due, and the transaction that fires the timer starts the
  workflow task it schedules for that worker.

All go through one protocol. A worker registers its runners here while they poll
(:meth:`Handoffs.register_workflows`, :meth:`~Handoffs.register_activities`). Whoever has
work to hand over asks for an **offer**: the registry asks each registered runner to
**reserve** a slot (a runner says no when it is full, stopping, or on another event loop),
and returns the :class:`Reservation` or :class:`ActivitySlots` it gave. The service's
transaction takes the reservation as an argument and, in its result, hands back the task it
started for it (or nothing). The caller then **settles** the reservation with that task,
exactly once, whatever happened to the transaction: the runner runs the task on the reserved
slot, or, given nothing, **releases** the slot. A runner that stops unregisters first and
waits for the reservations it gave to be settled, so no started task is stranded.

Thread rule: offers, reservations and settlements happen on the runner's event loop (a runner
refuses to reserve from any other loop). The service's transaction runs on the store's thread
and reads only the reservation's plain fields; :attr:`Reservation.cached` is the runner's
read-only view of the run ids it holds, read there one key at a time. A stale value costs the
worker a replay from event 1, never a wrong history: the worker checks the first event id of
every task it is given.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .types import ActivityTask, WorkflowTask


class WorkflowTaskTaker(Protocol):
    """A workflow runner, as the registry sees it."""

    namespace: str
    task_queue: str

    def reserve_workflow_task(self, run_id: str | None) -> Reservation | None:
        """A slot for a new run's first task (``run_id`` None), or for the next task of
        ``run_id`` if it is in this runner's cache; None when there is none to give."""
        ...

    def settle_workflow_task(self, reservation: Reservation, task: WorkflowTask | None) -> None:
        """Run ``task`` on the reserved slot, or give the slot back when it is None."""
        ...

    def warm(self, run_ids: Collection[str]) -> None:
        """A timer of one of ``run_ids`` comes due soon: wake the runner's threads if it
        holds one of them (from any thread; nothing else changes)."""
        ...


class ActivityTaker(Protocol):
    """An activity runner, as the registry sees it."""

    namespace: str
    task_queue: str

    def reserve_activity_slots(self, wanted: int) -> int:
        """Set aside up to ``wanted`` slots; return how many."""
        ...

    def release_activity_slots(self, n: int) -> None:
        """Give back ``n`` slots set aside and not used."""
        ...

    def start_reserved_activity(self, task: ActivityTask) -> None:
        """Run an attempt started for this runner, on one of the slots set aside."""
        ...


@dataclass(eq=False)
class Reservation:
    """A workflow-task slot a runner set aside for one hand-off, until it is settled."""

    taker: WorkflowTaskTaker
    #: "start" (a new run's first task) or "next" (the next task of a cached run).
    kind: str
    #: The runner's queue and identity: the service starts the task only on that queue.
    task_queue: str
    identity: str
    #: Run id -> the next event id the runner holds (read-only; see the module docstring).
    cached: Mapping[str, int]
    #: Whether the runner had no other workflow task in hand when it reserved the slot:
    #: it will run this one's workflow code at once (a held transaction may wait for it;
    #: see ``engine._store.held``).
    idle: bool = False
    settled: bool = field(default=False, init=False)

    def settle(self, task: WorkflowTask | None) -> None:
        """Hand the started task over (or, with None, give the slot back). Exactly once."""
        if self.settled:
            raise RuntimeError(f"a {self.kind} reservation was settled twice")
        self.settled = True
        self.taker.settle_workflow_task(self, task)

    def release(self) -> None:
        """Give the slot back: nothing was started for it."""
        self.settle(None)


@dataclass(eq=False)
class ActivitySlots:
    """Activity slots a runner set aside for the attempts one completion may start."""

    taker: ActivityTaker | None
    count: int
    settled: bool = field(default=False, init=False)

    def settle(self, tasks: list[ActivityTask]) -> None:
        """Run the attempts started for these slots; give the others back. Exactly once."""
        if self.settled:
            raise RuntimeError("activity slots were settled twice")
        self.settled = True
        if self.taker is None:
            return
        if len(tasks) > self.count:
            raise RuntimeError(f"{len(tasks)} eager activities started for {self.count} slots")
        self.taker.release_activity_slots(self.count - len(tasks))
        for task in tasks:
            self.taker.start_reserved_activity(task)

    def release(self) -> None:
        """Give every slot back: the completion started nothing."""
        self.settle([])


class Handoffs:
    """The registry of runners polling in this process, owned by the :class:`Service`."""

    def __init__(self) -> None:
        self._workflow: dict[tuple[str, str], list[WorkflowTaskTaker]] = {}
        self._activity: dict[tuple[str, str], list[ActivityTaker]] = {}

    # -- runners --------------------------------------------------------------------------

    def register_workflows(self, taker: WorkflowTaskTaker) -> None:
        """Offer a workflow runner hand-offs for its queue until :meth:`unregister`."""
        self._workflow.setdefault((taker.namespace, taker.task_queue), []).append(taker)

    def register_activities(self, taker: ActivityTaker) -> None:
        """Offer an activity runner eager attempts on its queue until :meth:`unregister`."""
        self._activity.setdefault((taker.namespace, taker.task_queue), []).append(taker)

    def unregister(self, taker: object) -> None:
        """Offer ``taker`` nothing more (reservations it gave stay valid until settled);
        nothing happens for a runner not registered."""
        registries: tuple[dict[tuple[str, str], list[Any]], ...] = (self._workflow, self._activity)
        for registry in registries:
            for key, takers in list(registry.items()):
                if taker in takers:
                    takers.remove(taker)
                    if not takers:
                        del registry[key]

    def warm(self, run_ids: Collection[str]) -> None:
        """Tell every workflow runner that timers of ``run_ids`` come due soon (the timer
        loop, a moment before): a runner holding one wakes its threads."""
        for takers in list(self._workflow.values()):
            for taker in list(takers):
                taker.warm(run_ids)

    def serves(self, namespace: str, task_queue: str) -> bool:
        """Whether a workflow runner of this process polls the queue."""
        return bool(self._workflow.get((namespace, task_queue)))

    # -- offers ---------------------------------------------------------------------------

    def offer_start(self, namespace: str, task_queue: str) -> Reservation | None:
        """A slot for a new run's first workflow task on the queue, or None."""
        for taker in list(self._workflow.get((namespace, task_queue), ())):
            reservation = taker.reserve_workflow_task(None)
            if reservation is not None:
                return reservation
        return None

    def offer_next(self, namespace: str | None, run_id: str) -> Reservation | None:
        """A slot for the next workflow task of ``run_id`` with a runner that holds the run
        in its cache (on any queue of the namespace; of any namespace for None), or None."""
        # Snapshots: a worker on another thread's loop may register meanwhile.
        for (ns, _queue), takers in list(self._workflow.items()):
            if namespace is not None and ns != namespace:
                continue
            for taker in list(takers):
                reservation = taker.reserve_workflow_task(run_id)
                if reservation is not None:
                    return reservation
        return None

    def offer_activities(self, namespace: str, task_queue: str, wanted: int) -> ActivitySlots:
        """Up to ``wanted`` activity slots with one runner polling the queue (possibly
        none: the completion then schedules its activities through the queue)."""
        if wanted > 0:
            for taker in list(self._activity.get((namespace, task_queue), ())):
                n = taker.reserve_activity_slots(wanted)
                if n > 0:
                    return ActivitySlots(taker, n)
        return ActivitySlots(None, 0)
