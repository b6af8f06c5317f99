"""The SQL text of every statement :class:`~engine._store.tx.StoreTx` runs.

Statements are plain SQL, written once with ``:name`` parameters; the PostgreSQL spelling
(``%(name)s``) is derived when the module loads. Statements whose columns vary (inserts
and updates of a set of columns) are built on first use and remembered.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .schema import (
    ACT_SCHEDULED,
    ACT_STARTED,
    EXEC_RUNNING,
    QUERY_ANSWERED,
    QUERY_PENDING,
    QUERY_TAKEN,
    UPDATE_ABANDONED,
    UPDATE_ACCEPTED,
    UPDATE_REQUESTED,
    WFT_SCHEDULED,
    WFT_STARTED,
)

_PARAM = re.compile(r"(?<![:\w]):(\w+)")


class Q:
    """One SQL statement in both dialects' parameter styles."""

    __slots__ = ("pg", "sqlite")

    def __init__(self, sql: str, *, pg_suffix: str = "") -> None:
        self.sqlite = sql
        self.pg = _PARAM.sub(r"%(\1)s", sql + pg_suffix)


_EXEC_COLS = (
    "run_id, namespace, workflow_id, workflow_type, task_queue, status, start_time, "
    "close_time, first_run_id, parent_workflow_id, parent_run_id, next_event_id, "
    "history_size_bytes, workflow_task_timeout, run_timeout, execution_timeout, new_run_id, "
    "request_id, parent_initiated_event_id, parent_started_event_id, parent_close_policy, "
    "has_updates, cron_schedule, memo, root_workflow_id, root_run_id, execution_time, "
    "cancel_requested, schedule_key"
)
_WFT_COLS = (
    "run_id, namespace, task_queue, state, attempt, scheduled_event_id, scheduled_time, "
    "visible_at, started_event_id, started_time, identity, request_id, start_to_close, "
    "timeout_at, buffered"
)
_ACT_COLS = (
    "run_id, scheduled_event_id, namespace, workflow_id, workflow_type, activity_id, "
    "activity_type, task_queue, input, state, attempt, visible_at, scheduled_time, "
    "attempt_scheduled_time, started_time, identity, request_id, schedule_to_close, "
    "schedule_to_start, start_to_close, heartbeat_timeout, retry_policy, heartbeat_details, "
    "last_heartbeat_time, last_failure, cancel_requested, timeout_at"
)
_TIMER_COLS = "id, run_id, kind, ref, attempt, fire_at, data"
_ATTEMPT_COLS = (
    "run_id, scheduled_event_id, attempt, activity_id, activity_type, identity, "
    "scheduled_time, started_time, ended_time, outcome, failure"
)
_LOCK = " FOR UPDATE"

GET_EXEC = Q(f"SELECT {_EXEC_COLS} FROM dn_executions WHERE run_id = :run_id")
LOCK_EXEC = Q(GET_EXEC.sqlite, pg_suffix=_LOCK)
_N_EXEC_COLS = len(_EXEC_COLS.split(", "))
_WFT_NAMES = tuple(_WFT_COLS.split(", "))
#: A run and its workflow task (if any) in one read (SQLite only: see its method).
LOCK_EXEC_WFT = Q(
    "SELECT "
    + ", ".join(f"e.{c}" for c in _EXEC_COLS.split(", "))
    + ", "
    + ", ".join(f"w.{c} AS wft_{c}" for c in _WFT_NAMES)
    + " FROM dn_executions e LEFT JOIN dn_workflow_tasks w ON w.run_id = e.run_id"
    " WHERE e.run_id = :run_id"
)
LATEST_RUN = Q(
    f"SELECT {_EXEC_COLS} FROM dn_executions WHERE namespace = :ns AND workflow_id = :wid "
    "ORDER BY start_time DESC LIMIT 1"
)
LATEST_RUN_LOCK = Q(LATEST_RUN.sqlite, pg_suffix=_LOCK)
OPEN_RUN = Q(
    f"SELECT {_EXEC_COLS} FROM dn_executions "
    f"WHERE namespace = :ns AND workflow_id = :wid AND status = {EXEC_RUNNING}"
)
OPEN_CHILDREN = Q(
    "SELECT run_id, workflow_id, parent_close_policy FROM dn_executions "
    f"WHERE parent_run_id = :run_id AND status = {EXEC_RUNNING}"
)
READ_EVENTS = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id AND event_id >= :first ORDER BY event_id"
)
READ_EVENT_RANGE = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id AND event_id >= :first AND event_id <= :last ORDER BY event_id"
)
EVENTS_OF_TYPE = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id AND event_type = :t ORDER BY event_id"
)
FIRST_EVENT = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id AND event_id = 1"
)
LAST_EVENT = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id ORDER BY event_id DESC LIMIT 1"
)
CLOSE_EVENT = Q(
    "SELECT event_id, event_time, event_type, attributes, extra FROM dn_history_events "
    "WHERE run_id = :run_id AND event_type IN ('WorkflowExecutionCompleted', "
    "'WorkflowExecutionFailed', 'WorkflowExecutionCanceled', 'WorkflowExecutionTerminated', "
    "'WorkflowExecutionTimedOut', 'WorkflowExecutionContinuedAsNew') "
    "ORDER BY event_id DESC LIMIT 1"
)
INSERT_EVENT = Q(
    "INSERT INTO dn_history_events "
    "(run_id, event_id, event_time, event_type, attributes, extra) "
    "VALUES (:run_id, :event_id, :event_time, :event_type, :attributes, :extra)"
)
BUFFER_EVENT = Q(
    "INSERT INTO dn_buffered_events (run_id, event_time, event_type, attributes) "
    "VALUES (:run_id, :event_time, :event_type, :attributes)"
)
READ_BUFFERED = Q(
    "SELECT id, event_time, event_type, attributes FROM dn_buffered_events "
    "WHERE run_id = :run_id ORDER BY id"
)
DELETE_BUFFERED = Q("DELETE FROM dn_buffered_events WHERE run_id = :run_id")
DELETE_BUFFERED_ONE = Q("DELETE FROM dn_buffered_events WHERE id = :id")
GET_WFT = Q(f"SELECT {_WFT_COLS} FROM dn_workflow_tasks WHERE run_id = :run_id")
DELETE_WFT = Q("DELETE FROM dn_workflow_tasks WHERE run_id = :run_id")
NEXT_WFT = Q(
    "SELECT t.run_id FROM dn_workflow_tasks t "
    f"WHERE t.namespace = :ns AND t.task_queue = :q AND t.state = {WFT_SCHEDULED} "
    "AND t.visible_at <= :now "
    "ORDER BY t.visible_at LIMIT :lim"
)
# PostgreSQL: lock the run row (the lock every change takes first), skipping busy runs.
NEXT_WFT_PG = Q(
    "SELECT e.run_id FROM dn_executions e JOIN dn_workflow_tasks t ON t.run_id = e.run_id "
    f"WHERE t.namespace = :ns AND t.task_queue = :q AND t.state = {WFT_SCHEDULED} "
    "AND t.visible_at <= :now "
    "ORDER BY t.visible_at LIMIT :lim FOR UPDATE OF e, t SKIP LOCKED"
)
#: What a closing run may leave behind: pending activities, timers, open children.
LEFTOVERS_OF_RUN = Q(
    "SELECT EXISTS (SELECT 1 FROM dn_activity_tasks WHERE run_id = :run_id) AS activities, "
    "EXISTS (SELECT 1 FROM dn_timers WHERE run_id = :run_id) AS timers, "
    "EXISTS (SELECT 1 FROM dn_executions WHERE parent_run_id = :run_id "
    f"AND status = {EXEC_RUNNING}) "
    "AS children"
)
GET_ACT = Q(
    f"SELECT {_ACT_COLS} FROM dn_activity_tasks "
    "WHERE run_id = :run_id AND scheduled_event_id = :sched"
)
GET_ACT_LOCK = Q(GET_ACT.sqlite, pg_suffix=_LOCK)
ACTS_OF_RUN = Q(
    f"SELECT {_ACT_COLS} FROM dn_activity_tasks WHERE run_id = :run_id ORDER BY scheduled_event_id"
)
DELETE_ACT = Q(
    "DELETE FROM dn_activity_tasks WHERE run_id = :run_id AND scheduled_event_id = :sched"
)
DELETE_ACTS_OF_RUN = Q("DELETE FROM dn_activity_tasks WHERE run_id = :run_id")
NEXT_ACTS = Q(
    f"SELECT {_ACT_COLS} FROM dn_activity_tasks "
    f"WHERE namespace = :ns AND task_queue = :q AND state = {ACT_SCHEDULED} "
    "AND visible_at <= :now ORDER BY visible_at LIMIT :lim",
    pg_suffix=" FOR UPDATE SKIP LOCKED",
)
INSERT_TIMER = Q(
    "INSERT INTO dn_timers (run_id, kind, ref, attempt, fire_at, data) "
    "VALUES (:run_id, :kind, :ref, :attempt, :fire_at, :data)"
)
GET_TIMER = Q(f"SELECT {_TIMER_COLS} FROM dn_timers WHERE id = :id")
DELETE_TIMER = Q("DELETE FROM dn_timers WHERE id = :id")
DELETE_TIMERS_OF_RUN = Q("DELETE FROM dn_timers WHERE run_id = :run_id")
#: Schedules' timers are not among them: each schedule is processed in its own transaction
#: (``engine._service.schedules``), so one schedule's trouble never holds up the others.
DUE_TIMERS = Q(
    "SELECT id, run_id FROM dn_timers WHERE fire_at <= :now AND kind <> 'schedule' "
    "ORDER BY fire_at, id LIMIT :lim"
)
#: The kinds of timer a firing pass started ahead may fire as of its due time, a little
#: before the clock reaches it (``engine._service.host``): they only let a run go on, and
#: refuse no change that comes meanwhile. A deadline (a timeout, a heartbeat) is judged by
#: the clock: a change that comes before it wins.
AHEAD_KINDS = ("user", "start_delay", "wft_retry", "act_retry")
_AHEAD_KINDS_SQL = ", ".join(f"'{k}'" for k in AHEAD_KINDS)
#: :data:`DUE_TIMERS` for a pass started ahead: the timers of :data:`AHEAD_KINDS` due by
#: ``now`` (the pass's due time), the others due by ``real`` (the clock).
DUE_TIMERS_AHEAD = Q(
    "SELECT id, run_id FROM dn_timers WHERE kind <> 'schedule' AND (fire_at <= :real "
    f"OR (fire_at <= :now AND kind IN ({_AHEAD_KINDS_SQL}))) ORDER BY fire_at, id LIMIT :lim"
)
FIRST_TIMERS = Q(
    "SELECT id, run_id, fire_at, kind FROM dn_timers WHERE kind <> 'schedule' "
    "ORDER BY fire_at, id LIMIT :lim"
)
NEXT_TIMER_AT = Q(
    "SELECT MIN(t) FROM (SELECT MIN(fire_at) AS t FROM dn_timers "
    f"UNION ALL SELECT MIN(timeout_at) AS t FROM dn_workflow_tasks WHERE state = {WFT_STARTED} "
    f"UNION ALL SELECT MIN(timeout_at) AS t FROM dn_activity_tasks WHERE state = {ACT_STARTED}) d"
)
TIMED_OUT_ACTS = Q(
    "SELECT run_id, scheduled_event_id, attempt FROM dn_activity_tasks "
    f"WHERE state = {ACT_STARTED} AND timeout_at <= :now ORDER BY timeout_at LIMIT :lim"
)
TIMED_OUT_WFTS = Q(
    "SELECT run_id, started_event_id FROM dn_workflow_tasks "
    f"WHERE state = {WFT_STARTED} AND timeout_at <= :now ORDER BY timeout_at LIMIT :lim"
)
TIMERS_OF_RUN = Q(f"SELECT {_TIMER_COLS} FROM dn_timers WHERE run_id = :run_id ORDER BY fire_at")
ATTEMPTS_OF_RUN = Q(
    f"SELECT {_ATTEMPT_COLS} FROM dn_activity_attempts WHERE run_id = :run_id "
    "ORDER BY scheduled_event_id, attempt"
)
END_ATTEMPT = Q(
    "UPDATE dn_activity_attempts SET ended_time = :ended_time, outcome = :outcome, "
    "failure = :failure WHERE run_id = :run_id AND scheduled_event_id = :sched "
    "AND attempt = :attempt AND ended_time IS NULL"
)
CLAIM_REQUEST = Q(
    "INSERT INTO dn_requests (run_id, request_id, created_at) VALUES (:run_id, :rid, :t) "
    "ON CONFLICT (run_id, request_id) DO NOTHING"
)
INSERT_QUERY = Q(
    "INSERT INTO dn_queries (namespace, task_queue, run_id, query_type, args, state, created_at) "
    f"VALUES (:namespace, :task_queue, :run_id, :query_type, :args, {QUERY_PENDING}, "
    ":created_at) RETURNING id"
)
PENDING_QUERIES = Q(
    "SELECT id, run_id, query_type, args FROM dn_queries "
    f"WHERE namespace = :ns AND task_queue = :q AND state = {QUERY_PENDING} "
    "ORDER BY id LIMIT :lim",
    pg_suffix=" FOR UPDATE SKIP LOCKED",
)
TAKE_QUERY = Q(f"UPDATE dn_queries SET state = {QUERY_TAKEN} WHERE id = :id")
ANSWER_QUERY = Q(
    f"UPDATE dn_queries SET state = {QUERY_ANSWERED}, answer = :answer, failure = :failure "
    "WHERE id = :id"
)
GET_QUERY = Q("SELECT id, state, answer, failure FROM dn_queries WHERE id = :id")
DELETE_QUERY = Q("DELETE FROM dn_queries WHERE id = :id")
INSERT_UPDATE = Q(
    "INSERT INTO dn_updates (run_id, update_id, name, args, identity, state, created_at) "
    f"VALUES (:run_id, :update_id, :name, :args, :identity, {UPDATE_REQUESTED}, :created_at) "
    "RETURNING id"
)
UPDATES_OF_RUN = Q(
    "SELECT id, update_id, name, args, identity FROM dn_updates "
    "WHERE run_id = :run_id AND state = :state ORDER BY id"
)
FIND_UPDATE = Q(
    "SELECT id FROM dn_updates WHERE run_id = :run_id AND update_id = :update_id "
    f"AND state IN ({UPDATE_REQUESTED}, {UPDATE_ACCEPTED}) ORDER BY id LIMIT 1"
)
FIND_UPDATE_BY_ID = Q(
    "SELECT id, state FROM dn_updates WHERE run_id = :run_id AND update_id = :update_id "
    "ORDER BY id LIMIT 1"
)
ABANDON_UPDATES = Q(
    f"UPDATE dn_updates SET state = {UPDATE_ABANDONED}, outcome = CASE WHEN state = "
    f"{UPDATE_ACCEPTED} THEN :accepted_outcome ELSE :outcome END "
    f"WHERE run_id = :run_id AND state IN ({UPDATE_REQUESTED}, {UPDATE_ACCEPTED}) RETURNING id"
)
SET_UPDATE = Q("UPDATE dn_updates SET state = :state, outcome = :outcome WHERE id = :id")
GET_UPDATE = Q("SELECT id, state, outcome FROM dn_updates WHERE id = :id")
WFT_BUSY = Q(
    f"SELECT 1 FROM dn_workflow_tasks WHERE state = {WFT_STARTED} "
    f"OR (state = {WFT_SCHEDULED} AND visible_at <= :now) LIMIT 1"
)
ACT_BUSY = Q(
    f"SELECT 1 FROM dn_activity_tasks WHERE state = {ACT_STARTED} "
    f"OR (state = {ACT_SCHEDULED} AND visible_at <= :now) LIMIT 1"
)


#: What each statement built by :func:`_insert` and :func:`_update` writes, by its
#: PostgreSQL text: ("insert" or "update", table, columns, the columns of its WHERE). At
#: most :data:`_SHAPES_KEPT` (a statement left out is sent one write at a time).
WRITE_SHAPES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {}
_SHAPES_KEPT = 4096


@lru_cache(maxsize=256)
def _insert(table: str, columns: tuple[str, ...]) -> Q:
    names = ", ".join(columns)
    values = ", ".join(f":{c}" for c in columns)
    q = Q(f"INSERT INTO {table} ({names}) VALUES ({values})")
    if len(WRITE_SHAPES) < _SHAPES_KEPT:
        WRITE_SHAPES[q.pg] = ("insert", table, columns, ())
    return q


@lru_cache(maxsize=256)
def _update(table: str, columns: tuple[str, ...], where: tuple[str, ...]) -> Q:
    sets = ", ".join(f"{c} = :{c}" for c in columns)
    cond = " AND ".join(f"{c} = :w_{c}" for c in where)
    q = Q(f"UPDATE {table} SET {sets} WHERE {cond}")
    if len(WRITE_SHAPES) < _SHAPES_KEPT:
        WRITE_SHAPES[q.pg] = ("update", table, columns, where)
    return q


@lru_cache(maxsize=64)
def _delete_timers(n_kinds: int, with_ref: bool) -> Q:
    kinds = ", ".join(f":k{i}" for i in range(n_kinds))
    ref = " AND ref = :ref" if with_ref else ""
    return Q(f"DELETE FROM dn_timers WHERE run_id = :run_id AND kind IN ({kinds}){ref}")
