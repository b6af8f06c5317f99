"""The declared schema: every table the engine uses, as SQLAlchemy Core metadata.

Migrations (``migrations.py``) are written by hand; a test checks that running them on an
empty database yields exactly this schema. Times are epoch seconds (UTC) as doubles.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..common import WorkflowExecutionStatus

metadata = sa.MetaData()

#: The schema version this code writes and understands.
SCHEMA_VERSION = 14

schema_versions = sa.Table(
    "dn_schema_versions",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("applied_at", sa.Double, nullable=False),
)

#: Retention of the ``default`` namespace a new database starts with, and of namespaces made
#: implicitly (``WorkflowEnvironment.start_local(namespace=...)``): a week, where
#: Temporal's dev server gives one day. Deliberate: here the database is the notebook's
#: own, kept on disk between sessions, and last week's runs should still be there.
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0

namespaces = sa.Table(
    "dn_namespaces",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("retention_seconds", sa.Double, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    # Migration 13: what Temporal's namespace info holds besides the name and retention
    # (an id, a description, an owner's email, ``data`` as a JSON object of strings).
    sa.Column("namespace_id", sa.String(64), nullable=True),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("owner_email", sa.Text, nullable=True),
    sa.Column("data", sa.Text, nullable=True),
    sa.Column("updated_at", sa.Double, nullable=True),
)

# One row per run, open or closed. At most one open run per (namespace, workflow_id).
executions = sa.Table(
    "dn_executions",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("workflow_id", sa.Text, nullable=False),
    sa.Column("workflow_type", sa.Text, nullable=False),
    sa.Column("task_queue", sa.Text, nullable=False),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("start_time", sa.Double, nullable=False),
    sa.Column("close_time", sa.Double, nullable=True),
    sa.Column("first_run_id", sa.String(64), nullable=False),
    sa.Column("parent_workflow_id", sa.Text, nullable=True),
    sa.Column("parent_run_id", sa.String(64), nullable=True),
    sa.Column("next_event_id", sa.Integer, nullable=False),
    sa.Column("history_size_bytes", sa.BigInteger, nullable=False),
    sa.Column("workflow_task_timeout", sa.Double, nullable=False),
    sa.Column("run_timeout", sa.Double, nullable=True),
    sa.Column("execution_timeout", sa.Double, nullable=True),
    sa.Column("new_run_id", sa.String(64), nullable=True),
    # The start's request id (up to 1,000 bytes, as Temporal's; TEXT since migration 11).
    sa.Column("request_id", sa.Text, nullable=True),
    # Migration 2: child workflows. Where the parent recorded this child, and what
    # happens to this child when its parent closes (1 terminate, 2 abandon, 3 cancel).
    sa.Column("parent_initiated_event_id", sa.Integer, nullable=True),
    sa.Column("parent_started_event_id", sa.Integer, nullable=True),
    sa.Column("parent_close_policy", sa.SmallInteger, nullable=True),
    # Migration 7: 1 once an update has been asked of the run (NULL: never), so the
    # workflow tasks of the many runs without updates skip looking for them.
    sa.Column("has_updates", sa.SmallInteger, nullable=True),
    # Migration 9: the run's cron schedule (NULL: none): when it closes, the next run starts.
    sa.Column("cron_schedule", sa.Text, nullable=True),
    # Migration 10: the run's memo as it is now (its start memo with upsert_memo's changes): Temporal's
    # memo fields JSON (``{key: payload}``), for describe and listing; NULL when empty.
    sa.Column("memo", sa.Text, nullable=True),
    # The run at the top of its parent chain (the run itself for a run without a parent),
    # and when its first workflow task was due (start time plus the start delay).
    sa.Column("root_workflow_id", sa.Text, nullable=True),
    sa.Column("root_run_id", sa.String(64), nullable=True),
    sa.Column("execution_time", sa.Double, nullable=True),
    # Migration 11: 1 once the run has been asked to cancel (NULL: never). Temporal's
    # IsCancelRequested: a second request, or one for a closed run, changes nothing.
    sa.Column("cancel_requested", sa.SmallInteger, nullable=True),
    # Migration 14: the key of the schedule that started the run's chain (NULL: none): when
    # the run closes, the schedule is woken (a timer of kind "schedule" under that key).
    sa.Column("schedule_key", sa.String(64), nullable=True),
)
sa.Index(
    "dn_executions_open_workflow_id",
    executions.c.namespace,
    executions.c.workflow_id,
    unique=True,
    sqlite_where=executions.c.status == int(WorkflowExecutionStatus.RUNNING),
    postgresql_where=executions.c.status == int(WorkflowExecutionStatus.RUNNING),
)
sa.Index("dn_executions_parent", executions.c.parent_run_id)
sa.Index(
    "dn_executions_by_workflow_id",
    executions.c.namespace,
    executions.c.workflow_id,
    executions.c.start_time,
)
# Listing runs newest first, page after page (keyset paging on start time, then run id).
sa.Index(
    "dn_executions_by_start",
    executions.c.namespace,
    executions.c.start_time,
    executions.c.run_id,
)

# The event history: attributes are Temporal's JSON attribute object for the event type.
history_events = sa.Table(
    "dn_history_events",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("event_time", sa.Double, nullable=False),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("attributes", sa.Text, nullable=False),
    # Migration 10: Temporal's top-level event fields other than id, time and type (``userMetadata``:
    # the summaries shown for an activity, timer or run), as JSON; NULL for most events.
    sa.Column("extra", sa.Text),
)

# Events that arrived while a workflow task was running: written to history when it ends.
buffered_events = sa.Table(
    "dn_buffered_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("event_time", sa.Double, nullable=False),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("attributes", sa.Text, nullable=False),
)
sa.Index("dn_buffered_events_run", buffered_events.c.run_id, buffered_events.c.id)

# The (at most one) pending workflow task of each open run.
workflow_tasks = sa.Table(
    "dn_workflow_tasks",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("task_queue", sa.Text, nullable=False),
    sa.Column("state", sa.SmallInteger, nullable=False),  # 1 scheduled, 2 started
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("scheduled_event_id", sa.Integer, nullable=True),  # None while transient
    sa.Column("scheduled_time", sa.Double, nullable=False),
    sa.Column("visible_at", sa.Double, nullable=False),
    sa.Column("started_event_id", sa.Integer, nullable=True),
    sa.Column("started_time", sa.Double, nullable=True),
    sa.Column("identity", sa.Text, nullable=True),
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("start_to_close", sa.Double, nullable=False),
    # Migration 4: a started task's deadline (the timer loop scans it: no timer row per
    # task), and whether events were buffered while it ran.
    sa.Column("timeout_at", sa.Double, nullable=True),
    sa.Column("buffered", sa.SmallInteger, nullable=True),
)
sa.Index("dn_workflow_tasks_timeout", workflow_tasks.c.timeout_at)
sa.Index(
    "dn_workflow_tasks_poll",
    workflow_tasks.c.namespace,
    workflow_tasks.c.task_queue,
    workflow_tasks.c.state,
    workflow_tasks.c.visible_at,
)

# Pending activities of open runs (Temporal's "pending activity info").
activity_tasks = sa.Table(
    "dn_activity_tasks",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("scheduled_event_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("workflow_id", sa.Text, nullable=False),
    sa.Column("workflow_type", sa.Text, nullable=False),
    sa.Column("activity_id", sa.Text, nullable=False),
    sa.Column("activity_type", sa.Text, nullable=False),
    sa.Column("task_queue", sa.Text, nullable=False),
    sa.Column("input", sa.Text, nullable=False),
    sa.Column("state", sa.SmallInteger, nullable=False),  # 1 scheduled, 2 started, 3 backoff
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("visible_at", sa.Double, nullable=False),
    sa.Column("scheduled_time", sa.Double, nullable=False),
    sa.Column("attempt_scheduled_time", sa.Double, nullable=False),
    sa.Column("started_time", sa.Double, nullable=True),
    sa.Column("identity", sa.Text, nullable=True),
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("schedule_to_close", sa.Double, nullable=True),
    sa.Column("schedule_to_start", sa.Double, nullable=True),
    sa.Column("start_to_close", sa.Double, nullable=True),
    sa.Column("heartbeat_timeout", sa.Double, nullable=True),
    sa.Column("retry_policy", sa.Text, nullable=False),
    sa.Column("heartbeat_details", sa.Text, nullable=True),
    sa.Column("last_heartbeat_time", sa.Double, nullable=True),
    sa.Column("last_failure", sa.Text, nullable=True),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    # Migration 8: a started attempt's start-to-close deadline (the timer loop scans it:
    # no timer row per attempt). NULL on attempts started before the migration.
    sa.Column("timeout_at", sa.Double, nullable=True),
)
sa.Index("dn_activity_tasks_timeout", activity_tasks.c.timeout_at)
sa.Index(
    "dn_activity_tasks_poll",
    activity_tasks.c.namespace,
    activity_tasks.c.task_queue,
    activity_tasks.c.state,
    activity_tasks.c.visible_at,
)

# Durable timers of every kind: user timers, timeouts, retry backoffs.
timers = sa.Table(
    "dn_timers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("ref", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("fire_at", sa.Double, nullable=False),
    sa.Column("data", sa.Text, nullable=True),
)
sa.Index("dn_timers_due", timers.c.fire_at)
sa.Index("dn_timers_run", timers.c.run_id, timers.c.kind, timers.c.ref)

# Every activity attempt, kept after the activity closes, so retries can be drawn.
activity_attempts = sa.Table(
    "dn_activity_attempts",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("scheduled_event_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("activity_id", sa.Text, nullable=False),
    sa.Column("activity_type", sa.Text, nullable=False),
    sa.Column("identity", sa.Text, nullable=True),
    sa.Column("scheduled_time", sa.Double, nullable=False),
    sa.Column("started_time", sa.Double, nullable=False),
    sa.Column("ended_time", sa.Double, nullable=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("failure", sa.Text, nullable=True),
)

# Migration 3: queries waiting for a worker to answer them (no history entry, as Temporal).
queries = sa.Table(
    "dn_queries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("task_queue", sa.Text, nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("query_type", sa.Text, nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("state", sa.SmallInteger, nullable=False),  # 1 pending, 2 taken, 3 answered
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("answer", sa.Text, nullable=True),
    sa.Column("failure", sa.Text, nullable=True),
)
sa.Index("dn_queries_poll", queries.c.namespace, queries.c.task_queue, queries.c.state)

# Migration 5: updates: requested (1), accepted (2), completed (3), rejected (4); abandoned (5)
# when the run closed first.
updates = sa.Table(
    "dn_updates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("update_id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("identity", sa.Text, nullable=False),
    sa.Column("state", sa.SmallInteger, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("outcome", sa.Text, nullable=True),
)
sa.Index("dn_updates_run", updates.c.run_id, updates.c.state)

# Migration 11: the request ids of the signals, terminations and async activity outcomes
# recorded on a run. A request the store runs again after an ambiguous commit (the COMMIT
# went out, the answer never came back) finds its id here and changes nothing, as
# Temporal's request ids do. Deleted with the run when its namespace's retention is over.
requests = sa.Table(
    "dn_requests",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("request_id", sa.Text, primary_key=True),
    sa.Column("created_at", sa.Double, nullable=False),
)

# Migration 12: visibility, Temporal's name for what finding runs reads. One row per run,
# apart from dn_executions (which changes with every event): it is written when the run
# starts, when it closes and when it upserts search attributes, as Temporal's visibility
# records are, so its many indexes cost nothing on the other changes. Listing orders by
# close_order (the close time; an open run's is after every close time), start time, run
# id: open runs first, then closed ones newest first, as Temporal lists them.
#: close_order of an open run: after every close time (Temporal's 9999-12-31T23:59:59Z).
OPEN_CLOSE_ORDER = 253402300799.0

visibility = sa.Table(
    "dn_visibility",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("workflow_id", sa.Text, nullable=False),
    sa.Column("workflow_type", sa.Text, nullable=False),
    sa.Column("task_queue", sa.Text, nullable=False),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("start_time", sa.Double, nullable=False),
    sa.Column("execution_time", sa.Double, nullable=False),
    sa.Column("close_time", sa.Double, nullable=True),
    sa.Column("close_order", sa.Double, nullable=False),
    # Seconds (a query's values are Temporal's nanoseconds or Go durations).
    sa.Column("execution_duration", sa.Double, nullable=True),
    # As the run closed (NULL while it is open, as Temporal's visibility has them).
    sa.Column("history_length", sa.BigInteger, nullable=True),
    sa.Column("history_size_bytes", sa.BigInteger, nullable=True),
    sa.Column("parent_workflow_id", sa.Text, nullable=True),
    sa.Column("parent_run_id", sa.String(64), nullable=True),
    sa.Column("root_workflow_id", sa.Text, nullable=True),
    sa.Column("root_run_id", sa.String(64), nullable=True),
    # KeywordList attributes are JSON lists of strings.
    sa.Column("change_version", sa.Text, nullable=True),  # TemporalChangeVersion
    sa.Column("build_ids", sa.Text, nullable=True),  # BuildIds
    sa.Column("scheduled_by_id", sa.Text, nullable=True),  # TemporalScheduledById
    sa.Column("scheduled_start_time", sa.Double, nullable=True),  # TemporalScheduledStartTime
    sa.Column("schedule_paused", sa.SmallInteger, nullable=True),  # TemporalSchedulePaused
    # Every search attribute the run holds, as Temporal's indexedFields JSON (payloads).
    sa.Column("search_attributes", sa.Text, nullable=True),
    # Custom search attributes: each registered one is given a column of its type
    # (dn_search_attributes.column_name), as Temporal's SQL visibility does; Text columns
    # hold the value's words (lower case, space separated, a space at each end).
    *(
        sa.Column(f"{prefix}{i:02d}", kind, nullable=True)
        for prefix, count, kind in (
            ("keyword", 10, sa.Text),
            ("text", 3, sa.Text),
            ("int", 3, sa.BigInteger),
            ("double", 3, sa.Double),
            ("bool", 3, sa.SmallInteger),
            ("datetime", 3, sa.Double),
            ("keyword_list", 3, sa.Text),
        )
        for i in range(1, count + 1)
    ),
)
sa.Index(
    "dn_visibility_listing",
    visibility.c.namespace,
    visibility.c.close_order,
    visibility.c.start_time,
    visibility.c.run_id,
)
sa.Index(
    "dn_visibility_status",
    visibility.c.namespace,
    visibility.c.status,
    visibility.c.close_order,
    visibility.c.start_time,
    visibility.c.run_id,
)
sa.Index("dn_visibility_type", visibility.c.namespace, visibility.c.workflow_type)
sa.Index("dn_visibility_workflow_id", visibility.c.namespace, visibility.c.workflow_id)
sa.Index("dn_visibility_start", visibility.c.namespace, visibility.c.start_time)
for _column in visibility.c:
    if _column.name[:-2] in ("keyword", "int", "double", "bool", "datetime"):
        sa.Index(
            f"dn_visibility_{_column.name}",
            visibility.c.namespace,
            _column,
            sqlite_where=_column.isnot(None),
            postgresql_where=_column.isnot(None),
        )

# Migration 12: custom search attributes registered per namespace: the name, its type
# (Temporal's IndexedValueType number) and the dn_visibility column that holds it.
search_attributes = sa.Table(
    "dn_search_attributes",
    metadata,
    sa.Column("namespace", sa.String(255), primary_key=True),
    sa.Column("name", sa.String(1000), primary_key=True),
    sa.Column("value_type", sa.SmallInteger, nullable=False),
    sa.Column("column_name", sa.String(32), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
)
sa.Index(
    "dn_search_attributes_column",
    search_attributes.c.namespace,
    search_attributes.c.column_name,
    unique=True,
)

# Migration 14: schedules. One row per schedule: what it is (``definition``: spec, action,
# policies and state, as JSON) and where it stands (``info``: counters, the buffered and
# running actions, the last time processed, as JSON). ``schedule_key`` names the
# schedule's timers in dn_timers (their ``run_id``).
schedules = sa.Table(
    "dn_schedules",
    metadata,
    sa.Column("namespace", sa.String(255), primary_key=True),
    sa.Column("schedule_id", sa.Text, primary_key=True),
    sa.Column("schedule_key", sa.String(64), nullable=False),
    sa.Column("definition", sa.Text, nullable=False),
    sa.Column("info", sa.Text, nullable=False),
    sa.Column("memo", sa.Text, nullable=True),
    sa.Column("search_attributes", sa.Text, nullable=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=True),
    sa.Column("conflict_token", sa.Integer, nullable=False),
)
sa.Index("dn_schedules_key", schedules.c.schedule_key, unique=True)

# Every action time a schedule came to, and what became of it: started, skipped by the
# overlap policy, missed (outside the catch-up window), and the rarer outcomes. The last
# ACTION_LOG_KEPT rows of a schedule are kept.
schedule_actions = sa.Table(
    "dn_schedule_actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(255), nullable=False),
    sa.Column("schedule_id", sa.Text, nullable=False),
    sa.Column("nominal_time", sa.Double, nullable=False),
    sa.Column("scheduled_time", sa.Double, nullable=False),
    sa.Column("decided_time", sa.Double, nullable=False),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("overlap", sa.SmallInteger, nullable=False),
    sa.Column("workflow_id", sa.Text, nullable=True),
    sa.Column("started_run_id", sa.String(64), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
)
sa.Index(
    "dn_schedule_actions_schedule",
    schedule_actions.c.namespace,
    schedule_actions.c.schedule_id,
    schedule_actions.c.id,
)

# Constants shared by the store and the service: the numbers of the state columns. The
# SQL text in queries.py and tx.py is formatted with these (once, when it is imported).
#: dn_executions.status of an open run (the other values: WorkflowExecutionStatus).
EXEC_RUNNING = int(WorkflowExecutionStatus.RUNNING)
#: dn_workflow_tasks.state
WFT_SCHEDULED = 1
WFT_STARTED = 2
#: dn_activity_tasks.state
ACT_SCHEDULED = 1
ACT_STARTED = 2
ACT_BACKOFF = 3
#: dn_queries.state
QUERY_PENDING = 1
QUERY_TAKEN = 2
QUERY_ANSWERED = 3
#: dn_updates.state
UPDATE_REQUESTED = 1
UPDATE_ACCEPTED = 2
UPDATE_COMPLETED = 3
UPDATE_REJECTED = 4
#: The run closed (or continued as new) before the update finished.
UPDATE_ABANDONED = 5
