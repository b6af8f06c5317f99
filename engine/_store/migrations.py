"""Numbered, hand-written schema migrations and the version table that records them.

Each migration is a list of DDL statements, written out in full (never generated from the
live metadata) so that a release's schema is fixed once shipped. ``{double}`` and
``{serial}`` stand for the dialect's spelling of a double column and an auto-numbered key.
A test runs the migrations on an empty database and compares the result with ``schema.py``.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy as sa

from ..common import duration_from_json, removes_memo_field
from ..exceptions import SchemaVersionError
from .dialects import READ_ONLY_OPTION
from .schema import DEFAULT_RETENTION_SECONDS, OPEN_CLOSE_ORDER, SCHEMA_VERSION

T = TypeVar("T")


@dataclass(frozen=True)
class Migration:
    """One numbered step from version ``version - 1`` to ``version``."""

    version: int
    description: str
    statements: tuple[str, ...]
    #: Fills new columns from what the database holds, in the same transaction.
    backfill: Callable[[sa.Connection], None] | None = None


_V1 = (
    """CREATE TABLE dn_schema_versions (
        version INTEGER NOT NULL,
        description TEXT NOT NULL,
        applied_at {double} NOT NULL,
        PRIMARY KEY (version)
)""",
    """CREATE TABLE dn_namespaces (
        name VARCHAR(255) NOT NULL,
        retention_seconds {double} NOT NULL,
        created_at {double} NOT NULL,
        PRIMARY KEY (name)
)""",
    """CREATE TABLE dn_executions (
        run_id VARCHAR(64) NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        workflow_id TEXT NOT NULL,
        workflow_type TEXT NOT NULL,
        task_queue TEXT NOT NULL,
        status SMALLINT NOT NULL,
        start_time {double} NOT NULL,
        close_time {double},
        first_run_id VARCHAR(64) NOT NULL,
        parent_workflow_id TEXT,
        parent_run_id VARCHAR(64),
        next_event_id INTEGER NOT NULL,
        history_size_bytes BIGINT NOT NULL,
        workflow_task_timeout {double} NOT NULL,
        run_timeout {double},
        execution_timeout {double},
        new_run_id VARCHAR(64),
        request_id VARCHAR(64),
        PRIMARY KEY (run_id)
)""",
    "CREATE UNIQUE INDEX dn_executions_open_workflow_id ON dn_executions (namespace, workflow_id) WHERE status = 1",
    "CREATE INDEX dn_executions_by_workflow_id ON dn_executions (namespace, workflow_id, start_time)",
    """CREATE TABLE dn_history_events (
        run_id VARCHAR(64) NOT NULL,
        event_id INTEGER NOT NULL,
        event_time {double} NOT NULL,
        event_type VARCHAR(64) NOT NULL,
        attributes TEXT NOT NULL,
        PRIMARY KEY (run_id, event_id)
)""",
    """CREATE TABLE dn_buffered_events (
        id {serial} NOT NULL,
        run_id VARCHAR(64) NOT NULL,
        event_time {double} NOT NULL,
        event_type VARCHAR(64) NOT NULL,
        attributes TEXT NOT NULL,
        PRIMARY KEY (id)
)""",
    "CREATE INDEX dn_buffered_events_run ON dn_buffered_events (run_id, id)",
    """CREATE TABLE dn_workflow_tasks (
        run_id VARCHAR(64) NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        task_queue TEXT NOT NULL,
        state SMALLINT NOT NULL,
        attempt INTEGER NOT NULL,
        scheduled_event_id INTEGER,
        scheduled_time {double} NOT NULL,
        visible_at {double} NOT NULL,
        started_event_id INTEGER,
        started_time {double},
        identity TEXT,
        request_id VARCHAR(64),
        start_to_close {double} NOT NULL,
        PRIMARY KEY (run_id)
)""",
    "CREATE INDEX dn_workflow_tasks_poll ON dn_workflow_tasks (namespace, task_queue, state, visible_at)",
    """CREATE TABLE dn_activity_tasks (
        run_id VARCHAR(64) NOT NULL,
        scheduled_event_id INTEGER NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        workflow_id TEXT NOT NULL,
        workflow_type TEXT NOT NULL,
        activity_id TEXT NOT NULL,
        activity_type TEXT NOT NULL,
        task_queue TEXT NOT NULL,
        input TEXT NOT NULL,
        state SMALLINT NOT NULL,
        attempt INTEGER NOT NULL,
        visible_at {double} NOT NULL,
        scheduled_time {double} NOT NULL,
        attempt_scheduled_time {double} NOT NULL,
        started_time {double},
        identity TEXT,
        request_id VARCHAR(64),
        schedule_to_close {double},
        schedule_to_start {double},
        start_to_close {double},
        heartbeat_timeout {double},
        retry_policy TEXT NOT NULL,
        heartbeat_details TEXT,
        last_heartbeat_time {double},
        last_failure TEXT,
        cancel_requested BOOLEAN NOT NULL,
        PRIMARY KEY (run_id, scheduled_event_id)
)""",
    "CREATE INDEX dn_activity_tasks_poll ON dn_activity_tasks (namespace, task_queue, state, visible_at)",
    """CREATE TABLE dn_timers (
        id {serial} NOT NULL,
        run_id VARCHAR(64) NOT NULL,
        kind VARCHAR(32) NOT NULL,
        ref INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        fire_at {double} NOT NULL,
        data TEXT,
        PRIMARY KEY (id)
)""",
    "CREATE INDEX dn_timers_due ON dn_timers (fire_at)",
    "CREATE INDEX dn_timers_run ON dn_timers (run_id, kind, ref)",
    """CREATE TABLE dn_activity_attempts (
        run_id VARCHAR(64) NOT NULL,
        scheduled_event_id INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        activity_id TEXT NOT NULL,
        activity_type TEXT NOT NULL,
        identity TEXT,
        scheduled_time {double} NOT NULL,
        started_time {double} NOT NULL,
        ended_time {double},
        outcome VARCHAR(16) NOT NULL,
        failure TEXT,
        PRIMARY KEY (run_id, scheduled_event_id, attempt)
)""",
)

_V2 = (
    "ALTER TABLE dn_executions ADD COLUMN parent_initiated_event_id INTEGER",
    "ALTER TABLE dn_executions ADD COLUMN parent_started_event_id INTEGER",
    "ALTER TABLE dn_executions ADD COLUMN parent_close_policy SMALLINT",
    "CREATE INDEX dn_executions_parent ON dn_executions (parent_run_id)",
)

_V3 = (
    """CREATE TABLE dn_queries (
        id {serial} NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        task_queue TEXT NOT NULL,
        run_id VARCHAR(64) NOT NULL,
        query_type TEXT NOT NULL,
        args TEXT NOT NULL,
        state SMALLINT NOT NULL,
        created_at {double} NOT NULL,
        answer TEXT,
        failure TEXT,
        PRIMARY KEY (id)
)""",
    "CREATE INDEX dn_queries_poll ON dn_queries (namespace, task_queue, state)",
)

_V4 = (
    "ALTER TABLE dn_workflow_tasks ADD COLUMN timeout_at {double}",
    "ALTER TABLE dn_workflow_tasks ADD COLUMN buffered SMALLINT",
    "CREATE INDEX dn_workflow_tasks_timeout ON dn_workflow_tasks (timeout_at)",
)

_V5 = (
    """CREATE TABLE dn_updates (
        id {serial} NOT NULL,
        run_id VARCHAR(64) NOT NULL,
        update_id TEXT NOT NULL,
        name TEXT NOT NULL,
        args TEXT NOT NULL,
        identity TEXT NOT NULL,
        state SMALLINT NOT NULL,
        created_at {double} NOT NULL,
        outcome TEXT,
        PRIMARY KEY (id)
)""",
    "CREATE INDEX dn_updates_run ON dn_updates (run_id, state)",
)

_V6 = ("CREATE INDEX dn_executions_by_start ON dn_executions (namespace, start_time, run_id)",)

_V7 = ("ALTER TABLE dn_executions ADD COLUMN has_updates SMALLINT",)

_V8 = (
    "ALTER TABLE dn_activity_tasks ADD COLUMN timeout_at {double}",
    "CREATE INDEX dn_activity_tasks_timeout ON dn_activity_tasks (timeout_at)",
)

_V9 = ("ALTER TABLE dn_executions ADD COLUMN cron_schedule TEXT",)

_V10 = (
    "ALTER TABLE dn_history_events ADD COLUMN extra TEXT",
    "ALTER TABLE dn_executions ADD COLUMN memo TEXT",
    "ALTER TABLE dn_executions ADD COLUMN root_workflow_id TEXT",
    "ALTER TABLE dn_executions ADD COLUMN root_run_id VARCHAR(64)",
    "ALTER TABLE dn_executions ADD COLUMN execution_time {double}",
)


_V11 = (
    "ALTER TABLE dn_executions ADD COLUMN cancel_requested SMALLINT",
    # A running run asked to cancel before this column existed keeps saying so.
    "UPDATE dn_executions SET cancel_requested = 1 WHERE status = 1 AND ("
    "run_id IN (SELECT run_id FROM dn_history_events "
    "WHERE event_type = 'WorkflowExecutionCancelRequested') OR "
    "run_id IN (SELECT run_id FROM dn_buffered_events "
    "WHERE event_type = 'WorkflowExecutionCancelRequested'))",
    """CREATE TABLE dn_requests (
        run_id VARCHAR(64) NOT NULL,
        request_id TEXT NOT NULL,
        created_at {double} NOT NULL,
        PRIMARY KEY (run_id, request_id)
)""",
)


#: Migration 12's columns for custom search attributes, Temporal's SQL visibility's
#: (Keyword01-10, Text01-03, ...): (column prefix, how many, SQL type). Fixed here as
#: shipped; never derived from the live schema.
_V12_CUSTOM = (
    ("keyword", 10, "TEXT"),
    ("text", 3, "TEXT"),
    ("int", 3, "BIGINT"),
    ("double", 3, "{double}"),
    ("bool", 3, "SMALLINT"),
    ("datetime", 3, "{double}"),
    ("keyword_list", 3, "TEXT"),
)
_V12_NAMES = [(f"{p}{i:02d}", t) for p, n, t in _V12_CUSTOM for i in range(1, n + 1)]
#: Indexed one by one (Text and KeywordList are matched by word or element instead);
#: partial, so a run without the attribute costs its index nothing.
_V12_INDEXED = [c for c, _ in _V12_NAMES if not c.startswith(("text", "keyword_list"))]

_V12 = (
    """CREATE TABLE dn_visibility (
        run_id VARCHAR(64) NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        workflow_id TEXT NOT NULL,
        workflow_type TEXT NOT NULL,
        task_queue TEXT NOT NULL,
        status SMALLINT NOT NULL,
        start_time {double} NOT NULL,
        execution_time {double} NOT NULL,
        close_time {double},
        close_order {double} NOT NULL,
        execution_duration {double},
        history_length BIGINT,
        history_size_bytes BIGINT,
        parent_workflow_id TEXT,
        parent_run_id VARCHAR(64),
        root_workflow_id TEXT,
        root_run_id VARCHAR(64),
        change_version TEXT,
        build_ids TEXT,
        scheduled_by_id TEXT,
        scheduled_start_time {double},
        schedule_paused SMALLINT,
        search_attributes TEXT,
        """
    + "".join(f"{c} {t}, " for c, t in _V12_NAMES)
    + """
        PRIMARY KEY (run_id)
)""",
    "CREATE INDEX dn_visibility_listing ON dn_visibility "
    "(namespace, close_order, start_time, run_id)",
    "CREATE INDEX dn_visibility_status ON dn_visibility "
    "(namespace, status, close_order, start_time, run_id)",
    "CREATE INDEX dn_visibility_type ON dn_visibility (namespace, workflow_type)",
    "CREATE INDEX dn_visibility_workflow_id ON dn_visibility (namespace, workflow_id)",
    "CREATE INDEX dn_visibility_start ON dn_visibility (namespace, start_time)",
    *(
        f"CREATE INDEX dn_visibility_{c} ON dn_visibility (namespace, {c}) WHERE {c} IS NOT NULL"
        for c in _V12_INDEXED
    ),
    """CREATE TABLE dn_search_attributes (
        namespace VARCHAR(255) NOT NULL,
        name VARCHAR(1000) NOT NULL,
        value_type SMALLINT NOT NULL,
        column_name VARCHAR(32) NOT NULL,
        created_at {double} NOT NULL,
        PRIMARY KEY (namespace, name)
)""",
    "CREATE UNIQUE INDEX dn_search_attributes_column "
    "ON dn_search_attributes (namespace, column_name)",
)


_V13 = tuple(
    f"ALTER TABLE dn_namespaces ADD COLUMN {column}"
    for column in (
        "namespace_id VARCHAR(64)",
        "description TEXT",
        "owner_email TEXT",
        "data TEXT",
        "updated_at {double}",
    )
)


#: Retention given by migration 13 to the namespaces a database already had: before
#: version 13 nothing was ever deleted, and an upgrade must not delete years of runs on
#: its own (``durable operator namespace update NAME --retention ...`` shortens it).
UPGRADED_RETENTION_SECONDS = 3650 * 86400.0


def _backfill_v13(conn: sa.Connection) -> None:
    """An id for each namespace there is, and the ``default`` namespace if it is missing
    (before version 13 a namespace was made by the first run started in it). Namespaces
    that existed keep their runs for ten years: see :data:`UPGRADED_RETENTION_SECONDS`."""
    now = time.time()
    conn.execute(
        sa.text("UPDATE dn_namespaces SET retention_seconds = :r WHERE retention_seconds < :r"),
        {"r": UPGRADED_RETENTION_SECONDS},
    )
    conn.execute(
        sa.text(
            "INSERT INTO dn_namespaces (name, retention_seconds, created_at) "
            "VALUES ('default', :r, :t) ON CONFLICT (name) DO NOTHING"
        ),
        {"r": DEFAULT_RETENTION_SECONDS, "t": now},
    )
    names = conn.execute(sa.text("SELECT name FROM dn_namespaces")).scalars().all()
    for name in names:
        conn.execute(
            sa.text(
                "UPDATE dn_namespaces SET namespace_id = :i, description = '', "
                "owner_email = '', data = '{}', updated_at = created_at WHERE name = :n"
            ),
            {"i": str(uuid.uuid4()), "n": name},
        )


def _backfill_v12(conn: sa.Connection) -> None:
    # Every run's visibility row, from what the run row and its history hold: the history
    # length and size of a closed run as they ended, the change versions it upserted.
    conn.execute(
        sa.text(
            "INSERT INTO dn_visibility (run_id, namespace, workflow_id, workflow_type, "
            "task_queue, status, start_time, execution_time, close_time, close_order, "
            "execution_duration, history_length, history_size_bytes, parent_workflow_id, "
            "parent_run_id, root_workflow_id, root_run_id) "
            "SELECT run_id, namespace, workflow_id, workflow_type, task_queue, status, "
            "start_time, COALESCE(execution_time, start_time), close_time, "
            f"COALESCE(close_time, {OPEN_CLOSE_ORDER}), "
            "CASE WHEN close_time - COALESCE(execution_time, start_time) < 0 THEN 0 "
            "ELSE close_time - COALESCE(execution_time, start_time) END, "
            "CASE WHEN close_time IS NULL THEN NULL ELSE next_event_id - 1 END, "
            "CASE WHEN close_time IS NULL THEN NULL ELSE history_size_bytes END, "
            "parent_workflow_id, parent_run_id, COALESCE(root_workflow_id, workflow_id), "
            "COALESCE(root_run_id, run_id) FROM dn_executions"
        )
    )
    rows = conn.execute(
        sa.text(
            "SELECT run_id, attributes FROM dn_history_events "
            "WHERE event_type = 'UpsertWorkflowSearchAttributes' ORDER BY run_id, event_id"
        )
    ).fetchall()
    versions: dict[str, tuple[list[str], dict[str, object]]] = {}
    for run_id, attributes in rows:  # in event order: the last upsert of a run wins
        fields = (json.loads(attributes).get("searchAttributes") or {}).get("indexedFields")
        payload = (fields or {}).get("TemporalChangeVersion")
        if not isinstance(payload, dict):
            continue
        try:
            value = json.loads(base64.b64decode(payload.get("data") or "") or "null")
        except (ValueError, TypeError):
            continue
        if value is None:  # unset
            versions.pop(str(run_id), None)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            versions[str(run_id)] = (value, payload)
    update = sa.text(
        "UPDATE dn_visibility SET change_version = :v, search_attributes = :j WHERE run_id = :r"
    )
    for batch in _batches(list(versions.items()), 500):
        conn.execute(
            update,
            [
                {"v": json.dumps(v), "j": json.dumps({"TemporalChangeVersion": p}), "r": r}
                for r, (v, p) in batch
            ],
        )


def _widen_start_request_ids(conn: sa.Connection) -> None:
    # Temporal takes request ids up to 1,000 bytes. SQLite ignores declared lengths; a
    # PostgreSQL column declared VARCHAR(64) refused longer ones.
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("ALTER TABLE dn_executions ALTER COLUMN request_id TYPE TEXT"))


def _backfill_v10(conn: sa.Connection) -> None:
    """The new run columns of runs from before version 10, from their history: the memo
    (the start event's, with the changes of every WorkflowPropertiesModified after it),
    the root run, and the execution time (start plus the first workflow task's backoff).

    Reads start events by key, 500 runs at a time, and the memo changes only of the runs
    that have any; writes each batch with one executemany."""
    modified = {
        row[0]
        for row in conn.execute(
            sa.text(
                "SELECT DISTINCT run_id FROM dn_history_events "
                "WHERE event_type = 'WorkflowPropertiesModified'"
            )
        )
    }
    runs = conn.execute(sa.text("SELECT run_id, workflow_id, start_time FROM dn_executions"))
    starts = sa.text(
        "SELECT run_id, attributes FROM dn_history_events WHERE event_id = 1 AND run_id IN :ids"
    ).bindparams(sa.bindparam("ids", expanding=True))
    changes = sa.text(
        "SELECT run_id, attributes FROM dn_history_events "
        "WHERE event_type = 'WorkflowPropertiesModified' AND run_id IN :ids "
        "ORDER BY run_id, event_id"
    ).bindparams(sa.bindparam("ids", expanding=True))
    update = sa.text(
        "UPDATE dn_executions SET memo = :memo, root_workflow_id = :root_id, "
        "root_run_id = :root_run, execution_time = :execution_time WHERE run_id = :run_id"
    )
    for batch in _batches(runs.fetchall(), 500):
        known = {row[0]: (row[1], float(row[2])) for row in batch}
        memos: dict[str, dict[str, object]] = {}
        values: list[dict[str, object]] = []
        for run_id, attributes in conn.execute(starts, {"ids": list(known)}):
            attrs = json.loads(attributes)
            workflow_id, start_time = known[run_id]
            root = attrs.get("rootWorkflowExecution") or {}
            backoff = duration_from_json(attrs.get("firstWorkflowTaskBackoff") or "0s")
            memos[run_id] = dict((attrs.get("memo") or {}).get("fields") or {})
            values.append(
                {
                    "run_id": run_id,
                    "root_id": root.get("workflowId", workflow_id),
                    "root_run": root.get("runId", run_id),
                    "execution_time": start_time + backoff.total_seconds(),
                }
            )
        touched = [run_id for run_id in known if run_id in modified]
        if touched:
            for run_id, attributes in conn.execute(changes, {"ids": touched}):
                fields = (json.loads(attributes).get("upsertedMemo") or {}).get("fields") or {}
                memo = memos.setdefault(run_id, {})
                for key, payload in fields.items():
                    if removes_memo_field(payload):
                        memo.pop(key, None)
                    else:
                        memo[key] = payload
        for value in values:
            kept = memos.get(str(value["run_id"]))
            value["memo"] = json.dumps(kept) if kept else None
        if values:
            conn.execute(update, values)


def _batches(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


_V14 = (
    "ALTER TABLE dn_executions ADD COLUMN schedule_key VARCHAR(64)",
    """CREATE TABLE dn_schedules (
        namespace VARCHAR(255) NOT NULL,
        schedule_id TEXT NOT NULL,
        schedule_key VARCHAR(64) NOT NULL,
        definition TEXT NOT NULL,
        info TEXT NOT NULL,
        memo TEXT,
        search_attributes TEXT,
        created_at {double} NOT NULL,
        updated_at {double},
        conflict_token INTEGER NOT NULL,
        PRIMARY KEY (namespace, schedule_id)
)""",
    "CREATE UNIQUE INDEX dn_schedules_key ON dn_schedules (schedule_key)",
    """CREATE TABLE dn_schedule_actions (
        id {serial} NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        schedule_id TEXT NOT NULL,
        nominal_time {double} NOT NULL,
        scheduled_time {double} NOT NULL,
        decided_time {double} NOT NULL,
        outcome VARCHAR(32) NOT NULL,
        source VARCHAR(16) NOT NULL,
        overlap SMALLINT NOT NULL,
        workflow_id TEXT,
        started_run_id VARCHAR(64),
        detail TEXT,
        PRIMARY KEY (id)
)""",
    "CREATE INDEX dn_schedule_actions_schedule ON dn_schedule_actions (namespace, schedule_id, id)",
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema: executions, history, task queues, timers, attempts", _V1),
    Migration(2, "child workflows: parent event ids and parent close policy", _V2),
    Migration(3, "queries waiting for a worker", _V3),
    Migration(4, "workflow-task deadlines and buffered-event flag on the task row", _V4),
    Migration(5, "workflow updates", _V5),
    Migration(6, "index for listing runs page by page, newest first", _V6),
    Migration(7, "flag on runs that have been asked for updates", _V7),
    Migration(8, "start-to-close deadlines of activity attempts on the task row", _V8),
    Migration(9, "cron schedules of runs", _V9),
    Migration(
        10,
        "top-level fields of history events (user metadata); runs' memo, root, execution time",
        _V10,
        _backfill_v10,
    ),
    Migration(
        11,
        "runs' cancel-requested flag; request ids seen per run; start request ids as text",
        _V11,
        _widen_start_request_ids,
    ),
    Migration(
        12,
        "visibility: a row per run with Temporal's attributes and typed columns for custom "
        "search attributes; search attributes registered per namespace",
        _V12,
        _backfill_v12,
    ),
    Migration(
        13,
        "namespaces: id, description, owner email and data; the default namespace exists",
        _V13,
        _backfill_v13,
    ),
    Migration(
        14,
        "schedules, their action log, and the schedule that started a run",
        _V14,
    ),
)

_SPELLING = {
    "sqlite": {"double": "DOUBLE", "serial": "INTEGER"},
    "postgresql": {"double": "DOUBLE PRECISION", "serial": "SERIAL"},
}


def _render(statement: str, dialect: str) -> str:
    return statement.format(**_SPELLING[dialect])


def current_version(conn: sa.Connection) -> int:
    """The highest migration applied to this database, 0 for an empty one."""
    if not sa.inspect(conn).has_table("dn_schema_versions"):
        return 0
    value = conn.execute(sa.text("SELECT MAX(version) FROM dn_schema_versions")).scalar()
    return int(value or 0)


def migrate(engine: sa.Engine, *, url_for_errors: str = "") -> int:
    """Bring the database up to :data:`SCHEMA_VERSION`; return the version it was at.

    Each migration runs in its own transaction together with its version row, so a crash
    leaves the database at a numbered version, never in between. A database written by a
    newer engine is refused rather than touched.
    """
    dialect = engine.dialect.name
    if dialect not in _SPELLING:
        raise SchemaVersionError(f"unsupported database dialect {dialect!r}")
    # A read first: a process opening an up-to-date database (every process but the first)
    # takes no write lock, so it does not wait for another process's writer.
    with engine.connect().execution_options(**{READ_ONLY_OPTION: True}) as conn, conn.begin():
        found = current_version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the database {url_for_errors or ''} has schema version {found}, but this "
            f"durable-notebook understands versions up to {SCHEMA_VERSION}: it was written by "
            "a newer release. Upgrade durable-notebook (pip install -U durable-notebook) or "
            "point DURABLE_DATABASE_URL at another database."
        )
    for migration in MIGRATIONS:
        if migration.version <= found:
            continue
        with engine.begin() as conn:
            if dialect == "postgresql":
                # Two processes migrating at once: the second waits, then sees the row.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(4242001)"))
            # SQLite transactions here are BEGIN IMMEDIATE, so this re-check is serialised.
            if current_version(conn) >= migration.version:
                continue
            for statement in migration.statements:
                conn.execute(sa.text(_render(statement, dialect)))
            if migration.backfill is not None:
                migration.backfill(conn)
            conn.execute(
                sa.text(
                    "INSERT INTO dn_schema_versions (version, description, applied_at) "
                    "VALUES (:v, :d, :t)"
                ),
                {"v": migration.version, "d": migration.description, "t": time.time()},
            )
    return found
