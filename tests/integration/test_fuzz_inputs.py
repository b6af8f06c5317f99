"""Fuzzing the engine's inputs (issue 14, item 5): list filters, CLI arguments, payloads.

Three kinds of hypothesis-generated input, each both random and built from the real
pieces of its grammar (field names, operators, quotes, option names, encodings) plus the
usual trouble (NUL, lone surrogates, huge and non-finite numbers, deep nesting, very long
strings):

- **list filters**: ``Client.list_workflows(query, limit=, page_size=, next_page_token=)``
  against a database holding a few runs, on SQLite and PostgreSQL. Either runs come back
  (and, for a filter whose meaning is clear, exactly the runs it selects) or
  ``InvalidArgumentError``; never another exception, and no row of any table changes.
- **CLI arguments**: ``engine.cli.main(argv)`` against a SQLite file with a couple of
  runs. It returns 0, 1 or 2, says why on stderr when not 0, and never reports an
  "unexpected" error (how ``main`` reports an exception it has no message for). The
  read-only commands leave the database as it was; the state-changing ones are only given
  arguments that fail validation, and then leave it as it was too.
- **payloads**: ``Payload.from_json``, ``payloads_from_json`` and
  ``DataConverter.default.from_payloads_json`` / ``from_payload`` on generated payload
  JSON. Either a value comes back (the value written, for a well-formed ``json/plain``
  payload) or the documented ``ValueError`` (``TypeError`` too when a type hint asks
  for a type the value cannot be), never ``RecursionError``, ``KeyError``, ...

Hypothesis runs inside each test (an inner ``@given`` function called once), so the
database, the client and the event loop are set up once per test and shared by every
example: a refused input changes nothing, and the snapshot taken after each example
proves it. Deterministic (``derandomize=True``) and bounded in examples.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import dataclasses
import enum
import io
import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Client, DataConverter, WorkflowExecutionStatus
from engine.cli import main
from engine.common import RawValue
from engine.converter import Payload, payloads_from_json
from engine.exceptions import InvalidArgumentError

#: Every property's settings: a fixed seed, no deadline (``@settings(BASE, max_examples=N)``).
BASE = settings(
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Text no column may hold, and text that strains a parser.
NASTY = ["\x00", "\ud800", "x\udfffy", "x" * 5000, "é€😀", "'", '"', "\\", "%", "_", ""]


class Snapshot:
    """Every row of every engine table (``dn_*``), to see that nothing changed: call it."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url)
        with self.engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
        self.tables = sorted(t for t in names if t.startswith("dn_"))
        assert {"dn_executions", "dn_history_events"} <= set(self.tables), self.tables

    def __call__(self) -> dict[str, list[str]]:
        with self.engine.connect() as conn:
            return {
                name: sorted(map(repr, conn.execute(sa.text(f"SELECT * FROM {name}"))))
                for name in self.tables
            }

    def close(self) -> None:
        self.engine.dispose()


# -- list filters ---------------------------------------------------------------------------

#: The runs the listing tests start: (workflow id, type, task queue); the second is
#: terminated, the others stay running (no worker polls their queues).
RUNS = [
    ("order-1", "Order", "tq-a"),
    ("order-2", "Order", "tq-b"),
    ("refund é'1", "Refund", "tq-a"),
    ("R", "order-1", "tq b"),
]
FIELDS = {  # filter attribute -> attribute of a listed run
    "WorkflowId": "id",
    "RunId": "run_id",
    "WorkflowType": "workflow_type",
    "TaskQueue": "task_queue",
    "ExecutionStatus": "status",
}
#: Status spellings the filter takes: Temporal's names, and its enum's full names.
STATUSES = {
    "Running": WorkflowExecutionStatus.RUNNING,
    "WORKFLOW_EXECUTION_STATUS_RUNNING": WorkflowExecutionStatus.RUNNING,
    "Terminated": WorkflowExecutionStatus.TERMINATED,
    "Completed": WorkflowExecutionStatus.COMPLETED,
    "Failed": WorkflowExecutionStatus.FAILED,
    "Canceled": WorkflowExecutionStatus.CANCELED,
    "ContinuedAsNew": WorkflowExecutionStatus.CONTINUED_AS_NEW,
    "TimedOut": WorkflowExecutionStatus.TIMED_OUT,
}
OTHER_FIELDS = ["StartTime", "CloseTime", "workflowid", "Workflow Id", "CustomKeywordField", ""]
OPERATORS = ["!=", ">", "<", ">=", "==", "LIKE", "IN", "IS", "STARTS_WITH", ""]
JOINERS = ["OR", "or", "AND AND", "&&", ",", "", "NOT", "AND NOT"]
SPACE = st.sampled_from([" ", "  ", "\t", "\n"])
# Values that are unambiguous inside quotes: no quote or backslash (an escape), storable.
PLAIN_VALUES = st.sampled_from(
    [v for run in RUNS for v in run if "'" not in v] + ["", "nope", "%", "_"]
) | st.text(st.characters(codec="utf-8", exclude_characters="'\"\\\x00"), max_size=12).filter(
    lambda s: " and " not in f" {s.lower()} " and not any(c.isspace() for c in s)
)


@st.composite
def clear_filters(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    """A filter the documented grammar reads, with the (field, value) terms it holds."""
    terms: list[tuple[str, str]] = []
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(sorted(FIELDS)))
        if field == "ExecutionStatus":
            value = draw(st.sampled_from(sorted(STATUSES)))
        elif field == "RunId":
            value = draw(st.sampled_from(["RUN0", "RUN1", "RUN2", "RUN3", "nope"]))
        else:
            value = draw(PLAIN_VALUES)
        quote = draw(st.sampled_from("'\""))
        parts.append(
            draw(st.sampled_from(["", " "]))
            + field
            + draw(SPACE | st.just(""))
            + "="
            + draw(SPACE | st.just(""))
            + quote
            + value
            + quote
        )
        terms.append((field, value))
    joined = parts[0]
    for part in parts[1:]:
        joined += draw(SPACE) + draw(st.sampled_from(["AND", "and", "And"])) + draw(SPACE) + part
    return joined, terms


@st.composite
def murky_filters(draw: st.DrawFn) -> str:
    """Text built from the grammar's pieces and beyond it: unknown fields and operators,
    OR and NOT, parentheses, unbalanced quotes, NUL, surrogates, long values."""
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        field = draw(st.sampled_from(sorted(FIELDS) + OTHER_FIELDS))
        op = draw(st.sampled_from(["=", "=", *OPERATORS]))
        value = draw(PLAIN_VALUES | st.sampled_from(NASTY) | st.text(max_size=10))
        quote = draw(st.sampled_from(["'", '"', "", "'", "`"]))
        end = draw(st.sampled_from([quote, quote, "", "'", '"']))
        term = f"{field}{draw(SPACE)}{op}{draw(SPACE)}{quote}{value}{end}"
        if draw(st.booleans()):
            term = draw(st.sampled_from(["(", "((", ""])) + term + draw(st.sampled_from([")", ""]))
        pieces.append(term)
    joined = pieces[0]
    for piece in pieces[1:]:
        joiner = draw(st.sampled_from(["AND", *JOINERS]))
        joined += draw(SPACE) + joiner + draw(SPACE) + piece
    return joined


any_filter = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.sampled_from([*NASTY, "   ", "AND", "=", "''", "WorkflowId", "WorkflowId ="]),
    murky_filters(),
    clear_filters().map(lambda c: c[0]),
)


@pytest.fixture
def listing(db_url: str) -> Iterator[tuple[asyncio.Runner, Client, dict[str, Any], Snapshot]]:
    """An event loop, a client and the runs of :data:`RUNS` (run ids as RUN0..RUN3)."""
    with asyncio.Runner() as runner:
        client = runner.run(Client.connect(db_url))
        try:
            run_ids = {}
            for i, (wid, wtype, queue) in enumerate(RUNS):
                handle = runner.run(client.start_workflow(wtype, id=wid, task_queue=queue))
                run_ids[f"RUN{i}"] = handle.result_run_id
            runner.run(client.get_workflow_handle("order-2").terminate("fuzz"))
            snapshot = Snapshot(db_url)
            yield runner, client, run_ids, snapshot
            snapshot.close()
        finally:
            runner.run(client.close())


def _list(runner: asyncio.Runner, client: Client, query: str | None, **kwargs: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in client.list_workflows(query, **kwargs)]

    return runner.run(go())


def _expected(
    everything: list[Any], terms: list[tuple[str, str]], run_ids: dict[str, str]
) -> set[str]:
    """The run ids a clear filter selects, worked out without the engine's parser."""
    selected = set()
    for e in everything:
        ok = True
        for field, value in terms:
            attr = getattr(e, FIELDS[field])
            if field == "ExecutionStatus":
                ok &= attr == STATUSES[value]
            elif field == "RunId":
                ok &= attr == run_ids.get(value, value)
            else:
                ok &= attr == value
        if ok:
            selected.add(e.run_id)
    return selected


def test_list_filters_return_runs_or_invalid_argument(listing: Any) -> None:
    runner, client, run_ids, snapshot = listing
    everything = _list(runner, client, None)
    assert len(everything) == len(RUNS)
    before = snapshot()

    @settings(BASE, max_examples=100)
    @given(any_filter | clear_filters().map(lambda c: c[0]), st.sampled_from([1, 2, 1000]))
    def prop(query: str | None, page_size: int) -> None:
        if query is not None:
            for key, run_id in run_ids.items():
                query = query.replace(key, run_id)
        try:
            found = _list(runner, client, query, page_size=page_size)
        except InvalidArgumentError as err:
            assert str(err), query
            outcomes["refused"] += 1
        else:
            outcomes["listed" if found else "none"] += 1
            assert {e.run_id for e in found} <= {e.run_id for e in everything}, query
            assert len(found) == len({e.run_id for e in found}), query  # pages never repeat
        assert snapshot() == before, query

    outcomes = collections.Counter[str]()
    prop()
    assert outcomes["refused"] and outcomes["listed"] and outcomes["none"], outcomes


def test_clear_list_filters_select_exactly_their_runs(listing: Any) -> None:
    """A filter of ``Field = 'value'`` terms joined with AND selects the runs that match
    every term: none when two terms ask one field for different values (as Temporal)."""
    runner, client, run_ids, snapshot = listing
    everything = _list(runner, client, None)
    before = snapshot()

    @settings(BASE, max_examples=80)
    @given(clear_filters())
    def prop(case: tuple[str, list[tuple[str, str]]]) -> None:
        query, terms = case
        for key, run_id in run_ids.items():
            query = query.replace(key, run_id)
        found = _list(runner, client, query)
        assert {e.run_id for e in found} == _expected(everything, terms, run_ids), query
        assert snapshot() == before, query

    prop()


def _listing_key(item: tuple[Any, ...]) -> tuple[Any, ...]:
    is_open, closed, started, run_id = item
    return (is_open, closed or started, started, run_id)


def _token(data: Any) -> bytes:
    text = json.dumps(data).replace('"@NaN@"', "NaN").replace('"@big@"', "1" + "0" * 400)
    return base64.urlsafe_b64encode(text.encode())


page_tokens = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.builds(
        lambda start, run, extra: _token({"v": 1, "start": start, "run": run, **extra}),
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(2**70), 2**70),
            st.sampled_from(["@NaN@", "@big@", "1", None, [], {}]),
        ),
        st.one_of(st.sampled_from(NASTY), st.text(max_size=8), st.integers(), st.none()),
        st.dictionaries(st.sampled_from(["v", "x"]), st.integers(0, 3), max_size=1),
    ),
    st.builds(
        lambda after: _token({"v": 2, "after": after}),
        st.one_of(
            st.lists(
                st.one_of(
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.integers(-(2**70), 2**70),
                    st.sampled_from([*NASTY, "@NaN@", "@big@", None, [], {}, True]),
                ),
                max_size=4,
            ),
            st.sampled_from(["x", None, {}, 3]),
        ),
    ),
    st.sampled_from([_token([]), _token("x"), _token({}), _token({"start": 1}), b"===="]),
)
EXTREME_INTS = [0, -1, 1, 2, 2**31 - 1, 2**31, 2**53, 2**63 - 1, 2**63, 2**64, 2**70, -(2**63)]


def test_list_paging_arguments_return_runs_or_invalid_argument(listing: Any) -> None:
    """``limit``, ``page_size`` and ``next_page_token``: extreme numbers and forged tokens
    (whose run id holds NUL or a surrogate, whose time is NaN or 1e400, ...)."""
    runner, client, _, snapshot = listing
    before = snapshot()
    numbers = st.sampled_from(EXTREME_INTS) | st.integers(-5, 10) | st.integers(1, 5)
    # Mostly no token and no filter, so that the numbers alone decide (some listings work).
    tokens = st.one_of(st.none(), st.none(), page_tokens)
    queries = st.one_of(st.none(), st.none(), any_filter)

    @settings(BASE, max_examples=100)
    @given(st.none() | numbers, numbers, tokens, queries)
    def prop(limit: int | None, page_size: int, token: bytes | None, query: str | None) -> None:
        try:
            found = _list(
                runner, client, query, limit=limit, page_size=page_size, next_page_token=token
            )
        except InvalidArgumentError as err:
            assert str(err)
            outcomes["refused"] += 1
        else:
            outcomes["listed" if found else "none"] += 1
            assert limit is None or len(found) <= limit
            # Temporal's order: open runs first, then closed ones; newest first in each.
            order = [(e.close_time is None, e.close_time, e.start_time, e.run_id) for e in found]
            assert order == sorted(order, key=_listing_key, reverse=True), "out of order"
        assert snapshot() == before, (limit, page_size, token, query)

    outcomes = collections.Counter[str]()
    prop()
    assert outcomes["refused"] and outcomes["listed"], outcomes


# -- CLI arguments --------------------------------------------------------------------------

WF_MODULE = "tests.integration.cli_workflows"
#: Values no id, name or path may hold: every command refuses them before doing anything.
INVALID_TEXT = ["\x00", "a\x00b", "\ud800", "x\udcffy", "", "x" * 1001]
JUNK = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e308",
    "1e-320",
    "99999999999999999999999999",
    "-99999999999999999999",
    "0x10",
    "1_000",
    " ",
    "é€😀",
    "\x00",
    "\ud800",
    "x" * 3000,
    "--",
    "--nope",
    "-Z",
    "--limit=",
    "--timeout=nan",
    "-h",
]
# Random tokens never start with "-": argparse would read "--d" as an abbreviation of
# --db, and a random --db could point anywhere. Option names come from the lists above.
junk_text = st.text(max_size=12).filter(lambda s: not s.startswith("-"))
junk = st.sampled_from(JUNK) | junk_text
JSON_INPUTS = ['"Ada"', "1", "NaN", "[1, 2]", "{oops", "1" * 5000, "[" * 5000, "'x'", ""]
NOT_JSON = JSON_INPUTS[4:]


#: Read-only commands that succeed against the fixture's database and files.
WORKING = [
    ("workflow", "list"),
    ("workflow", "list", "--query", "WorkflowId = 'w-done'", "--output", "json"),
    ("workflow", "list", "-q", "ExecutionStatus = 'Running'", "--limit", "1"),
    ("workflow", "describe", "w-running"),
    ("workflow", "describe", "w-done", "--output", "json"),
    ("workflow", "show", "w-done"),
    ("workflow", "show", "w-running", "-o", "json"),
    ("history", "export", "w-done", "--format", "json"),
    ("history", "export", "w-done", "w-running", "--format", "csv"),
    ("history", "export", "w-running", "--format", "parquet", "--output", "-"),
    ("replay", "good.json", "--workflows", f"{WF_MODULE}:GreetWF"),
    ("workflow", "--help"),
]


@st.composite
def read_only_argv(draw: st.DrawFn) -> list[str]:
    """Arguments of a command that never writes to the database: one that works (now and
    then), or one built from the command's options with good and junk values."""
    if draw(st.integers(0, 3)) == 0:
        return list(draw(st.sampled_from(WORKING)))
    ids = st.sampled_from(["w-running", "w-done"]) | st.sampled_from(["nope", *INVALID_TEXT]) | junk
    command = draw(
        st.sampled_from(["list", "describe", "show", "query", "export", "replay", "backup", "top"])
    )
    argv: list[str]
    if command == "list":
        argv = ["workflow", "list"]
        for _ in range(draw(st.integers(0, 3))):
            option = draw(st.sampled_from(["--query", "-q", "--limit", "--output", "-o"]))
            value = draw(any_filter | junk)
            argv += [option, "" if value is None else value]
    elif command in ("describe", "show"):
        argv = ["workflow", command, draw(ids)]
        if draw(st.booleans()):
            argv += ["--run-id", draw(ids)]
        if draw(st.booleans()):
            argv += ["--output", draw(st.sampled_from(["json", "table", "yaml"]) | junk)]
    elif command == "query":
        # A query waits for a worker for --timeout seconds: valid timeouts stay tiny.
        argv = ["workflow", "query", draw(ids), "--name", draw(st.sampled_from(["q"]) | junk)]
        argv += ["--timeout", draw(st.sampled_from(["0.01", "1e-9"]) | st.sampled_from(JUNK))]
        for _ in range(draw(st.integers(0, 2))):
            argv += ["--input", draw(st.sampled_from(JSON_INPUTS) | junk)]
    elif command == "export":
        argv = ["history", "export", *draw(st.lists(ids, min_size=1, max_size=3))]
        argv += ["--format", draw(st.sampled_from(["json", "csv", "parquet", "xml"]))]
        # Output paths stay in the test's directory (the cwd): files, not the database.
        output = st.sampled_from(["-", "out.json", "outdir", "missing/x.json", *INVALID_TEXT])
        if draw(st.booleans()):
            argv += ["--output", draw(output)]
    elif command == "replay":
        histories = st.sampled_from(
            [
                *(f"{n}.json" for n in ("good", "junk", "deep", "binary", "empty", "missing")),
                "folder",
                *INVALID_TEXT,
            ]
        )
        # --workflows imports modules: only these (a random name could be any module).
        specs = st.sampled_from(
            [
                *(f"{WF_MODULE}:{name}" for name in ("GreetWF", "Nope", "greet")),
                *("engine:Client", "zz_no_such_module:X", "bad", ":X", "x:", ".rel:X"),
                *("a\x00:Y", "\ud800:Y"),
            ]
        )
        argv = ["replay", *draw(st.lists(histories | junk_text, min_size=1, max_size=3))]
        argv += ["--workflows", *draw(st.lists(specs, min_size=1, max_size=2))]
    elif command == "backup":
        # Writes a copy elsewhere (in the cwd), never to the database itself.
        dest = st.sampled_from(["copy.db", "good.json", "missing/copy.db", *INVALID_TEXT])
        argv = ["db", "backup", draw(dest | junk_text)]
        if draw(st.booleans()):
            argv.append("--force")
    else:
        argv = draw(st.lists(junk, max_size=3))  # no command at all, or an unknown one
    if draw(st.integers(0, 4)) == 0:  # a stray token somewhere (not after --workflows)
        at = draw(st.integers(0, len(argv) if command != "replay" else 1))
        argv.insert(at, draw(junk))
    return argv


@st.composite
def refused_writes(draw: st.DrawFn) -> list[str]:
    """A state-changing command (start, signal, cancel, terminate) with at least one
    argument it must refuse before writing: an id or name holding NUL or a surrogate, an
    empty or over-long one, or an --input that is not JSON."""
    bad_text = st.sampled_from(INVALID_TEXT)
    command = draw(st.sampled_from(["start", "signal", "cancel", "terminate"]))
    good = {"id": "w-running", "name": "s", "type": "T", "queue": "q"}
    fields = ["id", "run"] + (["name"] if command == "signal" else [])
    if command == "start":
        fields = ["id", "type", "queue"]
    bad = draw(st.sampled_from([*fields, "input"] if command in ("start", "signal") else fields))
    values = {k: draw(bad_text) if k == bad else v for k, v in good.items()}
    run_id = draw(bad_text) if bad == "run" else None
    inputs = [draw(st.sampled_from(NOT_JSON))] if bad == "input" else []
    if command == "start":
        argv = ["workflow", "start", "--type", values["type"], "--task-queue", values["queue"]]
        argv += ["--workflow-id", values["id"]]
    else:
        argv = ["workflow", command, values["id"]]
        if command == "signal":
            argv += ["--name", values["name"]]
        if run_id is not None:
            argv += ["--run-id", run_id]
        if command in ("cancel", "terminate") and draw(st.booleans()):
            argv += ["--reason", draw(st.sampled_from(["why", "é"]))]
    for text in inputs:
        argv += ["--input", text]
    return argv


@pytest.fixture
def cli_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Snapshot]]:
    """A SQLite database with a running and a terminated run, as $DURABLE_DATABASE_URL,
    and the files ``durable replay`` reads, in the current directory (``tmp_path``)."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def create() -> str:
        async with await Client.connect(url) as client:
            await client.start_workflow("GreetWF", "Ada", id="w-running", task_queue="nobody")
            done = await client.start_workflow("GreetWF", "Bob", id="w-done", task_queue="nobody")
            await done.terminate("fuzz")
            return (await done.fetch_history()).to_json()

    history = asyncio.run(create())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DURABLE_DATABASE_URL", url)
    (tmp_path / "good.json").write_text(history)
    (tmp_path / "junk.json").write_text('{"events": [{"eventId": "x"}]}')
    (tmp_path / "deep.json").write_text("[" * 100_000)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00junk")
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "folder").mkdir()
    (tmp_path / "outdir").mkdir()
    snapshot = Snapshot(url)
    yield url, snapshot
    snapshot.close()


def _run_cli(argv: list[str]) -> tuple[int, str]:
    """``main(argv)``, its stdout and stderr captured as a terminal's streams take text:
    stdout strict UTF-8 (with a binary buffer, for Parquet), stderr backslash-escaping
    what UTF-8 cannot hold (Python's stderr does: argparse echoes bad arguments)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    err.flush()
    return code, err.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def _assert_reported(code: Any, err: str, argv: list[str]) -> None:
    assert isinstance(code, int) and code in (0, 1, 2), (code, argv)
    assert "unexpected" not in err and "Traceback" not in err, (argv, err)
    if code == 2:
        assert "error: " in err, (argv, err)


def test_cli_arguments_exit_with_a_message_and_read_only_commands_change_nothing(
    cli_db: tuple[str, Snapshot],
) -> None:
    url, snapshot = cli_db
    before = snapshot()

    @settings(BASE, max_examples=100)
    @given(read_only_argv(), st.sampled_from(["env", "--db", "sub --db", "bad --db"]))
    def prop(argv: list[str], where: str) -> None:
        # The database comes from $DURABLE_DATABASE_URL, or --db before or after the
        # command; "bad --db" is one that does not exist (refused, never created).
        if where == "--db":
            argv = ["--db", url, *argv]
        elif where == "sub --db" and argv[:1] in (["workflow"], ["history"], ["db"], ["replay"]):
            argv = [argv[0], "--db", url, *argv[1:]]
        elif where == "bad --db":
            argv = ["--db", "sqlite:///no/such/dir/x.db", *argv]
        code, err = _run_cli(argv)
        _assert_reported(code, err, argv)
        assert snapshot() == before, argv
        codes[code] += 1

    codes = collections.Counter[int]()
    prop()
    assert codes[0] >= 10 and codes[2] >= 10, codes  # both successes and errors
    assert not Path("no").exists()


def test_cli_refuses_bad_arguments_of_state_changing_commands_and_changes_nothing(
    cli_db: tuple[str, Snapshot],
) -> None:
    _, snapshot = cli_db
    before = snapshot()

    @settings(BASE, max_examples=50)
    @given(refused_writes())
    def prop(argv: list[str]) -> None:
        code, err = _run_cli(argv)
        _assert_reported(code, err, argv)
        assert code == 2, (argv, err)
        assert snapshot() == before, argv

    prop()


# -- payloads -------------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass
class Point:
    x: int
    y: list[str] = dataclasses.field(default_factory=list)


HINTS: list[Any] = [
    str,
    int,
    float,
    bytes,
    list[int],
    dict[str, int],
    dict[int, str],
    dict[Color, int],
    datetime,
    uuid.UUID,
    Point,
    list[Point],
    Color,
    tuple[int, str],
    tuple[int, ...],
    set[int],
    frozenset[str],
    int | None,
    Point | str,
    RawValue,
]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
ENCODINGS = [b"json/plain", b"binary/null", b"binary/plain", b"json/protobuf", b"", b"JSON/PLAIN"]
BAD_JSON = [
    b"{oops",
    b"@deep-list@",  # see _deep: markers keep a failing example's report short
    b"@deep-dict@",
    b"1" * 5000,
    b"\xff\xfe\xfa",
    b"\x00",
    b'"\\ud800"',
    b"",
    b"NaN",
    b"[1,]",
]
not_base64 = st.sampled_from(["é", "a", "ab=c", "====", "YQ", "YQ-_", " YQ== ", "\x00"]) | st.text(
    max_size=8
)
junk_json = st.sampled_from([None, 1, -1.5, True, [], {}, ["YQ=="], {"a": "YQ=="}])


@st.composite
def payload_json(draw: st.DrawFn) -> tuple[Any, Any]:
    """A payload's JSON, and the value its data holds when it is a well-formed json/plain
    payload (else ``NotImplemented``). Half are in Temporal's shape (a known encoding,
    base64 everywhere) with good or bad data; the rest have random metadata, encodings
    and data, base64 or not."""
    value: Any = NotImplemented
    if draw(st.booleans()):  # Temporal's shape: the data is what varies
        encoding = draw(st.sampled_from([b"json/plain", b"binary/null", b"binary/plain"]))
        out: dict[str, Any] = {"metadata": {"encoding": _b64(encoding)}}
        kind = draw(st.sampled_from(["json", "bad", "bad", "bytes", "none"]))
        if kind == "json":
            value = draw(json_values)
            out["data"] = _b64(json.dumps(value).encode())
        elif kind == "bad":
            out["data"] = _b64(draw(st.sampled_from(BAD_JSON)))
        elif kind == "bytes":
            out["data"] = _b64(draw(st.binary(max_size=20)))
        return out, value if encoding == b"json/plain" else NotImplemented
    if draw(st.integers(0, 7)) == 0:
        return draw(junk_json | st.text(max_size=4)), NotImplemented  # not an object at all
    metadata: Any = {}
    encoding = draw(st.sampled_from(ENCODINGS) | st.binary(max_size=6))
    how = draw(st.sampled_from(["b64", "urlsafe", "junk", "missing"]))
    if how == "b64":
        metadata["encoding"] = _b64(encoding)
    elif how == "urlsafe":
        metadata["encoding"] = base64.urlsafe_b64encode(encoding).decode().rstrip("=")
    elif how == "junk":
        metadata["encoding"] = draw(not_base64 | junk_json)
    for key in draw(st.lists(st.text(max_size=6), max_size=2)):
        metadata[key] = draw(st.binary(max_size=6).map(_b64) | not_base64 | junk_json)
    if draw(st.integers(0, 5)) == 0:
        metadata = draw(junk_json | st.text(max_size=3))
    out = {} if how == "missing" and not metadata else {"metadata": metadata}
    data = st.sampled_from(BAD_JSON) | st.binary(max_size=20) | json_values.map(json.dumps)
    kind = draw(st.sampled_from(["b64", "urlsafe", "junk", "missing"]))
    if kind in ("b64", "urlsafe"):
        raw = draw(data)
        raw = raw.encode() if isinstance(raw, str) else raw
        coded = _b64(raw) if kind == "b64" else base64.urlsafe_b64encode(raw).decode()
        out["data"] = coded if kind == "b64" else coded.rstrip("=")
    elif kind == "junk":
        out["data"] = draw(not_base64 | junk_json)
    return out, NotImplemented


#: Deeper than any recursion limit (Hypothesis raises Python's by 2,000 while it runs).
DEEP = 50_000


def _deep(payload: Any) -> Any:
    """``payload`` with a marker's data replaced by JSON nested :data:`DEEP` levels."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), str):
        return payload
    for marker, text in ((b"@deep-list@", b"[" * DEEP), (b"@deep-dict@", b'{"a":' * DEEP)):
        urlsafe = base64.urlsafe_b64encode(marker).decode()
        if payload["data"] in (_b64(marker), urlsafe, urlsafe.rstrip("=")):
            return {**payload, "data": _b64(text)}
    return payload


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(BASE, max_examples=200)
@given(payload_json(), st.none() | st.sampled_from(HINTS), st.integers(0, 3))
def test_payload_json_decodes_or_raises_a_documented_error(
    case: tuple[Any, Any], hint: Any, entry: int
) -> None:
    """Each entry point that reads payload JSON (from a history, a REST body, a memo)."""
    payload, written = case
    payload = _deep(payload)
    converter = DataConverter.default
    # ValueError is what Payload.from_json and from_payload document; a type hint may
    # also meet a value it cannot be built from (TypeError, as _to_dataclass raises).
    documented: tuple[type[Exception], ...] = (
        (ValueError,) if hint is None else (ValueError, TypeError)
    )
    try:
        if entry == 0:
            values = converter.from_payloads_json([payload], [hint])
        elif entry == 1:
            values = converter.from_payloads([Payload.from_json(payload)], [hint])
        elif entry == 2:
            values = [
                converter.from_payload(p, hint) for p in payloads_from_json({"payloads": [payload]})
            ]
        else:
            values = converter.payload_converter.from_payloads(
                payloads_from_json({"payloads": [payload, payload]}), [hint, hint]
            )[:1]
    except documented as err:
        assert str(err)
        assert written is NotImplemented or hint is not None, (payload, err)
        return
    assert len(values) == 1
    if written is not NotImplemented and hint is None:
        assert _same_json(values[0], written), (payload, values)


@settings(BASE, max_examples=100)
@given(json_values)
def test_values_written_as_payload_json_read_back(value: Any) -> None:
    converter = DataConverter.default
    [payload] = converter.to_payloads_json([value])
    assert _same_json(converter.from_payloads_json([json.loads(json.dumps(payload))])[0], value)
