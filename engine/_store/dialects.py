"""What differs between SQLite and PostgreSQL: URLs, engine set-up, wake-ups across processes."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ..exceptions import DatabaseURLError
from .literals import PREPARE_AFTER, track

log = logging.getLogger("engine.store")

DEFAULT_SQLITE_PATH = Path(".durable") / "durable.db"
NOTIFY_CHANNEL = "dn_wakeups"
#: Execution option of a SQLAlchemy connection whose transactions only read: on SQLite they
#: begin ``DEFERRED`` instead of ``IMMEDIATE`` (the store's own reads bypass SQLAlchemy's
#: transactions; this is for the few that go through it, such as the schema version check).
READ_ONLY_OPTION = "durable_read_only"


def default_url() -> str:
    """``DURABLE_DATABASE_URL`` when set, else the embedded ``./.durable/durable.db``."""
    env = os.environ.get("DURABLE_DATABASE_URL", "").strip()
    if env:
        return env
    return f"sqlite:///{DEFAULT_SQLITE_PATH}"


def parse_url(url: str | None) -> URL:
    """Validate a database URL and pick our driver; raise :class:`DatabaseURLError` if bad."""
    text = default_url() if url is None else url
    if not isinstance(text, str):
        raise DatabaseURLError(
            f"the database URL must be a string, not {type(text).__name__}: pass a SQLAlchemy "
            "URL such as 'sqlite:///path/to/durable.db' or 'postgresql+psycopg://user@host/db'"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DatabaseURLError(
            f"the database URL {text[:200]!r} holds a lone surrogate, which is not valid "
            "text: check how it was read (e.g. an environment variable decoded with "
            "errors='surrogateescape')"
        ) from None
    if "\x00" in text:
        raise DatabaseURLError(f"the database URL {text[:200]!r} contains a NUL character")
    if not text.strip():
        raise DatabaseURLError(
            "database URL is empty: pass a SQLAlchemy URL such as "
            "'sqlite:///path/to/durable.db' or 'postgresql+psycopg://user@host/db'"
        )
    try:
        parsed = make_url(text.strip())
    except ArgumentError as err:
        hint = ""
        if "://" not in text and ":" in text:
            hint = (
                " (a host:port is the address of a Temporal server; durable-notebook keeps "
                "its state in a database and needs that database's URL)"
            )
        raise DatabaseURLError(
            f"could not parse database URL {text[:200]!r}: expected "
            "'sqlite:///path/to/file.db' or "
            f"'postgresql+psycopg://user:password@host:port/dbname'{hint}"
        ) from err
    backend = parsed.get_backend_name()
    driver = parsed.get_driver_name()
    if backend == "sqlite":
        if driver not in ("pysqlite", ""):
            raise DatabaseURLError(
                f"SQLite driver {driver!r} in {text!r} is not supported: use 'sqlite:///...'"
            )
        return parsed.set(drivername="sqlite")
    if backend in ("postgresql", "postgres"):
        if driver not in ("psycopg", "", "psycopg2"):
            raise DatabaseURLError(
                f"PostgreSQL driver {driver!r} in {text!r} is not supported: use "
                "'postgresql+psycopg://...' (psycopg 3)"
            )
        if not parsed.database:
            raise DatabaseURLError(
                f"PostgreSQL URL {text!r} names no database: add '/dbname' at the end"
            )
        return parsed.set(drivername="postgresql+psycopg")
    raise DatabaseURLError(
        f"unsupported database {backend!r} in URL {text!r}: durable-notebook stores histories "
        "in SQLite ('sqlite:///file.db') or PostgreSQL ('postgresql+psycopg://...')"
    )


def create_engine(url: URL, *, fsync: bool) -> sa.Engine:
    """An engine with our connection settings for the URL's dialect."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, fsync=fsync)
    try:
        import psycopg  # noqa: F401
    except ImportError as err:
        raise DatabaseURLError(
            f"PostgreSQL URL {url.render_as_string(hide_password=True)!r} needs the psycopg "
            "driver, which is not installed: pip install 'durable-notebook[postgres]' "
            "(or pip install 'psycopg[binary]')"
        ) from err
    url, connect_args, prepare_after = _prepare_threshold(url)
    engine = sa.create_engine(
        url,
        pool_size=8,
        max_overflow=8,
        # The connection returned last is handed out first: the one ``Store.warm`` just
        # used (and the server process behind it, awake) serves the change that follows.
        pool_use_lifo=True,
        pool_recycle=3600,
        isolation_level="READ COMMITTED",
        connect_args=connect_args,
    )

    if prepare_after is not None:

        @sa.event.listens_for(engine, "connect")
        def _prepare_here(driver: Any, record: Any) -> None:
            track(driver, prepare_after)

    @sa.event.listens_for(engine, "checkin")
    def _out_of_autocommit(driver: Any, record: Any) -> None:
        # The store's transactions send their own BEGIN (``set_writes.own_begin`` puts the
        # connection in autocommit); the pool's other users (SQLAlchemy's own
        # transactions: migrations, statistics) get psycopg's BEGIN again. The pool has
        # already rolled back whatever was left open. A connection that cannot change
        # is broken: the pool replaces it (its next user gets a new one).
        if driver is not None and driver.autocommit:
            try:
                driver.autocommit = False
            except Exception as err:
                record.invalidate(err)

    return engine


#: libpq settings of every PostgreSQL connection: a connection attempt gives up after 5 s
#: (a server that accepts nothing, e.g. behind a partition, would otherwise hang it for
#: ever: the store's retry time is only checked between attempts), and TCP keepalives
#: plus ``tcp_user_timeout`` end an open connection whose peer has gone silent within
#: about 15 s. A URL's own query parameters (``?connect_timeout=...``) take precedence.
PG_CONNECT_ARGS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}


def _prepare_threshold(url: URL) -> tuple[URL, dict[str, Any], int | None]:
    """The URL without ``prepare_threshold`` (not a libpq setting), the connection
    arguments, and after how many writes the store prepares a statement (None: never).

    ``?prepare_threshold=none`` turns the store's prepared statements off, as a pooler in
    transaction mode (PgBouncer's) needs; a number is how many times a statement is
    written before it is prepared (5 when not given: psycopg's default). psycopg's own
    preparing is off on every connection of the engine
    (``engine._store.literals.track`` says why)."""
    args = {**PG_CONNECT_ARGS, "prepare_threshold": None}
    raw = url.query.get("prepare_threshold")
    if raw is None:
        return url, args, PREPARE_AFTER
    text = (raw if isinstance(raw, str) else raw[-1]).strip().lower()
    if text in ("none", "off", ""):
        after = None
    elif text.isdigit():
        after = int(text)
    else:
        raise DatabaseURLError(
            f"prepare_threshold={text!r} in the database URL is not a number of times or "
            "'none': use ?prepare_threshold=none to turn prepared statements off (behind "
            "PgBouncer in transaction mode), or a count such as ?prepare_threshold=5"
        )
    return url.difference_update_query(["prepare_threshold"]), args, after


def _sqlite_engine(url: URL, *, fsync: bool) -> sa.Engine:
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        raise DatabaseURLError(
            "an in-memory SQLite database cannot be shared by workers and clients: "
            "give a file path, e.g. 'sqlite:///durable.db'"
        )
    path = Path(database)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DatabaseURLError(
            f"cannot create the directory for SQLite file {path}: {err}"
        ) from err
    engine = sa.create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30, "isolation_level": None},
        pool_size=4,
        max_overflow=4,
    )
    synchronous = "FULL" if fsync else "NORMAL"

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=OFF")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get(READ_ONLY_OPTION):
            # A read: a WAL snapshot, and no lock that would keep a writer waiting.
            conn.exec_driver_sql("BEGIN DEFERRED")
            return
        # Take the write lock up front: no deadlock-prone upgrade from a read lock later.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class PostgresListener:
    """A thread that LISTENs for wake-ups from other processes and forwards them locally.

    A lost connection (a database restart) is opened again, with backoff capped at a
    second, and LISTENs again; then ``on_reconnect`` runs, so that everyone waiting looks
    for what was committed while nobody listened. The loss and the return are logged once.
    """

    def __init__(
        self,
        url: URL,
        on_notify: Callable[[str], None],
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._display = url.render_as_string(hide_password=True)
        self._on_notify = on_notify
        self._on_reconnect = on_reconnect
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="durable-pg-listen", daemon=True)
        #: Connections opened (1 after the start; more after each loss).
        self.connections = 0

    def start(self) -> None:
        """Start listening in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (returns within about a second)."""
        self._stop.set()
        self._thread.join(timeout=3)

    def _run(self) -> None:
        import psycopg

        lost_since: float | None = None
        delay = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, **PG_CONNECT_ARGS) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.connections += 1
                    delay = 0.1
                    reconnected = lost_since is not None
                    if lost_since is not None:
                        log.warning(
                            "listening for wake-ups on %s again, after %.1f s",
                            self._display,
                            time.monotonic() - lost_since,
                        )
                        lost_since = None
                    if reconnected and self._on_reconnect is not None:
                        self._on_reconnect()  # poll once for what went by unheard
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5, stop_after=64):
                            self._on_notify(note.payload)
            except Exception as err:  # keep listening through restarts of the database
                if lost_since is None:
                    lost_since = time.monotonic()
                    log.warning(
                        "the LISTEN connection to %s is lost (%s); reconnecting",
                        self._display,
                        str(err).strip().splitlines()[0] if str(err).strip() else err,
                    )
                self._stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 1.5, 1.0)
