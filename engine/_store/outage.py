"""Waiting out a database that is briefly gone: which errors pass, how long to wait, what to log.

Every store operation (its connection included) goes through :class:`Waiting` when it
fails in a way that may pass on its own (:func:`classify`):

- **lost**: no answer from the server. While *connecting* (refused, reset, the server
  starting up or shutting down) this is an outage: it is logged once when it begins and
  once when the database answers again (:class:`Outage`), however many operations wait
  meanwhile. On an open connection (a server restart ends every session) the transaction
  was rolled back with it and runs again at once on a new connection; only if that cannot
  connect does it become an outage.
- **contention**: a serialization failure, a deadlock, SQLite busy or locked. Another
  change won; running again at once usually succeeds.

Each wait is capped exponential backoff with jitter (:class:`RetryConfig`, the names and
meaning of ``temporalio.client.RetryConfig``; the defaults differ, see there) until the
operation succeeds or the configured time has passed, when it raises
:class:`~engine.exceptions.StoreUnavailableError` saying what was down and for how long.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError

from ..exceptions import InvalidArgumentError, StoreError, StoreUnavailableError

log = logging.getLogger("engine.store")

LOST = "lost"
CONTENTION = "contention"

#: PostgreSQL SQLSTATEs after which a transaction is simply run again.
_CONTENTION_STATES = {"40001", "40P01"}  # serialization failure, deadlock detected
#: ...and those that say the server is (for now) not taking work: admin or crash shutdown,
#: "cannot connect now" (starting up, shutting down, in recovery), too many connections.
_UNAVAILABLE_STATES = {"57P01", "57P02", "57P03", "53300"}


@dataclass(frozen=True)
class RetryConfig:
    """How long and how often a store operation is tried again while the database is
    unreachable or busy (``temporalio.client.RetryConfig``: same fields, same meaning).

    The defaults differ on purpose. Temporal's client gives up on an unreachable server
    after 10 s and 10 retries, and workers keep polling on their own. Here the client *is*
    the service: a worker's finished activity or workflow task waits for the database
    like any other call, so an outage of a minute (a database restart, a fail-over) is
    waited out, and the interval never grows past one second so that work resumes within
    about a second of the database's return.

    ``max_retries`` 0 means no limit on the count (only ``max_elapsed_time_millis`` ends
    the wait); ``max_elapsed_time_millis`` None means wait for ever.
    """

    initial_interval_millis: int = 100
    """The first wait."""
    randomization_factor: float = 0.2
    """Each wait is the interval times a random factor in [1 - this, 1 + this]."""
    multiplier: float = 1.5
    """How much the interval grows after each wait."""
    max_interval_millis: int = 1000
    """The longest wait (Temporal's: 5000)."""
    max_elapsed_time_millis: int | None = 60_000
    """How long one operation waits in all before it raises (Temporal's: 10000)."""
    max_retries: int = 0
    """How many tries one operation gets at most, the first included; 0: no limit
    (Temporal's: 10)."""

    def __post_init__(self) -> None:
        for name in ("initial_interval_millis", "max_interval_millis", "max_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgumentError(
                    f"RetryConfig.{name} must be a non-negative int, got {value!r}"
                )
        elapsed = self.max_elapsed_time_millis
        if elapsed is not None and (
            not isinstance(elapsed, int) or isinstance(elapsed, bool) or elapsed < 0
        ):
            raise InvalidArgumentError(
                "RetryConfig.max_elapsed_time_millis must be a non-negative int or None, "
                f"got {elapsed!r}"
            )
        for name, low in (("randomization_factor", 0.0), ("multiplier", 1.0)):
            value = getattr(self, name)
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not (low <= value < float("inf"))
            ):
                raise InvalidArgumentError(
                    f"RetryConfig.{name} must be a finite number >= {low:g}, got {value!r}"
                )
        if self.randomization_factor > 1:
            raise InvalidArgumentError(
                f"RetryConfig.randomization_factor must be at most 1, got "
                f"{self.randomization_factor!r}"
            )


def is_database_error(err: BaseException) -> bool:
    """Whether ``err`` came from the database or its driver (statements run on the driver's
    cursor raise its errors unwrapped; SQLAlchemy's arrive as ``DBAPIError``). The
    transaction it happened in may be failed: only a rollback goes on from there."""
    if isinstance(err, (DBAPIError, sqlite3.Error)):
        return True
    try:
        import psycopg
    except ImportError:  # PostgreSQL support not installed
        return False
    return isinstance(err, psycopg.Error)


def classify(err: BaseException) -> str | None:
    """:data:`LOST` or :data:`CONTENTION` for an error that may pass by
    itself; None for one that will not (a bug, a constraint, a full disk, a bad password)."""
    invalidated = False
    if isinstance(err, DBAPIError):
        invalidated = bool(err.connection_invalidated)
        err = err.orig or err
    if isinstance(err, sqlite3.OperationalError):
        text = str(err).lower()
        return CONTENTION if "locked" in text or "busy" in text else None
    try:
        import psycopg
    except ImportError:  # PostgreSQL support not installed
        return None
    if not isinstance(err, psycopg.Error):
        return None
    code = getattr(err, "sqlstate", None)
    if code in _CONTENTION_STATES:
        return CONTENTION
    if code in _UNAVAILABLE_STATES or (code or "").startswith("08"):
        return LOST
    if isinstance(err, psycopg.OperationalError) and code is None:
        # No answer from a server: refused, reset, closed unexpectedly, timed out.
        return LOST
    if isinstance(err, psycopg.InterfaceError) and "closed" in str(err).lower():
        return LOST  # a statement on a connection the driver already knows is gone
    if invalidated or _prepared_gone(code, str(err)):
        return LOST
    return None


def _prepared_gone(code: str | None, text: str) -> bool:
    """The session no longer has a statement the store prepared on it
    (``engine._store.literals.Prepared``), or one of them no longer fits its tables (a
    migration changed a column it reads): the connection is dropped, and the transaction
    runs again on a new one, which prepares afresh."""
    if code == "26000":  # invalid_sql_statement_name
        return '"dn_p' in text
    return code == "0A000" and "cached plan must not change result type" in text


class Outage:
    """Whether the database is known to be unreachable now; logs each change once."""

    def __init__(self, display_url: str) -> None:
        self.display_url = display_url
        self._lock = threading.Lock()
        #: ``time.monotonic()`` when the outage began, or None while the database answers.
        self.down_since: float | None = None
        #: Outages seen since the store opened (for tests and metrics).
        self.count = 0

    def down(self, err: BaseException, config: RetryConfig) -> None:
        """A connection could not be opened."""
        with self._lock:
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
            self.count += 1
        limit = config.max_elapsed_time_millis
        log.warning(
            "the database %s is unreachable (%s); operations wait for it%s",
            self.display_url,
            _first_line(err),
            "" if limit is None else f", each up to {limit / 1000:g} s",
        )

    def up(self) -> None:
        """An operation succeeded (cheap when there was no outage)."""
        if self.down_since is None:
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            log.warning(
                "the database %s answers again, after %.1f s",
                self.display_url,
                time.monotonic() - since,
            )


class Waiting:
    """The waits of one operation that failed; made at its first failure only."""

    def __init__(
        self,
        config: RetryConfig,
        outage: Outage,
        closing: threading.Event,
        since: float | None = None,
    ) -> None:
        self.config = config
        self.outage = outage
        self.closing = closing
        #: When the operation was asked for: time it spent queued counts too.
        self.started = time.monotonic() if since is None else since
        self.retries = 0
        self._interval = min(config.initial_interval_millis, config.max_interval_millis) / 1000.0
        self._lost_in_a_row = 0

    def pause(self, err: BaseException, kind: str, *, connecting: bool) -> None:
        """Wait before the next try, or raise :class:`StoreUnavailableError` if the
        configured time or count is used up (or :class:`StoreError` if the store closes)."""
        config = self.config
        self.retries += 1
        elapsed = time.monotonic() - self.started
        if connecting:
            self.outage.down(err, config)
        limit = config.max_elapsed_time_millis
        # As sdk-core counts: ``max_retries`` tries in all, the first included.
        if (config.max_retries and self.retries >= config.max_retries) or (
            limit is not None and elapsed * 1000 >= limit
        ):
            raise StoreUnavailableError(
                self.outage.display_url,
                elapsed,
                self.retries,
                _first_line(err),
                busy=kind == CONTENTION,
            ) from err
        if kind == LOST and not connecting:
            # A session ended under us: a new connection at once, then backoff if it
            # keeps happening.
            self._lost_in_a_row += 1
            if self._lost_in_a_row == 1:
                return
        elif kind == CONTENTION and self.retries == 1:
            return  # another change won: run again at once
        delay = self._interval * random.uniform(
            1 - config.randomization_factor, 1 + config.randomization_factor
        )
        self._interval = min(self._interval * config.multiplier, config.max_interval_millis / 1000)
        if limit is not None:
            delay = min(delay, max(0.0, limit / 1000 - elapsed))
        if self.closing.wait(delay):
            raise StoreError("the store was closed while waiting for the database") from err


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "orig", None) or err).strip() or type(err).__name__
    first = text.splitlines()[0]
    return first if len(first) <= 300 else first[:300] + "..."
