"""Schedules, hosted by the service: each action claimed in the transaction that starts it.

A schedule is a row (``dn_schedules``): its definition (spec, action, policies, state) and
where it stands (``info``: the last time processed, the buffered starts, the runs it has
open, its counters). It is woken by its timers (``dn_timers`` rows of kind ``"schedule"``
under the schedule's key): one at its next action time, and one each time a run it
started closes. A wake-up is one *pass*, in one transaction that first locks the row:

1. the runs it had open that have closed are let go (following continue-as-new and
   retries to the end of each chain); a failure pauses the schedule when
   ``pause_on_failure`` says so, and the last result or failure is kept for the next run;
2. every action time since the last pass is looked at: one further back than the
   catch-up window is *missed* (counted and logged), one while paused or out of actions is
   not taken, the others are *buffered*;
3. the buffer is worked through with the overlap policies, exactly as Temporal's
   scheduler does (see :meth:`_Pass.process_buffer`): runs are started, skipped,
   buffered, or the open ones cancelled or terminated, in this same transaction;
4. the next wake-up is set.

Two hosts on one database never take an action twice: the timer is taken under the
row's lock, so the second finds it gone. Manual actions (``trigger``, ``backfill``) and
changes (``update``, ``pause``) are passes too, run by the request itself.

Unlike Temporal's UI, nothing is silent: every action time that did not start a run is
logged with why (``dn_schedule_actions``), as are the runs an action cancelled or
terminated.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from .._ids import random_uuid
from .._json import compact_dumps
from .._json import loads as json_loads
from .._model import schedules as M
from .._store.gateway import Store
from .._store.schedules import ACTION_FIELDS, SCHEDULE_TIMER
from .._store.shared_time import now as tx_now
from .._store.tx import StoreTx
from ..exceptions import InvalidArgumentError, StoreUnavailableError
from .clock import Clock
from .operation import operation
from .schedule_pass import (
    FAILED_PASS_DELAY,
    Backfill,
    ScheduleRecord,
    _new_info,
    _Pass,
    _record,
    check_definition,
)
from .search_attributes import visibility_changes
from .state import add_timer

log = logging.getLogger("engine.service")

JsonDict = dict[str, Any]
_dumps = compact_dumps()

__all__ = ["Backfill", "ScheduleOps", "ScheduleRecord"]


class ScheduleOps:
    """The schedule operations of the service (mixed into ``Service``)."""

    store: Store
    clock: Clock

    def _check_attributes(
        self, tx: StoreTx, namespace: str, definition: JsonDict, own: JsonDict | None
    ) -> str | None:
        """Check the action's and the schedule's own search attributes against the
        namespace (nothing is written); the schedule's own as stored JSON."""
        fields = definition["action"].get("search_attributes")
        if fields:
            visibility_changes(tx, namespace, fields, None)
        if not own:
            return None
        _, held, _ = visibility_changes(tx, namespace, own, None)
        return _dumps(held) if held else None

    @operation
    def create_schedule(
        self,
        tx: StoreTx,
        namespace: str,
        schedule_id: str,
        definition: JsonDict,
        *,
        memo: JsonDict | None = None,
        search_attributes: JsonDict | None = None,
        trigger_immediately: bool = False,
        backfills: tuple[Backfill, ...] = (),
        request_id: str = "",
    ) -> None:
        """Create a schedule (:class:`ScheduleAlreadyRunningError` if the id is taken);
        a trigger and backfills given are its first pass."""
        self.require_namespace(tx, namespace)  # type: ignore[attr-defined]
        check_definition(definition)
        own = self._check_attributes(tx, namespace, definition, search_attributes)
        existing = tx.get_schedule(namespace, schedule_id, lock=True)
        if existing is not None:
            if request_id and request_id in json_loads(existing.info).get("requests", ()):
                return  # this very request again, after an ambiguous commit
            raise M.ScheduleAlreadyRunningError(schedule_id)
        now = tx_now(self.clock)
        info = _new_info(now)
        if request_id:
            info["requests"] = [request_id]
        key = "sched-" + random_uuid()
        if not tx.insert_schedule(
            ns=namespace,
            id=schedule_id,
            key=key,
            definition=_dumps(definition),
            info=_dumps(info),
            memo=_dumps(memo) if memo else None,
            sa=own,
            t=now,
        ):
            raise M.ScheduleAlreadyRunningError(schedule_id)
        row = tx.get_schedule(namespace, schedule_id, lock=True)
        p = _Pass(self, tx, row, now)
        if trigger_immediately:
            p.add_start(now, now, 0, manual=True, source="trigger")
        for b in backfills:
            p.time_range(b.start, b.end, b.overlap, manual=True)
        p.run()
        p.save()

    def _lock(self, tx: StoreTx, namespace: str, schedule_id: str) -> _Pass:
        row = tx.get_schedule(namespace, schedule_id, lock=True)
        if row is None:
            raise M.ScheduleNotFoundError(schedule_id, namespace)
        return _Pass(self, tx, row, tx_now(self.clock))

    @operation
    def patch_schedule(
        self,
        tx: StoreTx,
        namespace: str,
        schedule_id: str,
        *,
        trigger: int | None = None,
        backfills: tuple[Backfill, ...] = (),
        pause: str | None = None,
        unpause: str | None = None,
        request_id: str = "",
    ) -> None:
        """Trigger an action now (``trigger``: its overlap policy, 0 for the schedule's),
        backfill, pause or unpause: Temporal's ``PatchSchedule``."""
        p = self._lock(tx, namespace, schedule_id)
        if p.seen(request_id):
            return
        if trigger is not None:
            p.add_start(p.now, p.now, trigger, manual=True, source="trigger")
        for b in backfills:
            p.time_range(b.start, b.end, b.overlap, manual=True)
        if pause is not None:
            p.state.update(paused=True, note=pause)
            p.changed()
        if unpause is not None:
            p.run()  # the time up to now was paused: its actions are not taken
            p.state.update(paused=False, note=unpause)
            p.changed()
        p.run()
        p.save()

    @operation
    def update_schedule(
        self,
        tx: StoreTx,
        namespace: str,
        schedule_id: str,
        definition: JsonDict,
        *,
        search_attributes: JsonDict | None = None,
        conflict_token: int | None = None,
        request_id: str = "",
    ) -> None:
        """Replace the schedule's definition (``search_attributes`` given: its own search
        attributes too). Its counters and the runs it started stay."""
        p = self._lock(tx, namespace, schedule_id)
        if p.seen(request_id):
            return
        if conflict_token is not None and conflict_token != p.token:
            raise InvalidArgumentError(
                f"schedule {schedule_id!r} changed since it was described (conflict token "
                f"{conflict_token}, now {p.token}): describe it again and retry"
            )
        check_definition(definition)
        own = self._check_attributes(tx, namespace, definition, search_attributes)
        p.run()  # the time up to now, under the definition it had
        # A copy: the pass changes what it holds, and this function may run twice.
        p.definition = copy.deepcopy(definition)
        if search_attributes is not None:
            p.search_attributes = own
        p.compile()
        p.updated_at = p.now
        p.changed()
        p.run()
        p.save()

    @operation
    def delete_schedule(self, tx: StoreTx, namespace: str, schedule_id: str) -> None:
        """Delete the schedule, its timers and its log; the runs it started go on."""
        row = tx.get_schedule(namespace, schedule_id, lock=True)
        if row is None:
            raise M.ScheduleNotFoundError(schedule_id, namespace)
        tx.delete_schedule(namespace, schedule_id, row.schedule_key)

    @operation(read=True)
    def describe_schedule(self, tx: StoreTx, namespace: str, schedule_id: str) -> ScheduleRecord:
        """The schedule as it stands, with its next action times."""
        row = tx.get_schedule(namespace, schedule_id)
        if row is None:
            raise M.ScheduleNotFoundError(schedule_id, namespace)
        return _record(row, tx, now=tx_now(self.clock))

    @operation(read=True)
    def list_schedules_page(
        self, tx: StoreTx, namespace: str, after: str = "", limit: int = 1000
    ) -> tuple[list[ScheduleRecord], list[str]]:
        """A page of the namespace's schedules with ids after ``after``, by id, and the names of the custom
        search attributes registered in the namespace (what a filter may name)."""
        self.require_namespace(tx, namespace)  # type: ignore[attr-defined]
        records = [
            _record(row, future=M.LISTED_FUTURE_ACTION_COUNT, now=tx_now(self.clock))
            for row in tx.list_schedules(namespace, after, limit)
        ]
        return records, [r.name for r in tx.search_attributes(namespace)]

    @operation(read=True)
    def schedule_actions(
        self,
        tx: StoreTx,
        namespace: str,
        schedule_id: str,
        after: int = 0,
        limit: int = 1000,
        newest: bool = False,
    ) -> list[JsonDict]:
        """The schedule's action log (rows with ids after ``after``; with ``newest``, its
        ``limit`` newest rows), oldest first."""
        if tx.get_schedule(namespace, schedule_id) is None:
            raise M.ScheduleNotFoundError(schedule_id, namespace)
        rows = tx.schedule_actions(namespace, schedule_id, after, limit, newest)
        return [dict(zip(ACTION_FIELDS, tuple(r), strict=True)) for r in rows]

    # -- hosting ------------------------------------------------------------------------

    @operation(read=True)
    def due_schedule_timers(self, tx: StoreTx, limit: int = 100) -> list[tuple[int, str]]:
        """(timer id, schedule key) of the schedule timers due now."""
        return tx.due_schedule_timers(tx_now(self.clock), limit)

    @operation
    def fire_schedule(self, tx: StoreTx, timer_id: int, key: str) -> bool:
        """One pass of the schedule whose timer this is; False if another host took the
        timer first (or the schedule is gone)."""
        row = tx.lock_schedule_by_key(key, timer=timer_id)
        if tx.take_timer(timer_id) is None or row is None:
            return False
        p = _Pass(self, tx, row, tx_now(self.clock))
        p.run()
        p.save()
        return True

    @operation
    def postpone_schedule(self, tx: StoreTx, key: str, until: float) -> None:
        """Move a schedule's wake-ups to ``until`` (after a pass failed)."""
        if tx.lock_schedule_by_key(key) is None:
            tx.delete_schedule_timers(key)
            return
        tx.delete_schedule_timers(key)
        add_timer(tx, tx_now(self.clock), key, SCHEDULE_TIMER, 0, 1, until, None)

    async def fire_due_schedules(self, limit: int = 100) -> int:
        """A pass of every schedule due now, each in its own transaction; returns how many
        ran. A pass that fails (a bug: refusals are logged on the schedule) is logged and
        its schedule waits :data:`FAILED_PASS_DELAY` before the next try."""
        done = 0
        for timer_id, key in await self.due_schedule_timers(limit):
            try:
                done += bool(await self.fire_schedule(timer_id, key))
            except StoreUnavailableError:
                raise
            except Exception:
                log.exception("schedule %s: its pass failed; next try in a minute", key)
                await self.postpone_schedule(key, self.clock.now() + FAILED_PASS_DELAY)
        return done
