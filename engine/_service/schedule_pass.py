"""One pass over a schedule, and the JSON a schedule is stored as (see ``schedules.py``).

The definition JSON: ``spec`` (calendars as lists of ``[start, end, step]`` per field,
intervals and times in seconds), ``action`` (the start request's fields, payloads as JSON),
``policies`` and ``state``. The info JSON: ``last_processed``, ``buffer`` (starts waiting),
``running`` (the open runs it started), ``recent`` (the last ten started), the counters,
the last completion result and failure, and recent request ids.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .._ids import random_uuid
from .._json import compact_dumps
from .._json import loads as json_loads
from .._model import schedules as M
from .._model.schedule_spec import (
    CALENDAR_FIELDS,
    Calendar,
    CompiledSpec,
    Interval,
    Range,
    ScheduleSpecError,
    compile_spec,
)
from .._model.schedules import ScheduleOverlapPolicy as Overlap
from .._store.schedules import SCHEDULE_TIMER
from .._store.tx import Row, StoreTx
from ..common import WorkflowExecutionStatus
from ..exceptions import (
    InvalidArgumentError,
    RPCError,
    WorkflowAlreadyStartedError,
)
from .state import RunState, add_timer
from .types import StartWorkflowRequest

log = logging.getLogger("engine.service")

JsonDict = dict[str, Any]
S = WorkflowExecutionStatus
_dumps = compact_dumps()

#: The newest rows of a schedule's action log that are kept (older ones are deleted).
ACTION_LOG_KEPT = 2000
#: Action times one pass looks at, at most: a longer stretch (a schedule every second,
#: its host down for a day) is worked through in several passes, one right after another.
TIMES_PER_PASS = 1000
#: Starts a schedule's buffer holds at most (Temporal's scheduler caps it too): one more is
#: logged as not taken.
MAX_BUFFER = 1000
#: Request ids a schedule remembers, so a request run again after an ambiguous commit
#: changes nothing the second time.
_REQUESTS_KEPT = 20
#: How long a schedule whose pass failed (a bug, not a refusal) waits before the next.
FAILED_PASS_DELAY = 60.0

TERMINATE_REASON = "terminated by schedule overlap policy"
CANCEL_REASON = "cancelled by schedule overlap policy"


def scheduler_identity(namespace: str, schedule_id: str) -> str:
    """The identity the scheduler's requests carry (Temporal's scheduler's)."""
    return f"temporal-scheduler-{namespace}-{schedule_id}"


def action_workflow_id(base: str, nominal: float) -> str:
    """The workflow id of the run an action starts: the action's id and the action's
    nominal time, to the second, in RFC 3339 (Temporal's scheme)."""
    stamp = datetime.fromtimestamp(math.floor(nominal), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{base}-{stamp}"


# -- the definition's JSON ----------------------------------------------------------------

_CAL_FIELDS = CALENDAR_FIELDS


def _calendar(c: JsonDict) -> Calendar:
    ranges = {name: tuple(Range(*r) for r in c.get(name, ())) for name in _CAL_FIELDS}
    return Calendar(**ranges, comment=str(c.get("comment") or ""))


def compile_definition_spec(spec: JsonDict) -> CompiledSpec:
    """The definition's ``spec`` JSON, checked and compiled (:class:`ScheduleSpecError`)."""
    return compile_spec(
        calendars=[_calendar(c) for c in spec.get("calendars", ())],
        intervals=[
            Interval(float(i["every"]), float(i.get("offset") or 0.0))
            for i in spec.get("intervals", ())
        ],
        cron_expressions=list(spec.get("cron", ())),
        skip=[_calendar(c) for c in spec.get("skip", ())],
        start_at=spec.get("start_at"),
        end_at=spec.get("end_at"),
        jitter=float(spec.get("jitter") or 0.0),
        time_zone_name=spec.get("time_zone") or None,
    )


def catchup_window(policies: JsonDict) -> float:
    """The catch-up window in force: a year when unset, never under ten seconds."""
    value = policies.get("catchup_window")
    if value is None:
        return M.DEFAULT_CATCHUP_WINDOW
    return max(float(value), M.MIN_CATCHUP_WINDOW)


def _new_info(now: float) -> JsonDict:
    return {
        "last_processed": now,
        "buffer": [],
        "running": [],
        "recent": [],
        "num_actions": 0,
        "missed_catchup": 0,
        "skipped_overlap": 0,
        "last_completion_result": None,
        "continued_failure": None,
        "requests": [],
        "log_rows": 0,
    }


def _json_payload(value: Any, type_name: str) -> JsonDict:
    """A search attribute value as payload JSON, its type in the metadata."""

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {
        "metadata": {"encoding": b64("json/plain"), "type": b64(type_name)},
        "data": b64(json.dumps(value, separators=(",", ":"))),
    }


@dataclass
class ScheduleRecord:
    """A schedule as the client describes it: definition and info JSON as stored, plus
    what is worked out when asked (upcoming times; the statuses of its recent runs)."""

    namespace: str
    schedule_id: str
    definition: JsonDict
    info: JsonDict
    memo: JsonDict | None
    search_attributes: JsonDict | None
    created_at: float
    updated_at: float | None
    conflict_token: int
    next_action_times: list[float] = field(default_factory=list)
    #: run id -> WorkflowExecutionStatus of the recent and running actions' runs.
    run_status: dict[str, int] = field(default_factory=dict)
    invalid_spec: str | None = None


@dataclass(frozen=True)
class Backfill:
    """Action times in ``(start, end]`` taken as if they were now."""

    start: float
    end: float
    overlap: int = 0


class _Pass:
    """One pass over one locked schedule (see the module's docstring)."""

    def __init__(self, service: Any, tx: StoreTx, row: Row, now: float) -> None:
        self.service = service
        self.tx = tx
        self.row = row
        self.now = now
        self.namespace: str = row.namespace
        self.schedule_id: str = row.schedule_id
        self.key: str = row.schedule_key
        self.definition: JsonDict = json_loads(row.definition)
        self.info: JsonDict = json_loads(row.info)
        self.token = int(row.conflict_token)
        self.updated_at: float | None = row.updated_at
        self.search_attributes: str | None = row.search_attributes
        self.log: list[JsonDict] = []
        self.more = False  # the pass stopped at TIMES_PER_PASS: another follows at once
        self.compiled: CompiledSpec | None = None
        self.invalid: str | None = None
        self.compile()

    # -- the parts of the definition ------------------------------------------------------

    def compile(self) -> None:
        try:
            self.compiled = compile_definition_spec(self.definition["spec"])
            self.invalid = None
        except ScheduleSpecError as err:  # e.g. a zone this machine's tzdata lacks
            self.compiled, self.invalid = None, str(err)

    @property
    def state(self) -> JsonDict:
        return self.definition["state"]  # type: ignore[no-any-return]

    @property
    def policies(self) -> JsonDict:
        return self.definition["policies"]  # type: ignore[no-any-return]

    def resolve(self, overlap: int) -> Overlap:
        """A start's overlap policy: its own, else the schedule's, else SKIP (resolved as
        late as this, so that an update of the policy applies to buffered starts)."""
        return Overlap(overlap or int(self.policies.get("overlap") or 0) or Overlap.SKIP)

    def seen(self, request_id: str) -> bool:
        """Whether this request was applied already; remember it if not."""
        if not request_id:
            return False
        kept: list[str] = self.info.setdefault("requests", [])
        if request_id in kept:
            return True
        kept.append(request_id)
        del kept[:-_REQUESTS_KEPT]
        return False

    def changed(self) -> None:
        """The definition or state changed: a new conflict token."""
        self.token += 1

    # -- the pass ---------------------------------------------------------------------------

    def run(self) -> None:
        """Let go of closed runs, take the action times up to now, work the buffer."""
        self.reap()
        last = float(self.info["last_processed"])
        if self.now > last:
            self.info["last_processed"] = self.time_range(last, self.now, 0, manual=False)
        while self.process_buffer():
            pass

    def time_range(self, t1: float, t2: float, overlap: int, *, manual: bool) -> float:
        """Look at the action times in ``(t1, t2]`` (a backfill's: ``[t1, t2]``); returns
        how far it got: ``t2``, less when it stopped at :data:`TIMES_PER_PASS`, or just
        before the nominal time of an action whose jittered time is still to come (so the
        next pass takes it)."""
        if self.compiled is None:
            return t2
        if not manual and not self.may_act():
            return t2  # paused, or no actions left: none of these is taken, none missed
        if manual:  # a backfill takes the times at both ends (as the dev server does)
            t1 = math.nextafter(t1, -math.inf)
        window = catchup_window(self.policies)
        source = "backfill" if manual else "spec"
        looked = 0
        while True:
            found = self.compiled.next_action(t1, self.schedule_id)
            if found is None:
                return t2
            nominal, actual = found
            if actual > t2:
                # Nominally due, its jitter not yet over: stop before it, not past it.
                return t2 if manual else min(t2, math.nextafter(nominal, -math.inf))
            if looked == TIMES_PER_PASS:
                if manual:  # all of a backfill in one transaction, or none of it
                    raise InvalidArgumentError(
                        f"a backfill takes at most {TIMES_PER_PASS} action times at once; "
                        "this one has more: split its period into shorter ones"
                    )
                self.more = True
                return t1
            looked += 1
            t1 = actual
            if not self.can_take(manual, decrement=False):
                continue  # paused, or no actions left: not taken, and not missed either
            if not manual and self.now - actual > window:
                self.info["missed_catchup"] += 1
                self.record(
                    M.MISSED_CATCHUP,
                    nominal,
                    actual,
                    source,
                    overlap,
                    detail=f"{self.now - actual:.0f}s late, past the catch-up window of "
                    f"{window:.0f}s",
                )
                continue
            self.add_start(nominal, actual, overlap, manual=manual, source=source)

    def add_start(
        self, nominal: float, actual: float, overlap: int, *, manual: bool, source: str
    ) -> None:
        start = {
            "nominal": nominal,
            "actual": actual,
            "overlap": int(overlap),
            "manual": manual,
            "source": source,
        }
        if len(self.info["buffer"]) >= MAX_BUFFER:
            # As Temporal's scheduler caps its buffer; here the start is logged, not lost.
            self._log_start(M.NOT_TAKEN, start, f"the buffer holds {MAX_BUFFER} starts already")
            return
        self.info["buffer"].append(start)

    def may_act(self) -> bool:
        """Whether the spec's times can take actions now (not paused, actions left)."""
        state = self.state
        if state.get("paused"):
            return False
        return not state.get("limited_actions") or int(state.get("remaining_actions") or 0) > 0

    def can_take(self, manual: bool, *, decrement: bool) -> bool:
        """Whether an action may be taken now (manual ones always may); with
        ``decrement``, one of the limited actions is used up."""
        if manual:
            return True
        state = self.state
        if state.get("paused"):
            return False
        if not state.get("limited_actions"):
            return True
        if int(state.get("remaining_actions") or 0) > 0:
            if decrement:
                state["remaining_actions"] = int(state["remaining_actions"]) - 1
                self.changed()
            return True
        return False

    def process_buffer(self) -> bool:
        """Work the buffer once with the overlap policies; True if it should be worked
        again now. The rules are Temporal's scheduler's: an ALLOW_ALL start always starts;
        with nothing open, the first other start starts; with a run open, SKIP skips,
        BUFFER_ONE keeps the first and skips the rest, BUFFER_ALL keeps all, CANCEL_OTHER
        and TERMINATE_OTHER keep theirs and cancel or terminate every open run (with
        nothing open, a later one of them replaces the start chosen)."""
        buffer: list[JsonDict] = self.info["buffer"]
        if not buffer:
            return False
        running = bool(self.info["running"])
        overlapping: list[JsonDict] = []
        chosen: JsonDict | None = None
        kept: list[JsonDict] = []
        need_cancel = need_terminate = False
        for start in buffer:
            policy = self.resolve(start["overlap"])
            if policy == Overlap.ALLOW_ALL:
                overlapping.append(start)
                continue
            if not running and chosen is None:
                chosen = start
                continue
            if policy == Overlap.SKIP:
                self.skip(start, "a run of this schedule is still open (SKIP)")
            elif policy == Overlap.BUFFER_ONE:
                if not kept:
                    kept.append(start)
                else:
                    self.skip(start, "one start is buffered already (BUFFER_ONE)")
            elif policy == Overlap.BUFFER_ALL:
                kept.append(start)
            elif running:  # CANCEL_OTHER, TERMINATE_OTHER
                need_cancel |= policy == Overlap.CANCEL_OTHER
                need_terminate |= policy == Overlap.TERMINATE_OTHER
                kept.append(start)
            else:
                assert chosen is not None
                self.supersede(chosen, policy)
                chosen = start
        if need_cancel or need_terminate:
            for start in overlapping:  # as Temporal's: dropped when the others are ended
                self.supersede(
                    start, Overlap.TERMINATE_OTHER if need_terminate else Overlap.CANCEL_OTHER
                )
            overlapping = []
        self.info["buffer"] = kept
        for start in overlapping:
            if self.can_take(start["manual"], decrement=True):
                self.start(start)
            else:
                self.not_taken(start)
        if need_terminate:
            for run in list(self.info["running"]):
                self.end_other(run, terminate=True, cause=kept[-1])
            self.reap()  # terminated in this transaction: closed now
            return bool(self.info["buffer"])
        if need_cancel:
            for run in self.info["running"]:
                self.end_other(run, terminate=False, cause=kept[-1])
        if chosen is None:
            return False
        if not self.can_take(chosen["manual"], decrement=True):
            self.not_taken(chosen)
            return True
        self.start(chosen)
        return False

    # -- outcomes -------------------------------------------------------------------------

    def record(
        self,
        outcome: str,
        nominal: float,
        actual: float,
        source: str,
        overlap: int,
        *,
        workflow_id: str | None = None,
        run_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.log.append(
            {
                "ns": self.namespace,
                "id": self.schedule_id,
                "nominal": nominal,
                "scheduled": actual,
                "decided": self.now,
                "outcome": outcome,
                "source": source,
                "overlap": int(self.resolve(overlap)),
                "workflow_id": workflow_id,
                "run_id": run_id,
                "detail": detail,
            }
        )

    def _log_start(self, outcome: str, start: JsonDict, detail: str, **ids: str | None) -> None:
        self.record(
            outcome,
            start["nominal"],
            start["actual"],
            start["source"],
            start["overlap"],
            detail=detail,
            **ids,
        )

    def skip(self, start: JsonDict, why: str) -> None:
        self.info["skipped_overlap"] += 1
        self._log_start(M.SKIPPED_OVERLAP, start, why)

    def supersede(self, start: JsonDict, policy: Overlap) -> None:
        self._log_start(
            M.SUPERSEDED, start, f"replaced by a later action before it started ({policy.name})"
        )

    def not_taken(self, start: JsonDict) -> None:
        why = "the schedule is paused" if self.state.get("paused") else "no actions remain"
        self._log_start(M.NOT_TAKEN, start, why)

    def start(self, start: JsonDict) -> None:
        """Start the action's run in this transaction, or log why it could not start."""
        action = self.definition["action"]
        nominal, actual = float(start["nominal"]), float(start["actual"])
        workflow_id = action_workflow_id(action["workflow_id"], nominal)
        attributes = dict(action.get("search_attributes") or {})
        # The nominal time to the second, as the dev server sets it (a trigger's too).
        attributes["TemporalScheduledStartTime"] = _json_payload(
            datetime.fromtimestamp(math.floor(nominal), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "Datetime",
        )
        attributes["TemporalScheduledById"] = _json_payload(self.schedule_id, "Keyword")
        sequential = self.resolve(start["overlap"]) != Overlap.ALLOW_ALL
        info = self.info
        request = StartWorkflowRequest(
            namespace=self.namespace,
            workflow_id=workflow_id,
            workflow_type=action["workflow_type"],
            task_queue=action["task_queue"],
            input=list(action.get("input") or []),
            execution_timeout=action.get("execution_timeout"),
            run_timeout=action.get("run_timeout"),
            task_timeout=action.get("task_timeout") or 10.0,
            retry_policy=action.get("retry_policy"),
            memo=action.get("memo"),
            identity=scheduler_identity(self.namespace, self.schedule_id),
            request_id=random_uuid(),
            user_metadata=action.get("user_metadata"),
            search_attributes=attributes,
            schedule_key=self.key,
            last_completion_result=info.get("last_completion_result") if sequential else None,
            last_failure=info.get("continued_failure") if sequential else None,
        )
        try:
            result = self.service._start_workflow(self.tx, request)
        except (WorkflowAlreadyStartedError, InvalidArgumentError, RPCError) as err:
            self._log_start(M.START_FAILED, start, str(err), workflow_id=workflow_id)
            return
        info["num_actions"] += 1
        if sequential:
            # Only these are waited for: an ALLOW_ALL start is not (running_actions on the
            # dev server leaves them out, and they never hold back a later action).
            info["running"].append(
                {"workflow_id": workflow_id, "run_id": result.run_id, "first_run_id": result.run_id}
            )
        info["recent"].append(
            {
                "nominal": nominal,
                "scheduled": actual,
                "started": self.now,
                "workflow_id": workflow_id,
                "run_id": result.run_id,
            }
        )
        del info["recent"][: -M.RECENT_ACTION_COUNT]
        self._log_start(M.STARTED, start, "", workflow_id=workflow_id, run_id=result.run_id)

    def end_other(self, run: JsonDict, *, terminate: bool, cause: JsonDict) -> None:
        """Cancel or terminate an open run of this schedule (an overlap policy's doing)."""
        row = self.tx.lock_execution(run["run_id"])
        if row is None or row.status != S.RUNNING:
            return
        rs = RunState(self.tx, row, self.now)
        identity = scheduler_identity(self.namespace, self.schedule_id)
        if terminate:
            self.service._terminate(rs, TERMINATE_REASON, None, identity)
            outcome = M.TERMINATED_OTHER
        else:
            if not rs.request_cancel({"identity": identity, "cause": CANCEL_REASON}):
                return  # asked already
            outcome = M.CANCELLED_OTHER
        rs.flush()
        self._log_start(
            outcome,
            cause,
            f"{'terminated' if terminate else 'asked to cancel'} the open run for a later action",
            workflow_id=run["workflow_id"],
            run_id=run["run_id"],
        )

    def reap(self) -> None:
        """Let go of the open runs that have closed (a chain: when its last run closes)."""
        still: list[JsonDict] = []
        for run in self.info["running"]:
            # Locked (after the schedule's row: the order every pass takes): a run closing
            # meanwhile commits first, so its wake-up timer is seen, not deleted by save().
            row = self.tx.lock_execution(run["run_id"])
            while row is not None and row.status != S.RUNNING and row.new_run_id:
                following = self.tx.lock_execution(row.new_run_id)
                if following is None:
                    break
                row = following
            if row is None:
                continue  # deleted (retention): nothing to wait for
            if row.status == S.RUNNING:
                still.append({**run, "run_id": row.run_id})
                continue
            self.closed(row)
        self.info["running"] = still

    def closed(self, row: Row) -> None:
        status = S(row.status)
        event = self.tx.close_event(row.run_id)
        attrs = json_loads(event.attributes) if event is not None else {}
        if status == S.COMPLETED:
            self.info["last_completion_result"] = (attrs.get("result") or {}).get("payloads")
            self.info["continued_failure"] = None
        elif status == S.FAILED and attrs.get("failure"):
            self.info["continued_failure"] = attrs["failure"]
        if (
            status in (S.FAILED, S.TIMED_OUT)
            and self.policies.get("pause_on_failure")
            and not self.state.get("paused")
        ):
            self.state["paused"] = True
            # The dev server's notes, word for word.
            if status == S.FAILED:
                message = (attrs.get("failure") or {}).get("message", "")
                note = f"paused due to workflow failure: {row.workflow_id}: {message}"
            else:
                note = f"paused due to workflow timeout: {row.workflow_id}"
            self.state["note"] = note
            self.changed()

    # -- writing it -----------------------------------------------------------------------

    def save(self) -> None:
        """Write the row and the log, and set the next wake-up."""
        tx = self.tx
        for entry in self.log:
            tx.insert_schedule_action(**entry)
        if self.log:
            self.info["log_rows"] = int(self.info.get("log_rows") or 0) + len(self.log)
            if self.info["log_rows"] > ACTION_LOG_KEPT + 200:
                tx.trim_schedule_actions(self.namespace, self.schedule_id, ACTION_LOG_KEPT)
                self.info["log_rows"] = ACTION_LOG_KEPT
        self.log = []
        tx.update_schedule(
            ns=self.namespace,
            id=self.schedule_id,
            definition=_dumps(self.definition),
            info=_dumps(self.info),
            sa=self.search_attributes,
            updated=self.updated_at,
            token=self.token,
        )
        tx.delete_schedule_timers(self.key)
        wake = self.next_wake()
        if wake is not None:
            add_timer(tx, self.now, self.key, SCHEDULE_TIMER, 0, 1, wake, None)

    def next_wake(self) -> float | None:
        if self.more:
            return self.now
        if self.compiled is None or not self.may_act():
            # Nothing to take until an update or unpause, which run passes themselves
            # (and a time-skipping clock is not held at every action time meanwhile).
            return None
        found = self.compiled.next_action(float(self.info["last_processed"]), self.schedule_id)
        return None if found is None else found[1]


def _record(
    row: Row,
    tx: StoreTx | None = None,
    *,
    future: int = M.FUTURE_ACTION_COUNT,
    now: float | None = None,
) -> ScheduleRecord:
    definition = json_loads(row.definition)
    info = json_loads(row.info)
    rec = ScheduleRecord(
        namespace=row.namespace,
        schedule_id=row.schedule_id,
        definition=definition,
        info=info,
        memo=json_loads(row.memo) if row.memo else None,
        search_attributes=json_loads(row.search_attributes) if row.search_attributes else None,
        created_at=float(row.created_at),
        updated_at=None if row.updated_at is None else float(row.updated_at),
        conflict_token=int(row.conflict_token),
    )
    try:
        compiled = compile_definition_spec(definition["spec"])
    except ScheduleSpecError as err:
        rec.invalid_spec = str(err)
        return rec
    t = float(info["last_processed"])
    state = definition["state"]
    if state.get("paused") and now is not None:
        t = max(t, now)  # a paused schedule is not woken: its times count from now
    if state.get("limited_actions") and not int(state.get("remaining_actions") or 0):
        future = 0  # none will be taken (the dev server lists none)
    for _ in range(future):
        found = compiled.next_action(t, row.schedule_id)
        if found is None:
            break
        t = found[1]
        rec.next_action_times.append(t)
    if tx is not None:
        for run in [*info.get("recent", ()), *info.get("running", ())]:
            got = tx.get_execution(run["run_id"])
            if got is not None:
                rec.run_status[run["run_id"]] = int(got.status)
    return rec


def check_definition(definition: JsonDict) -> None:
    """Refuse a definition the scheduler could not run, naming the field."""
    compile_definition_spec(definition["spec"])
    action = definition["action"]
    for name in ("workflow_id", "workflow_type", "task_queue"):
        if not action.get(name):
            raise InvalidArgumentError(f"ScheduleActionStartWorkflow.{name} is required")
    state = definition["state"]
    remaining = int(state.get("remaining_actions") or 0)
    if remaining < 0:
        raise InvalidArgumentError("ScheduleState.remaining_actions cannot be negative")
    policies = definition["policies"]
    window = policies.get("catchup_window")
    if window is not None and not float(window) >= 0:
        raise InvalidArgumentError("SchedulePolicy.catchup_window cannot be negative")
    # Kept as the server keeps it: describe shows a year when none was given, and 10 s for
    # anything shorter (both as on the dev server).
    policies["catchup_window"] = catchup_window(policies)
    overlap = int(policies.get("overlap") or 0)
    if overlap and overlap not in {int(p) for p in Overlap}:
        raise InvalidArgumentError(f"SchedulePolicy.overlap: {overlap} is not an overlap policy")
