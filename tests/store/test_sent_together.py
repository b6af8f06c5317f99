"""PostgreSQL: what a write transaction held back goes to the server with the next read, as
one query of several statements (``StoreTx._sent_together``): one call into psycopg, the
values written in by psycopg's quoting and read back as they were; a held-back write that
fails raises at that read and nothing of the transaction stays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from engine._store.gateway import Store
from engine._store.queries import Q
from engine._store.tx import StoreTx
from engine.exceptions import StoreConflictError

AWKWARD = ["plain", "per%cent %(x)s", "quote ' and ''", "semi; colon; COMMIT", "back\\slash", "é ☃"]


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    # Statements written in full, whatever ran before: these tests read the text sent.
    # (Prepared statements, sent as EXECUTE in the same one query: test_literals.py.)
    store = Store(f"{pg_url}&prepare_threshold=none")
    store.open()
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE together (n INTEGER PRIMARY KEY, a TEXT)"))
    engine.dispose()
    try:
        yield store
    finally:
        store.close()


def _queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every query psycopg is asked to run from now on."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spy)
    return sent


INSERT = Q("INSERT INTO together (n, a) VALUES (:n, :a)")
READ = Q("SELECT n, a FROM together ORDER BY n")


def test_held_back_writes_go_with_the_next_read_as_one_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def change(tx: StoreTx) -> list[Any]:
        for n, text in enumerate(AWKWARD):
            tx._w(INSERT, {"n": n, "a": text})
        return [(row.n, row.a) for row in tx._q(READ).fetchall()]

    sent = _queries(monkeypatch)
    assert store.run_sync(change) == list(enumerate(AWKWARD))
    writes_and_read = [q for q in sent if "INSERT INTO together" in q]
    assert len(writes_and_read) == 1  # one call for the six writes and the read
    assert writes_and_read[0].count("INSERT INTO together") == len(AWKWARD)
    assert writes_and_read[0].rstrip().endswith("ORDER BY n")
    # Committed as written.
    assert store.read_sync(lambda tx: [(r.n, r.a) for r in tx._q(READ).fetchall()]) == list(
        enumerate(AWKWARD)
    )


def test_a_held_back_write_that_fails_raises_at_the_read_and_nothing_stays(
    store: Store,
) -> None:
    reached: list[str] = []

    def change(tx: StoreTx) -> None:
        tx._w(INSERT, {"n": 1, "a": "first"})
        tx._w(INSERT, {"n": 1, "a": "the same key again"})
        reached.append("writes held")
        tx._q(READ).fetchall()
        reached.append("read")

    with pytest.raises(StoreConflictError, match="together_pkey"):
        store.run_sync(change)
    assert "writes held" in reached and "read" not in reached
    assert store.read_sync(lambda tx: tx._q(READ).fetchall()) == []


def test_the_result_read_is_the_reads_after_the_held_back_writes(store: Store) -> None:
    """The cursor is left on the read's rows, not on a held-back write's; a read of
    several statements gets each one's rows (``_q_many``)."""

    def change(tx: StoreTx) -> Any:
        tx._w(INSERT, {"n": 1, "a": "one"})
        tx._w(INSERT, {"n": 2, "a": "two"})
        first = tx._q(Q("SELECT count(*) AS c FROM together")).fetchone()
        tx._w(INSERT, {"n": 3, "a": "three"})
        many = tx._q_many(
            (Q("SELECT a FROM together WHERE n = :n"), {"n": 3}),
            (READ, None),
        )
        return first.c, [r.a for r in many[0]], [r.n for r in many[1]]

    assert store.run_sync(change) == (2, ["three"], [1, 2, 3])


def test_floats_are_typed_as_psycopg_types_them_apart(store: Store) -> None:
    """A float written in is a float8, as when psycopg sends it apart (a bare 0.5 would
    be NUMERIC: its sum a Decimal, its 2.5 rounded up into an integer column)."""

    def change(tx: StoreTx) -> Any:
        tx._w(INSERT, {"n": 1, "a": "x"})  # held back: the read goes with it
        return tx._q(
            Q("SELECT pg_typeof(:x)::text AS t, :x + :y AS s, CAST(:h AS INTEGER) AS i"),
            {"x": 0.1, "y": 0.2, "h": 2.5},
        ).fetchone()

    row = store.run_sync(change)
    assert row.t == "double precision"
    assert row.s == 0.1 + 0.2 and isinstance(row.s, float)
    assert row.i == 2  # float8 to integer rounds half to even, as a bound value does


SHOW = Q(
    "SELECT current_setting('transaction_isolation') AS isolation, "
    "current_setting('transaction_read_only') AS read_only"
)


def test_the_begin_goes_with_the_first_query(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg sends no BEGIN of its own (and waits for no answer to it): the connection
    is in autocommit, and the transaction's BEGIN opens the first query. A write runs
    READ COMMITTED; a read REPEATABLE READ, read only (one snapshot, no write)."""

    def change(tx: StoreTx) -> Any:
        assert tx.conn.connection.driver_connection.autocommit  # type: ignore[union-attr]
        tx._w(INSERT, {"n": 1, "a": "one"})
        return tx._q(SHOW).fetchone()

    sent = _queries(monkeypatch)
    row = store.run_sync(change)
    assert (row.isolation, row.read_only) == ("read committed", "off")
    assert sent[0].startswith("BEGIN ISOLATION LEVEL READ COMMITTED; INSERT INTO together")

    sent.clear()
    row = store.read_sync(lambda tx: tx._q(SHOW).fetchone())
    assert (row.isolation, row.read_only) == ("repeatable read", "on")
    assert sent[0].startswith("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT")
    with pytest.raises(Exception, match="read-only transaction"):
        store.read_sync(lambda tx: tx._q(INSERT, {"n": 2, "a": "two"}))


def test_a_change_that_raises_after_its_writes_reached_the_server_leaves_nothing(
    store: Store,
) -> None:
    """The writes went out with a read (in autocommit, each query would commit at once
    without the transaction's own BEGIN); the change raises afterwards: rolled back."""

    def change(tx: StoreTx) -> None:
        tx._w(INSERT, {"n": 1, "a": "sent"})
        assert tx._q(Q("SELECT count(*) AS c FROM together")).fetchone().c == 1
        tx._q(INSERT, {"n": 2, "a": "sent alone"})
        raise RuntimeError("the change fails after its writes were sent")

    with pytest.raises(RuntimeError, match="after its writes"):
        store.run_sync(change)
    assert store.read_sync(lambda tx: tx._q(READ).fetchall()) == []


def test_a_connection_goes_back_to_the_pool_out_of_autocommit(store: Store) -> None:
    """The pool's other users (SQLAlchemy's own transactions: migrations, statistics) get
    transactions again: the connection the store's change used (handed out next: the
    pool is last in, first out) is out of autocommit, and its rollback undoes a write."""
    store.run_sync(lambda tx: tx._w(INSERT, {"n": 1, "a": "by the store"}))
    with store.engine.connect() as conn:
        assert not conn.connection.driver_connection.autocommit  # type: ignore[union-attr]
        conn.execute(sa.text("INSERT INTO together (n, a) VALUES (2, 'rolled back')"))
        conn.rollback()
    assert [r.n for r in store.read_sync(lambda tx: tx._q(READ).fetchall())] == [1]


def test_a_first_query_the_server_refused_whole_leaves_the_next_one_to_begin(
    store: Store,
) -> None:
    """A syntax error refuses the whole text, its BEGIN too: the connection is still
    outside a transaction, in autocommit. The next query begins the transaction again,
    so what it writes is still undone when the change fails."""

    def change(tx: StoreTx) -> None:
        with pytest.raises(psycopg.errors.SyntaxError):
            tx._q(Q("SELEC 1"))
        tx._q(INSERT, {"n": 1, "a": "after the refused query"})
        raise RuntimeError("the change fails")

    with pytest.raises(RuntimeError, match="the change fails"):
        store.run_sync(change)
    assert store.read_sync(lambda tx: tx._q(READ).fetchall()) == []
