"""Update operations of the service (a mixin of :class:`Service`): requests, their stages,
update-with-start.

An update is a row of ``dn_updates`` from the moment it is asked for: requested (delivered
with the run's next workflow task), accepted (its validator passed; the history has its
``WorkflowExecutionUpdateAccepted``), completed or rejected (the outcome is on the row), or
abandoned (the run closed first). Requests are idempotent by update id within a run, as on
Temporal: asking again with the same id gets the first request's update.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._json import loads as json_loads
from .._store.gateway import Store
from .._store.schema import (
    UPDATE_ABANDONED,
    UPDATE_ACCEPTED,
    UPDATE_COMPLETED,
    UPDATE_REJECTED,
)
from .._store.tx import Row, StoreTx
from ..exceptions import RPCError, RPCStatusCode
from .clock import Clock
from .namespaces import not_found
from .operation import operation
from .state import RunState, update_channel
from .types import StartWorkflowRequest, StartWorkflowResult

log = logging.getLogger("engine.service")
JsonDict = dict[str, Any]

#: Row states that end waiting for each stage: accepted (or past it), or finished.
_DONE_ACCEPTED = frozenset({UPDATE_ACCEPTED, UPDATE_COMPLETED, UPDATE_REJECTED, UPDATE_ABANDONED})
_DONE_COMPLETED = frozenset({UPDATE_COMPLETED, UPDATE_REJECTED, UPDATE_ABANDONED})

#: After this long without the update reaching its stage, the log says what may be wrong.
SLOW_UPDATE_SECONDS = 10.0


@dataclass(frozen=True)
class UpdateRef:
    """One update of one run: its row in ``dn_updates``."""

    row_id: int
    run_id: str
    workflow_id: str
    update_id: str


@dataclass(frozen=True)
class UpdateState:
    """Where an update stands: ``stage`` 1 requested, 2 accepted, 3 done; ``outcome`` is
    ``{"success": {"payloads": [...]}}`` or ``{"failure": {...}}`` once it is done;
    ``abandoned`` names the closed run's status when the run closed before it finished
    (``accepted``: it had been accepted then)."""

    stage: int
    outcome: JsonDict | None = None
    abandoned: str | None = None
    accepted: bool = False


def _update_state(row: Row) -> UpdateState:
    state = int(row.state)
    if state == UPDATE_ABANDONED:
        why = json_loads(row.outcome or "{}")
        return UpdateState(3, None, str(why.get("abandoned", "")), bool(why.get("accepted")))
    if state in (UPDATE_COMPLETED, UPDATE_REJECTED):
        return UpdateState(3, dict(json_loads(row.outcome or "{}")))
    return UpdateState(2 if state == UPDATE_ACCEPTED else 1)


def add_update(
    rs: RunState, name: str, args: list[JsonDict], update_id: str, identity: str
) -> UpdateRef:
    """Record an update request for the open run ``rs`` (or find the one with this id)."""
    tx = rs.tx
    found = tx.find_update_by_id(rs.run_id, update_id)
    if found is not None:
        return UpdateRef(int(found.id), rs.run_id, rs.workflow_id, update_id)
    row_id = tx.insert_update(
        run_id=rs.run_id,
        update_id=update_id,
        name=name,
        args=json.dumps(args),
        identity=identity,
        created_at=rs.now,
    )
    if not rs.has_updates:
        rs.set(has_updates=1)
        rs.has_updates = True
    rs.schedule_workflow_task()  # no-op when one is pending: it takes the update
    rs.flush()
    return UpdateRef(row_id, rs.run_id, rs.workflow_id, update_id)


class UpdateOps:
    """Update operations of the service (mixed into :class:`Service`)."""

    store: Store
    clock: Clock
    _open_run: Callable[..., RunState]
    _start_workflow: Callable[..., StartWorkflowResult]

    @operation
    def request_update(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        name: str,
        args: list[JsonDict],
        update_id: str,
        identity: str,
    ) -> UpdateRef:
        """Record an update request for the open run's next workflow task. A closed run
        raises :class:`WorkflowNotFoundError` (Temporal's ``NOT_FOUND``)."""
        rs = self._open_run(tx, namespace, workflow_id, run_id)
        return add_update(rs, name, args, update_id, identity)

    @operation(conflict_retries=2)
    def update_with_start(
        self,
        tx: StoreTx,
        req: StartWorkflowRequest,
        name: str,
        args: list[JsonDict],
        update_id: str,
    ) -> tuple[StartWorkflowResult, UpdateRef]:
        """Start the run (or, with ``USE_EXISTING``, take the open one) and ask it the
        update, in one transaction: the update is in the new run's first workflow task."""
        started = self._start_workflow(tx, req)
        rs = self._open_run(tx, req.namespace, req.workflow_id, started.run_id)
        return started, add_update(rs, name, args, update_id, req.identity)

    @operation(read=True)
    def find_update(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None, update_id: str
    ) -> UpdateRef:
        """The update ``update_id`` of the run (the latest run of the workflow id when
        ``run_id`` is None); :class:`RPCError` ``NOT_FOUND`` when there is none."""
        row = tx.get_execution(run_id) if run_id else tx.find_latest_run(namespace, workflow_id)
        if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
            raise not_found(tx, namespace, workflow_id, run_id)
        found = tx.find_update_by_id(row.run_id, update_id)
        if found is None:
            raise RPCError(
                f"update {update_id!r} not found: run {row.run_id} of workflow "
                f"{workflow_id!r} was never sent an update with this id",
                RPCStatusCode.NOT_FOUND,
            )
        return UpdateRef(int(found.id), str(row.run_id), workflow_id, update_id)

    @operation(read=True)
    def update_state(self, tx: StoreTx, row_id: int) -> UpdateState:
        """Where the update stands now."""
        row = tx.get_update(row_id)
        if row is None:
            raise RPCError(f"update row {row_id} is gone", RPCStatusCode.NOT_FOUND)
        return _update_state(row)

    async def wait_update(
        self, ref: UpdateRef, stage: int, timeout: float | None
    ) -> UpdateState | None:
        """Wait until the update reaches ``stage`` (2: accepted, 3: done) or is done;
        None if ``timeout`` seconds pass first (None: no limit)."""
        channel = update_channel(ref.row_id)
        notifier = self.store.notifier
        loop = asyncio.get_running_loop()
        begun = loop.time()
        deadline = None if timeout is None else begun + timeout
        warned = False
        with self.clock.waiting_for_result():
            while True:
                generation = notifier.generation(channel)
                state = await self.update_state(ref.row_id)
                if state.stage >= stage:
                    return state
                now = loop.time()
                if deadline is not None and now >= deadline:
                    return None
                if not warned and state.stage == 1 and now - begun >= SLOW_UPDATE_SECONDS:
                    warned = True
                    log.warning(
                        "update %r of workflow %s has waited %.0f s for a workflow task: is "
                        "a worker polling the run's task queue?",
                        ref.update_id,
                        ref.workflow_id,
                        now - begun,
                    )
                wait = 0.5 if deadline is None else min(deadline - now, 0.5)
                await notifier.wait(channel, wait, since=generation)
