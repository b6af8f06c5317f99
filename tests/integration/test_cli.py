"""The ``durable`` command line, run in-process (``main([...])``) with capsys.

These tests need only SQLite: a database file in ``tmp_path``, shared by the test's worker
and the CLI's own client (the CLI talks to the database, never to a server, so the backend
changes nothing the CLI does). Client commands run in a thread (``asyncio.to_thread``)
because the CLI runs its own event loop with ``asyncio.run`` while the worker runs in the
test's.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from engine import (
    CancelledError,
    Client,
    DataConverter,
    Worker,
    WorkflowFailureError,
    WorkflowHistory,
    workflow,
)
from engine.cli import main
from tests.codecs import WrapCodec

from ..conftest import TEMPORAL_DATA
from .cli_workflows import GreetWF, SleepyWF, WaitForSignalWF, greet

HELLO_SAMPLE = TEMPORAL_DATA / "temporal_history_hello_activity.json"
CLI_WF = "tests.integration.cli_workflows"


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def _created(db: str) -> str:
    """``db``, after creating its (empty) database: commands that read refuse a missing one."""

    async def create() -> None:
        await (await Client.connect(db)).close()

    asyncio.run(create())
    return db


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``durable ARGV...`` in this thread: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def arun_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``durable ARGV...`` in a thread, while the test's event loop runs the worker."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("durable: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


async def test_start_list_describe_show_export_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _sqlite(tmp_path)
    tq = "cli-" + uuid.uuid4().hex[:8]
    client = await Client.connect(db)
    try:
        async with Worker(client, task_queue=tq, workflows=[GreetWF], activities=[greet]):
            code, out, err = await arun_cli(
                capsys,
                "workflow", "start", "--db", db, "--type", "GreetWF", "--task-queue", tq,
                "--workflow-id", "greet-1", "--input", '"Ada"',
            )  # fmt: skip
            assert code == 0, err
            assert "Started workflow greet-1" in out and "Run ID: " in out
            handle = client.get_workflow_handle("greet-1")
            assert await handle.result() == "Hello, Ada!"
        run_id = (await handle.describe()).run_id
        assert run_id in out
        history = await handle.fetch_history()
    finally:
        await client.close()

    # list: a table, JSON, a query; --db also works before the command
    code, out, _ = run_cli(capsys, "workflow", "list", "--db", db)
    assert code == 0
    header, row = out.strip().splitlines()
    assert header.split()[:3] == ["WORKFLOW", "ID", "RUN"]
    assert row.split()[:4] == ["greet-1", run_id, "GreetWF", "COMPLETED"]
    code, out, _ = run_cli(capsys, "--db", db, "workflow", "list", "--output", "json")
    assert code == 0
    [item] = json.loads(out)
    assert item["id"] == "greet-1" and item["status"] == "COMPLETED"
    assert item["history_length"] == len(history) == 11
    code, out, err = run_cli(
        capsys, "workflow", "list", "--db", db, "-q", "WorkflowId = 'nope'", "-o", "json"
    )
    assert code == 0 and json.loads(out) == []

    # describe
    code, out, _ = run_cli(capsys, "workflow", "describe", "greet-1", "--db", db)
    assert code == 0
    assert "Status:" in out and "COMPLETED" in out and run_id in out
    assert "Pending activities: 0" in out
    code, out, _ = run_cli(capsys, "workflow", "describe", "greet-1", "--db", db, "-o", "json")
    described = json.loads(out)
    assert described["status"] == "COMPLETED" and described["task_queue"] == tq

    # show: a table, and Temporal's JSON
    code, out, _ = run_cli(capsys, "workflow", "show", "greet-1", "--db", db)
    assert code == 0
    assert "ActivityTaskCompleted" in out and '"Hello, Ada!"' in out
    assert "greet (id 1)" in out
    assert len(out.strip().splitlines()) == 2 + len(history)
    code, out, _ = run_cli(capsys, "workflow", "show", "greet-1", "--db", db, "--output", "json")
    assert code == 0
    shown = WorkflowHistory.from_json("greet-1", out)
    assert [e.event_type for e in shown] == [e.event_type for e in history]
    assert shown.to_json_dict() == history.to_json_dict()

    # history export: json / csv / parquet
    exported = tmp_path / "greet-1.json"
    code, _, err = run_cli(
        capsys, "history", "export", "greet-1", "--db", db, "-f", "json", "-o", str(exported)
    )
    assert code == 0, err
    assert json.loads(exported.read_text()) == history.to_json_dict()
    code, out, _ = run_cli(capsys, "history", "export", "greet-1", "--db", db, "--format", "csv")
    assert code == 0
    assert out.splitlines()[0].startswith("workflow_id,run_id,event_id,time,type,category")
    csv_path = tmp_path / "greet-1.csv"
    code, _, _ = run_cli(
        capsys, "history", "export", "greet-1", "--db", db, "-f", "csv", "-o", str(csv_path)
    )
    assert code == 0
    from_csv = pd.read_csv(csv_path)
    assert len(from_csv) == 11 and set(from_csv.workflow_id) == {"greet-1"}
    assert json.loads(from_csv.attributes.iloc[0])["workflowType"]["name"] == "GreetWF"
    parquet_path = tmp_path / "greet-1.parquet"
    code, _, err = run_cli(
        capsys, "history", "export", "greet-1", "--db", db, "-f", "parquet", "-o", str(parquet_path)
    )
    assert code == 0 and "wrote 11 events" in err
    df = pd.read_parquet(parquet_path)
    assert len(df) == 11 and list(df.columns[:4]) == ["workflow_id", "run_id", "event_id", "time"]
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert isinstance(df["category"].dtype, pd.CategoricalDtype)
    completed = df[df.type == "ActivityTaskCompleted"].iloc[0]
    assert completed.payload_preview == '"Hello, Ada!"' and completed.activity_type == "greet"

    # replay the exported file: same code replays, changed code does not
    code, out, _ = run_cli(capsys, "replay", str(exported), "--workflows", f"{CLI_WF}:GreetWF")
    assert code == 0
    assert out.startswith("OK ") and "greet-1" in out
    code, out, _ = run_cli(
        capsys, "replay", str(exported), "--workflows", f"{CLI_WF}:GreetTimerFirstWF"
    )
    assert code == 1
    [line] = out.strip().splitlines()
    assert line.startswith("FAILED") and "NondeterminismError" in line and "event 5" in line


async def test_signal_cancel_terminate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _sqlite(tmp_path)
    tq = "cli-" + uuid.uuid4().hex[:8]
    client = await Client.connect(db)
    try:
        async with Worker(client, task_queue=tq, workflows=[WaitForSignalWF, SleepyWF]):
            code, _, err = await arun_cli(
                capsys, "workflow", "start", "--db", db, "-t", "WaitForSignalWF",
                "--task-queue", tq, "--workflow-id", "waiter",
            )  # fmt: skip
            assert code == 0, err
            code, out, err = await arun_cli(
                capsys, "workflow", "signal", "waiter", "--db", db, "--name", "add",
                "--input", '"hi"',
            )  # fmt: skip
            assert code == 0, err
            assert "add" in out
            assert await client.get_workflow_handle("waiter").result() == ["hi"]
            code, out, err = await arun_cli(
                capsys, "workflow", "query", "waiter", "--db", db, "--name", "count",
            )  # fmt: skip
            assert code == 0, err
            assert json.loads(out) == 1

            for wid in ("to-cancel", "to-terminate"):
                await client.start_workflow(SleepyWF.run, id=wid, task_queue=tq)
            code, out, err = await arun_cli(capsys, "workflow", "cancel", "to-cancel", "--db", db)
            assert code == 0, err
            with pytest.raises(WorkflowFailureError) as info:
                await client.get_workflow_handle("to-cancel").result()
            assert isinstance(info.value.cause, CancelledError)
            code, out, err = await arun_cli(
                capsys, "workflow", "terminate", "to-terminate", "--db", db, "--reason", "ops"
            )
            assert code == 0, err
            with pytest.raises(WorkflowFailureError):
                await client.get_workflow_handle("to-terminate").result()
    finally:
        await client.close()

    code, out, _ = run_cli(capsys, "workflow", "list", "--db", db, "-o", "json")
    statuses = {item["id"]: item["status"] for item in json.loads(out)}
    assert statuses == {
        "waiter": "COMPLETED",
        "to-cancel": "CANCELED",
        "to-terminate": "TERMINATED",
    }
    code, out, _ = run_cli(capsys, "workflow", "show", "to-terminate", "--db", db)
    assert "WorkflowExecutionTerminated" in out and "terminated: ops" in out

    # several histories at once: progress lines on stderr, one JSON file each
    folder = tmp_path / "all"
    ids = ["waiter", "to-cancel", "to-terminate", "waiter"]
    code, _, err = run_cli(
        capsys, "history", "export", *ids, "--db", db, "-f", "json", "-o", str(folder)
    )
    assert code == 0, err
    assert "[1/4] exporting waiter" in err and "[4/4]" in err
    assert sorted(p.name for p in folder.iterdir()) == [
        "to-cancel.json",
        "to-terminate.json",
        "waiter.json",
    ]
    frame = tmp_path / "all.parquet"
    code, _, err = run_cli(
        capsys, "history", "export", *ids[:3], "--db", db, "-f", "parquet", "-o", str(frame)
    )
    assert code == 0, err
    df = pd.read_parquet(frame)
    assert list(df.drop_duplicates("workflow_id").workflow_id) == ids[:3]


def test_errors_are_one_line_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _created(_sqlite(tmp_path))
    code, _, err = run_cli(capsys, "workflow", "describe", "nope", "--db", db)
    assert code == 2
    _assert_one_line_error(err, "'nope' not found")
    code, _, err = run_cli(capsys, "workflow", "show", "nope", "--db", db)
    assert code == 2
    _assert_one_line_error(err, "'nope' not found")
    code, _, err = run_cli(
        capsys, "workflow", "start", "--db", db, "-t", "X", "--task-queue", "q",
        "--workflow-id", "x", "--input", "Ada",
    )  # fmt: skip
    assert code == 2
    _assert_one_line_error(err, "--input 'Ada' is not valid JSON")
    code, _, err = run_cli(capsys, "history", "export", "x", "y", "--db", db, "-f", "json")
    assert code == 2
    _assert_one_line_error(err, "needs --output DIRECTORY")
    code, _, err = run_cli(capsys, "workflow", "list", "--db", db, "--query", "Status = 1")
    assert code == 2
    _assert_one_line_error(err, "of the list filter")
    code, _, err = run_cli(capsys, "workflow", "list", "--db", "mysql://nowhere/db")
    assert code == 2
    assert "Traceback" not in err and err.startswith("durable: error: ")
    # usage errors come from argparse, also with exit code 2
    code, _, err = run_cli(capsys, "workflow")
    assert code == 2 and "usage:" in err
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "replay" in out


async def test_main_called_inside_a_running_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From a notebook cell (a running loop), main() runs its client in a thread."""
    db = _sqlite(tmp_path)
    await (await Client.connect(db)).close()
    code, out, err = run_cli(capsys, "workflow", "list", "--db", db)
    assert code == 0, err
    assert out.startswith("WORKFLOW ID")


def test_export_without_pandas_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    code, _, err = run_cli(capsys, "history", "export", "x", "--db", _sqlite(tmp_path), "-f", "csv")
    assert code == 2
    _assert_one_line_error(err, "pip install 'durable-notebook[data]'")


def test_replay_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hello = "tests.integration.test_basics:HelloWF"
    code, out, err = run_cli(capsys, "replay", str(HELLO_SAMPLE), "--workflows", hello)
    assert code == 0, err
    assert out.startswith("OK ") and "HelloWF" in out and "(11 events)" in out

    # more than a few files: one line each on stdout, progress on stderr
    copies = []
    for i in range(5):
        copy = tmp_path / f"hello-{i}.json"
        shutil.copy(HELLO_SAMPLE, copy)
        copies.append(str(copy))
    code, out, err = run_cli(capsys, "replay", *copies, "-w", hello)
    assert code == 0
    assert len(out.strip().splitlines()) == 5
    assert "[1/5] replaying" in err and "5 OK, 0 failed" in err

    # non-determinism: exit 1, the message names the event
    changed = f"{CLI_WF}:HelloTimerFirstWF"
    code, out, _ = run_cli(capsys, "replay", str(HELLO_SAMPLE), "--workflows", changed)
    assert code == 1
    assert out.startswith("FAILED") and "NondeterminismError" in out and "event 5" in out
    # a history of a type not given is a failed replay too
    code, out, _ = run_cli(capsys, "replay", str(HELLO_SAMPLE), "-w", f"{CLI_WF}:GreetWF")
    assert code == 1 and out.startswith("FAILED")

    # bad input: exit 2 with one clear line, whatever else replayed
    truncated = tmp_path / "truncated.json"
    truncated.write_text(HELLO_SAMPLE.read_text()[:500])
    code, out, err = run_cli(capsys, "replay", str(truncated), "-w", hello)
    assert code == 2 and out == ""
    _assert_one_line_error(err, "truncated.json", "malformed")
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "missing.json"), "-w", hello)
    assert code == 2
    _assert_one_line_error(err, "missing.json: no such file")
    code, out, err = run_cli(capsys, "replay", str(HELLO_SAMPLE), str(truncated), "-w", changed)
    assert code == 2 and out.startswith("FAILED")
    not_history = tmp_path / "list.json"
    not_history.write_text("[1, 2]")
    code, _, err = run_cli(capsys, "replay", str(not_history), "-w", hello)
    assert code == 2
    _assert_one_line_error(err, "'events' list")

    for spec, fragment in [
        ("tests.integration.cli_workflows", "expected module:Class"),
        ("no_such_module_xyz:Flow", "cannot import module 'no_such_module_xyz'"),
        (f"{CLI_WF}:Missing", "has no 'Missing'"),
        (f"{CLI_WF}:NOT_A_WORKFLOW", "is not a class"),
    ]:
        code, out, err = run_cli(capsys, "replay", str(HELLO_SAMPLE), "-w", spec)
        assert code == 2, spec
        _assert_one_line_error(err, fragment)


def test_a_missing_database_is_an_error_not_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A typo'd directory: an error for every command, start included; nothing is created.
    typo = tmp_path / "no-such-dir" / "durable.db"
    for argv in (
        ["workflow", "list"],
        ["workflow", "start", "-t", "X", "--task-queue", "q", "--workflow-id", "x"],
    ):
        code, _, err = run_cli(capsys, *argv, "--db", f"sqlite:///{typo}")
        assert code == 2
        _assert_one_line_error(err, "--db", "no-such-dir does not exist")
    assert not typo.parent.exists()
    # A file that does not exist in a directory that does: reading commands refuse it...
    missing = tmp_path / "fresh.db"
    code, _, err = run_cli(capsys, "workflow", "list", "--db", f"sqlite:///{missing}")
    assert code == 2
    _assert_one_line_error(err, f"no database at {missing}", "--db")
    assert not missing.exists()
    # ... also when it comes from the environment, which the message names.
    monkeypatch.setenv("DURABLE_DATABASE_URL", f"sqlite:///{missing}")
    code, _, err = run_cli(capsys, "workflow", "describe", "x")
    assert code == 2
    _assert_one_line_error(err, "no database at", "DURABLE_DATABASE_URL")
    # ... while start may create it (a worker may come later).
    code, out, err = run_cli(
        capsys, "workflow", "start", "-t", "X", "--task-queue", "q", "--workflow-id", "x"
    )
    assert code == 0, err
    assert missing.exists() and "Started workflow x" in out


async def test_export_to_stdout_and_default_parquet_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _sqlite(tmp_path)
    tq = "cli-" + uuid.uuid4().hex[:8]
    client = await Client.connect(db)
    try:
        async with Worker(client, task_queue=tq, workflows=[GreetWF], activities=[greet]):
            await client.execute_workflow(GreetWF.run, "Ada", id="order/7", task_queue=tq)
        history = await client.get_workflow_handle("order/7").fetch_history()
    finally:
        await client.close()
    monkeypatch.chdir(tmp_path)
    # --output - is stdout
    code, out, err = await arun_cli(
        capsys, "history", "export", "order/7", "--db", db, "-f", "json", "-o", "-"
    )
    assert code == 0, err
    assert json.loads(out) == history.to_json_dict() and "wrote" not in err
    code, out, err = await arun_cli(
        capsys, "history", "export", "order/7", "--db", db, "-f", "csv", "-o", "-"
    )
    assert code == 0 and len(out.strip().splitlines()) == 1 + len(history)
    # parquet without --output: ID.parquet in the current directory (the id made safe)
    code, _, err = await arun_cli(
        capsys, "history", "export", "order/7", "--db", db, "-f", "parquet"
    )
    assert code == 0, err
    written = tmp_path / "order_7.parquet"
    assert f"to {written.name}" in err
    assert len(pd.read_parquet(written)) == len(history)


@workflow.defn(name="SummarisedGreetWF")
class SummarisedGreetWF:
    """GreetWF with a summary on its activity and on a short timer."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(timedelta(milliseconds=10), summary="a <i>short</i> nap")
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=30), summary="greet <b>x</b>"
        )


async def test_describe_and_show_print_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _sqlite(tmp_path)
    tq = "cli-" + uuid.uuid4().hex[:8]
    client = await Client.connect(db)
    coded = await Client.connect(db, data_converter=DataConverter(payload_codec=WrapCodec()))
    try:
        async with Worker(client, task_queue=tq, workflows=[SummarisedGreetWF], activities=[greet]):
            handle = await client.start_workflow(
                SummarisedGreetWF.run,
                "Ada",
                id="summarised",
                task_queue=tq,
                static_summary="Greets <b>x</b> once",
                static_details="First line.\nSecond **line**.",
            )
            assert await handle.result() == "Hello, Ada!"
        await coded.start_workflow(
            "SummarisedGreetWF", "Bo", id="coded", task_queue="nobody", static_summary="secret"
        )
    finally:
        await coded.close()
        await client.close()

    code, out, err = run_cli(capsys, "workflow", "describe", "summarised", "--db", db)
    assert code == 0, err
    lines = out.splitlines()
    assert "Summary:      Greets <b>x</b> once" in lines
    details = lines.index("Details:      First line.")
    assert lines[details + 1] == "              Second **line**."  # under the first line
    code, out, _ = run_cli(capsys, "workflow", "describe", "summarised", "--db", db, "-o", "json")
    described = json.loads(out)
    assert described["static_summary"] == "Greets <b>x</b> once"
    assert described["static_details"] == "First line.\nSecond **line**."
    assert "data_converter" not in described

    code, out, _ = run_cli(capsys, "workflow", "show", "summarised", "--db", db)
    assert code == 0
    assert out.splitlines()[1] == "Summary: Greets <b>x</b> once"
    [scheduled] = [line for line in out.splitlines() if "ActivityTaskScheduled" in line]
    assert '"greet <b>x</b>"' in scheduled
    [timer] = [line for line in out.splitlines() if "TimerStarted" in line]
    assert '"a <i>short</i> nap"' in timer
    assert len(out.strip().splitlines()) == 3 + len(await _history_of(db, "summarised"))

    # A codec the CLI's client does not have: the summary shows as "(encoded)", no error.
    code, out, err = run_cli(capsys, "workflow", "describe", "coded", "--db", db)
    assert code == 0, err
    assert "Summary:      (encoded)" in out.splitlines()


async def _history_of(db: str, workflow_id: str) -> WorkflowHistory:
    client = await Client.connect(db)
    try:
        return await client.get_workflow_handle(workflow_id).fetch_history()
    finally:
        await client.close()


def test_operator_search_attributes(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "operator", "search-attribute", "create", "--db", db_url,
        "--name", "CustomerId", "--type", "Keyword", "--name", "Amount", "--type", "Int",
    )  # fmt: skip
    assert code == 0, out
    assert "registered CustomerId (Keyword) in namespace default" in out
    code, out, _ = run_cli(
        capsys, "operator", "search-attribute", "create", "--db", db_url,
        "--name", "CustomerId", "--type", "Text",
    )  # fmt: skip
    assert code == 0 and "it stays Keyword (remove it first to change its type)" in out
    code, out, _ = run_cli(
        capsys, "operator", "search-attribute", "list", "--db", db_url, "-o", "json"
    )
    listed = json.loads(out)
    assert listed["custom"] == {"Amount": "Int", "CustomerId": "Keyword"}
    assert listed["system"]["ExecutionStatus"] == "Keyword"
    code, out, _ = run_cli(
        capsys, "workflow", "list", "--db", db_url, "--query", "CustomerId = 'x'"
    )
    assert code == 0, out  # a registered attribute is known to the filter
    code, _, err = run_cli(
        capsys, "operator", "search-attribute", "create", "--db", db_url,
        "--name", "WorkflowId", "--type", "Keyword",
    )  # fmt: skip
    assert code != 0
    _assert_one_line_error(err, "Search attribute WorkflowId is reserved by system")
    code, out, _ = run_cli(
        capsys, "operator", "search-attribute", "remove", "--db", db_url, "--name", "Amount"
    )
    assert code == 0 and "removed Amount" in out
    code, _, err = run_cli(capsys, "workflow", "list", "--db", db_url, "--query", "Amount = 1")
    assert code != 0
    _assert_one_line_error(err, "column 1 of the list filter: unknown search attribute 'Amount'")
