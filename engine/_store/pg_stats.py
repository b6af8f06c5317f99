"""Planner statistics for the engine's PostgreSQL tables while they are young.

PostgreSQL plans each statement from statistics that ``ANALYZE`` gathers (rows per table,
distinct values per column). The autovacuum daemon gathers them when a table has changed by
``autovacuum_analyze_threshold`` rows plus ``autovacuum_analyze_scale_factor`` of its size
since the last time, but it looks only once per ``autovacuum_naptime`` (a minute by
default). A new database fills faster than that: in its first minute the history table
grows from nothing to a hundred thousand rows with no statistics at all, and the planner,
assuming a couple of hundred distinct run ids, reads a run's events by scanning the whole
table; plans cached while the tables were tiny (sequential scans, then cheapest) stay in
use as they grow. Measured with ``bench/run.py --backend postgres --workloads W1 --reps
30`` on a server with autovacuum off: throughput fell from about 1,000-1,200 to under 500
workflows a second within 20 s, the server's time going to those scans.

:class:`StatsKeeper` applies autovacuum's own rule to the engine's tables (the server's
settings, or the table's own where it has them), but when asked (the service host asks
every :data:`STATS_INTERVAL`): a table changed past its threshold is analyzed now. Once
its statistics say how run ids spread, the plans hold as the table grows, and the rule (a
tenth of the table's size by default) makes a large table's turn rare. Processes on one
database take turns: a table is analyzed under an advisory lock, by the first process that
finds it still past its threshold.

It does so where autovacuum is off for the whole server too (this project's CI server
runs so): there nothing else would ever analyze the tables, and the engine would slow down
as they grow. A table whose own settings turn autovacuum off (``ALTER TABLE dn_... SET
(autovacuum_enabled = off)``) is left to its administrator, and so is one the connecting
role may not analyze (it does not own it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import sqlalchemy as sa

from .schema import metadata

log = logging.getLogger("engine.store")

#: Seconds between two looks at the tables' change counts (see :class:`StatsKeeper`).
STATS_INTERVAL = 2.0

#: How long an ``ANALYZE`` waits for its table's lock (a migration, another ``ANALYZE``).
LOCK_TIMEOUT_MS = 500

#: SQLSTATE of a lock wait that timed out.
LOCK_NOT_AVAILABLE = "55P03"

#: First key of the advisory locks taken while a table is analyzed (the second: the
#: table's oid); other users of advisory locks on the database pick other first keys.
ADVISORY_KEY = 0x64_6E_61_6E  # "dnan"

#: The engine's tables whose change counts are read and acted on, by name: those whose
#: rows come and go with the runs (the schema's version table and namespaces hardly change).
TABLES: tuple[str, ...] = tuple(
    name for name in metadata.tables if name not in ("dn_schema_versions", "dn_namespaces")
)

# Of the tables ``c``: whether one has changed past autovacuum's threshold since its last
# ANALYZE (its own settings first, then the server's), may be analyzed by this role, and
# has not had autovacuum turned off by its own settings.
_PAST_THRESHOLD = """
    pg_has_role(c.relowner, 'USAGE')
    AND coalesce((SELECT o.option_value::bool FROM pg_options_to_table(c.reloptions) o
                  WHERE o.option_name = 'autovacuum_enabled'), true)
    AND pg_stat_get_mod_since_analyze(c.oid) >
        coalesce((SELECT o.option_value::float8 FROM pg_options_to_table(c.reloptions) o
                  WHERE o.option_name = 'autovacuum_analyze_threshold'),
                 current_setting('autovacuum_analyze_threshold')::float8)
        + coalesce((SELECT o.option_value::float8 FROM pg_options_to_table(c.reloptions) o
                    WHERE o.option_name = 'autovacuum_analyze_scale_factor'),
                   current_setting('autovacuum_analyze_scale_factor')::float8)
          * greatest(c.reltuples, 0)
"""

# The engine's tables (found through the search path, as its statements find them) past
# their threshold, the most changed first.
_GROWN = sa.text(
    "SELECT c.oid, quote_ident(n.nspname) || '.' || quote_ident(c.relname) "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.oid IN (SELECT to_regclass(t) FROM unnest(CAST(:names AS text[])) AS t) "
    f"AND {_PAST_THRESHOLD} "
    "ORDER BY pg_stat_get_mod_since_analyze(c.oid) DESC"
)

# Taken in the transaction that analyzes: the table's advisory lock, then whether it is
# still past its threshold (another process may have analyzed it since the look above).
_CLAIM = sa.text(
    "SELECT pg_try_advisory_xact_lock(:key) AND EXISTS "
    f"(SELECT FROM pg_class c WHERE c.oid = CAST(:relid AS oid) AND {_PAST_THRESHOLD})"
)

#: A table is analyzed again no sooner than this many times as long as its last
#: ``ANALYZE`` took (so a large table's analyses take at most a small part of the server).
SPACING = 20.0


class StatsKeeper:
    """Analyzes the engine's grown tables when asked (:meth:`run_once`), each no sooner
    than :data:`SPACING` times its last analysis's duration after it."""

    def __init__(self, engine: sa.Engine, tables: Iterable[str] = TABLES) -> None:
        self.engine = engine
        self.tables = list(tables)
        #: Qualified table name -> monotonic time before which it is not analyzed again.
        self._not_before: dict[str, float] = {}

    def run_once(self) -> dict[str, float]:
        """``ANALYZE`` each table whose changes since its last analysis passed
        autovacuum's threshold; returns the tables analyzed (schema-qualified) with the
        seconds each took."""
        done: dict[str, float] = {}
        with self.engine.connect() as conn:
            with conn.begin():
                grown = conn.execute(_GROWN, {"names": self.tables}).all()
            for relid, name in grown:
                if self._not_before.get(name, 0.0) > time.monotonic():
                    continue
                key = (ADVISORY_KEY << 32) + int(relid)
                try:
                    with conn.begin():
                        if not conn.execute(_CLAIM, {"key": key, "relid": relid}).scalar():
                            continue
                        conn.execute(sa.text(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"))
                        t0 = time.perf_counter()
                        conn.execute(sa.text(f"ANALYZE {name}"))
                except sa.exc.OperationalError as err:
                    if getattr(err.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                        raise
                    log.debug("not analyzed now: %s is locked", name)
                    continue
                took = time.perf_counter() - t0
                done[name] = took
                self._not_before[name] = time.monotonic() + SPACING * took
        if done:
            log.debug("analyzed %s", ", ".join(f"{n} ({s * 1000:.0f} ms)" for n, s in done.items()))
        return done
