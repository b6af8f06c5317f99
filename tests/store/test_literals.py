"""PostgreSQL: statements with their values written in by the store
(``engine._store.literals``): the same text psycopg's ``mogrify`` writes, values that read
back as they were, and statements prepared once written often enough, with what goes
wrong there (a statement PostgreSQL will not prepare, a session that lost its prepared
statements, a table changed under one) ending in a correct result, not an error."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine._store import literals
from engine._store.dialects import create_engine, parse_url
from engine._store.gateway import Store
from engine._store.literals import PREPARE_AFTER, bound, client_cursor
from engine._store.outage import LOST, classify
from engine._store.queries import Q
from engine._store.set_writes import own_begin
from engine._store.tx import StoreTx
from engine.exceptions import DatabaseURLError

from ..conftest import PG_URL

RAW_URL = PG_URL.replace("postgresql+psycopg://", "postgresql://", 1)

#: Every kind of value the store writes itself, and some it leaves to psycopg.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # NUL characters and lone surrogates included: psycopg refuses them
    st.text(alphabet="'\\\"%(){},; \n\tNUL"),
    st.lists(st.text(max_size=5), max_size=3),
    st.lists(st.text(alphabet="aZ09_.:-Nul ", max_size=5) | st.none(), max_size=3),
    st.lists(st.sampled_from(["null", "NULL", "Null", "run-1", "a.b:c_d"]), max_size=3),
    st.lists(st.integers(min_value=-(2**40), max_value=2**40), max_size=3),
)


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(RAW_URL) as c:
        own_begin(c)
        yield c


def _theirs(cur: Any, sql: str, params: dict[str, Any]) -> Any:
    try:
        return cur.mogrify(sql, params)
    except Exception as err:
        return type(err)


def _ours(cur: Any, sql: str, params: dict[str, Any]) -> Any:
    try:
        [text] = bound(cur, sql, params)
        return text
    except Exception as err:
        return type(err)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(a=VALUES, b=VALUES)
@example(a="it's", b="back\\slash")
@example(a=-0.0, b=-5)
@example(a=float("nan"), b=True)
@example(a="nul\x00", b="\ud800")
def test_values_are_written_as_psycopg_writes_them(
    conn: psycopg.Connection[Any], a: Any, b: Any
) -> None:
    cur = client_cursor(conn)
    assert cur.literals_ours  # UTF-8 and standard_conforming_strings: the fast path
    cur.prepared = None  # (written in full, as mogrify writes it)
    sql = "SELECT %(a)s, x - %(b)s, %(a)s, '100%%' WHERE y = %(b)s"
    assert _ours(cur, sql, {"a": a, "b": b}) == _theirs(cur, sql, {"a": a, "b": b})


def test_statements_it_does_not_write_itself_go_to_psycopg(
    conn: psycopg.Connection[Any],
) -> None:
    cur = client_cursor(conn)
    cur.prepared = None
    for sql, params in (
        ("SELECT %s, %s", (1, "x")),  # positional
        ("SELECT %(a)s, %(b)s", {"a": 1}),  # a name missing
        ("SELECT %(a)b", {"a": b"x"}),  # binary placeholder
        ("SELECT 5 % 3", {}),  # a stray percent
    ):
        assert _ours(cur, sql, params) == _theirs(cur, sql, params)


def test_a_connection_that_is_not_utf8_is_left_to_psycopg() -> None:
    with psycopg.connect(RAW_URL, client_encoding="LATIN1") as c:
        cur = client_cursor(c)
        assert not cur.literals_ours
        assert bound(cur, "SELECT %(a)s", {"a": "é"}) == [cur.mogrify("SELECT %(a)s", {"a": "é"})]


@pytest.fixture
def typed(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    schema = pg_url.rsplit("%3D", 1)[1]
    with psycopg.connect(RAW_URL, options=f"-csearch_path={schema}") as c:
        c.execute(
            "CREATE TABLE typed (n INTEGER PRIMARY KEY, i BIGINT, f DOUBLE PRECISION, "
            "t TEXT, b BOOLEAN, j JSONB)"
        )
        c.execute("INSERT INTO typed (n) VALUES (2)")
        c.commit()
        c.prepare_threshold = None  # as on the engine's connections
        literals.track(c)
        own_begin(c)
        yield c


ROW = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "f": st.none() | st.floats(allow_nan=False),
        "t": st.none() | st.text().filter(lambda s: "\x00" not in s and s.isprintable()),
        "b": st.none() | st.booleans(),
    }
)
INSERT = "INSERT INTO typed (n, i, f, t, b, j) VALUES (%(n)s, %(i)s, %(f)s, %(t)s, %(b)s, %(j)s)"
READ = "SELECT i, f, t, b, j FROM typed WHERE n = %(n)s"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ROW, min_size=PREPARE_AFTER + 2, max_size=PREPARE_AFTER + 4))
def test_values_read_back_as_they_were_written_and_prepared_or_not(
    typed: psycopg.Connection[Any], rows: list[dict[str, Any]]
) -> None:
    cur = client_cursor(typed)
    sent: list[str] = []
    typed.execute("BEGIN")
    try:
        for n, row in enumerate(rows):
            params = {**row, "n": n + 10, "j": '{"k": [1, "two"]}'}
            [insert] = bound(cur, INSERT, params)
            [read] = bound(cur, READ, {"n": n + 10})
            sent += [insert, read]
            cur.execute(f"{insert}; {read}")
            cur.nextset()
            got = cur.fetchone()
            assert got.i == row["i"] and got.t == row["t"] and got.b == row["b"]
            assert got.f == row["f"] and (
                got.f is None or math.copysign(1, got.f) == math.copysign(1, row["f"])
            )
            assert got.j == {"k": [1, "two"]}
    finally:
        typed.execute("ROLLBACK")
    # Written in full at first, then prepared once written often enough on this session
    # (a test before this one may have counted the statements up already).
    assert any(s.startswith("EXECUTE dn_p") for s in sent)
    assert sent[-1].startswith("EXECUTE dn_p")


def test_a_statement_postgresql_will_not_prepare_stays_text_and_the_transaction_goes_on(
    typed: psycopg.Connection[Any],
) -> None:
    cur = client_cursor(typed)
    sql = "SELECT %(a)s IS NULL AS unknown_type"  # PostgreSQL cannot type $1 here
    typed.execute("BEGIN; INSERT INTO typed (n) VALUES (1)")
    for _ in range(PREPARE_AFTER + 2):
        [text] = bound(cur, sql, {"a": None})
        assert not text.startswith("EXECUTE")
        assert cur.execute(text).fetchone().unknown_type is True
    assert typed.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert typed.execute("SELECT count(*) FROM typed").fetchone()[0] == 2  # still there
    typed.execute("COMMIT")
    # Nor is what PREPARE does not take tried (SET, here inside a transaction).
    typed.execute("BEGIN")
    for _ in range(PREPARE_AFTER + 2):
        assert bound(cur, "SET LOCAL lock_timeout = 50", None) == ["SET LOCAL lock_timeout = 50"]
    typed.execute("ROLLBACK")


@pytest.mark.parametrize(
    ("sql", "warm", "value", "expected"),
    [
        # A float against an integer column: compared as a float in the statement (2 <
        # 2.5); as an argument of an integer parameter it would be rounded to 2 first.
        ("SELECT n FROM typed WHERE n < %(x)s ORDER BY n", 3, 2.5, [2]),
        # An integer past the parameter's type: no row in the statement; prepared, an
        # "integer out of range" error.
        ("SELECT n FROM typed WHERE n = %(x)s", 2, 2**40, []),
        # A parameter PostgreSQL types as text: the number stays a number.
        ("SELECT %(x)s AS n", "two", 5, [5]),
        # A boolean where an integer is expected is refused in the statement, as it was.
        ("SELECT n FROM typed WHERE n = %(x)s", 2, True, psycopg.errors.UndefinedFunction),
    ],
)
def test_a_value_that_does_not_fit_the_prepared_parameter_is_written_in_full(
    typed: psycopg.Connection[Any], sql: str, warm: Any, value: Any, expected: Any
) -> None:
    cur = client_cursor(typed)
    for _ in range(PREPARE_AFTER + 1):  # prepared on this connection, with values that fit
        [text] = bound(cur, sql, {"x": warm})
        cur.execute(text)
    assert text.startswith("EXECUTE")
    [text] = bound(cur, sql, {"x": value})
    assert not text.startswith("EXECUTE")
    if isinstance(expected, type):
        with pytest.raises(expected):
            cur.execute(text)
        return
    assert [row.n for row in cur.execute(text).fetchall()] == expected


def test_an_integer_for_a_float_parameter_goes_prepared(typed: psycopg.Connection[Any]) -> None:
    cur = client_cursor(typed)
    typed.execute("INSERT INTO typed (n, f) VALUES (3, 3.0), (4, 9007199254740992), (5, 0.5)")
    sql = "SELECT n FROM typed WHERE f = %(x)s"
    for _ in range(PREPARE_AFTER + 1):
        [text] = bound(cur, sql, {"x": 0.5})
        assert [r.n for r in cur.execute(text).fetchall()] == [5]
    for value, expected in ((3, [3]), (2**53, [4]), (2**53 + 1, [4]), (7, [])):
        [text] = bound(cur, sql, {"x": value})
        assert text.startswith("EXECUTE")
        assert [r.n for r in cur.execute(text).fetchall()] == expected
        [full] = bound(client_cursor_unprepared(typed), sql, {"x": value})
        assert [r.n for r in cur.execute(full).fetchall()] == expected  # as in full


def client_cursor_unprepared(c: psycopg.Connection[Any]) -> Any:
    cur = client_cursor(c)
    cur.prepared = None
    return cur


def _prepared_names(c: psycopg.Connection[Any]) -> set[str]:
    rows = c.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return {r[0] for r in rows if r[0].startswith("dn_p")}


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    s = Store(pg_url)
    s.open()
    with s.engine.begin() as c:
        c.execute(sa.text("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"))
        c.execute(sa.text("INSERT INTO kv VALUES ('a', 'one'), ('b', 'two')"))
    try:
        yield s
    finally:
        s.close()


GET = Q("SELECT k, v FROM kv WHERE k = :k")


def _get(tx: StoreTx, k: str) -> Any:
    return tx._q(GET, {"k": k}).fetchone().v


def _prepared_on_the_store(store: Store) -> set[str]:
    with store.engine.connect() as c:  # (the pool hands out the connection used last)
        return _prepared_names(c.connection.driver_connection)  # type: ignore[arg-type]


def test_a_session_that_lost_its_prepared_statements_runs_the_transaction_again(
    store: Store,
) -> None:
    for _ in range(PREPARE_AFTER + 2):
        assert store.run_sync(_get, "a") == "one"
    assert _prepared_on_the_store(store)
    with store.engine.connect() as c:  # someone ends them (DISCARD ALL, a pooler)
        c.exec_driver_sql("DEALLOCATE ALL")
    assert store.run_sync(_get, "b") == "two"  # on a new connection
    assert store.read_sync(_get, "a") == "one"


def test_a_rolled_back_transaction_keeps_the_prepared_statements(store: Store) -> None:
    """Nothing the store does on its connections ends its prepared statements: a change
    that fails after its first query is rolled back, and the next transaction runs on
    the same session with what was prepared there (psycopg, which would send DEALLOCATE
    ALL after a rollback if it had prepared something of its own, prepares nothing)."""

    def fails(tx: StoreTx) -> None:
        _get(tx, "a")
        tx._q(Q("SELECT 1 AS one"))  # (not prepared: no parameters after the first)
        raise RuntimeError("the change fails after its first query")

    def get_on(tx: StoreTx, k: str) -> tuple[Any, int]:
        pid = tx._q(Q("SELECT pg_backend_pid() AS pid")).fetchone().pid
        return _get(tx, k), pid

    for _ in range(PREPARE_AFTER + 2):
        store.run_sync(_get, "a")
        store.run_sync(lambda tx: tx._q(Q("SELECT 1 AS one")).fetchone())
    with store.engine.connect() as c:  # what the pool's other users run (warm, say)
        for _ in range(8):
            c.exec_driver_sql("SELECT 1")  # (psycopg would prepare it: it does not)
        c.rollback()
    before = _prepared_on_the_store(store)
    assert before
    _, pid = store.run_sync(get_on, "a")
    with pytest.raises(RuntimeError, match="fails after"):
        store.run_sync(fails)
    assert _prepared_on_the_store(store) == before
    assert store.run_sync(get_on, "b") == ("two", pid)  # same session: not run again


def test_prepare_threshold_none_leaves_the_listen_connection_alone(pg_url: str) -> None:
    store = Store(f"{pg_url}&prepare_threshold=none")
    store.open()
    try:
        listener = store._listener
        assert listener is not None
        deadline = time.monotonic() + 10
        while listener.connections < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert listener.connections >= 1
    finally:
        store.close()


def test_a_table_changed_under_a_prepared_statement_runs_the_transaction_again(
    store: Store,
) -> None:
    for _ in range(PREPARE_AFTER + 2):
        assert store.run_sync(_get, "a") == "one"
    with store.engine.begin() as c:  # (a migration from another process, say)
        c.execute(sa.text("ALTER TABLE kv ALTER COLUMN v TYPE VARCHAR(40)"))
    assert store.run_sync(_get, "a") == "one"


def test_the_errors_of_a_lost_prepared_statement_are_taken_as_a_lost_connection(
    conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(psycopg.Error) as gone:
        conn.execute("EXECUTE dn_pmissing")
    assert classify(gone.value) == LOST
    with pytest.raises(psycopg.Error) as other:
        conn.execute("EXECUTE someone_elses")
    assert classify(other.value) is None  # not the store's: a bug to report


def test_prepare_threshold_none_in_the_url_turns_preparing_off(pg_url: str) -> None:
    store = Store(f"{pg_url}&prepare_threshold=none")
    store.open()
    try:
        with store.engine.begin() as c:
            c.execute(sa.text("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"))
            c.execute(sa.text("INSERT INTO kv VALUES ('a', 'one')"))
        for _ in range(PREPARE_AFTER + 3):
            assert store.run_sync(_get, "a") == "one"
        assert _prepared_on_the_store(store) == set()
    finally:
        store.close()


@pytest.mark.parametrize("value", ["lots", "-1", "1.5"])
def test_a_bad_prepare_threshold_in_the_url_says_what_to_write(value: str) -> None:
    with pytest.raises(DatabaseURLError, match="prepare_threshold=none"):
        create_engine(parse_url(f"{PG_URL}?prepare_threshold={value}"), fsync=False)


def test_a_prepared_statement_name_is_the_same_for_the_same_text() -> None:
    name = f"x{uuid.uuid4().hex}"
    one = literals._template(f"SELECT %(a)s FROM {name}")
    two = literals._template(f"SELECT %(b)s FROM {name}")  # same statement, $1 either way
    assert one is not None and two is not None
    assert one.name == two.name and one.prepare_text == f"SELECT $1 FROM {name}"
    repeated = literals._template("SELECT %(a)s, %(b)s, %(a)s")
    assert repeated is not None and repeated.prepare_text == "SELECT $1, $2, $1"


def test_a_prepare_that_waits_too_long_for_a_lock_is_tried_again_later(
    typed: psycopg.Connection[Any], pg_url: str
) -> None:
    """PREPARE reads the table's definition, which waits behind a lock another session
    holds (a migration's, say): past the transaction's lock_timeout it fails, the
    transaction goes on, and the statement is prepared once the lock is gone."""
    schema = pg_url.rsplit("%3D", 1)[1]
    template = literals._template(f"SELECT t FROM typed WHERE n = %(n)s AND '{uuid.uuid4()}' <> ''")
    assert template is not None
    template.uses = PREPARE_AFTER
    prepared = literals.Prepared()
    with psycopg.connect(RAW_URL, options=f"-csearch_path={schema}") as other:
        other.execute("LOCK TABLE typed IN ACCESS EXCLUSIVE MODE")
        typed.execute("BEGIN; SET LOCAL lock_timeout = 20")
        assert prepared.prepare(typed, template) is False
        assert typed.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert template.preparable  # not given up on
        other.rollback()
    assert prepared.prepare(typed, template) is True
    assert typed.execute(f"EXECUTE {template.name}(1)").fetchall() == []
    typed.execute("ROLLBACK")
