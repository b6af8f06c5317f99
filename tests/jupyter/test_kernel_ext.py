"""The IPython extension in a real InteractiveShell: session, workers, magics, display."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from IPython.testing import globalipapp

import kernel_ext
from engine import WorkflowExecutionStatus
from engine.exceptions import InvalidArgumentError
from kernel_ext.kernel_session import LOOP_THREAD_NAME

DEFINITIONS = """
from datetime import timedelta
from engine import Client, activity, workflow

calls = []

@activity.defn
async def greet(name: str) -> str:
    calls.append(name)
    return f"Hello, {name}!"

@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )
"""

# The seed's order: an activity, then a long timer, then another activity.
ORDER_V1 = """
from datetime import timedelta
from engine import Client, activity, workflow

@activity.defn
async def reserve_stock(order_id: str) -> str:
    return f"stock reserved for {order_id}"

@workflow.defn(name="Order")
class Order:
    @workflow.run
    async def run(self, order_id: str) -> str:
        reservation = await workflow.execute_activity(
            reserve_stock, order_id, start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.sleep(timedelta(hours=1))
        return reservation

    @workflow.signal
    def poke(self) -> None:
        pass
"""

# The same type with the timer and the activity swapped.
ORDER_V2 = """
@workflow.defn(name="Order")
class Order:
    @workflow.run
    async def run(self, order_id: str) -> str:
        await workflow.sleep(timedelta(hours=1))
        return await workflow.execute_activity(
            reserve_stock, order_id, start_to_close_timeout=timedelta(seconds=10)
        )

    @workflow.signal
    def poke(self) -> None:
        pass
"""


def _our_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(LOOP_THREAD_NAME)]


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The global test shell with the extension loaded on a fresh SQLite file."""
    monkeypatch.setenv("DURABLE_DATABASE_URL", f"sqlite:///{tmp_path / 'durable.db'}")
    ip = globalipapp.start_ipython() or InteractiveShell.instance()  # started once
    ip.run_line_magic("load_ext", "kernel_ext")
    try:
        yield ip
    finally:
        if "client" in ip.user_ns:
            ip.run_cell("await client.close()", store_history=False)
        if "kernel_ext" in ip.extension_manager.loaded:
            ip.run_line_magic("unload_ext", "kernel_ext")
        ip.reset(new_session=False)
        assert _our_threads() == []


def run(ip: InteractiveShell, code: str) -> ExecutionResult:
    """Run a cell and fail the test with its error if it raised."""
    result = ip.run_cell(code, store_history=False)
    if not result.success:
        raise AssertionError(f"cell failed: {result.error_before_exec or result.error_in_exec}")
    return result


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll ``predicate`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_load_connects_to_the_env_database_and_unload_stops_the_loop(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    session = kernel_ext.session()
    assert str(tmp_path / "durable.db") in session.database_url
    assert session.thread.is_alive() and session.thread.name == LOOP_THREAD_NAME
    shell.run_line_magic("unload_ext", "kernel_ext")
    assert _our_threads() == []
    with pytest.raises(RuntimeError, match="load_ext kernel_ext"):
        kernel_ext.session()


def test_a_cell_defined_workflow_runs_on_the_background_worker(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    assert "worker started on task queue 'notebook' (Greeting, greet)" in capsys.readouterr().out
    run(
        shell,
        "client = await Client.connect()\n"
        "result = await client.execute_workflow(Greeting.run, 'Ada', id='g-1', "
        "task_queue='notebook')",
    )
    assert shell.user_ns["result"] == "Hello, Ada!"
    assert shell.user_ns["calls"] == ["Ada"]
    worker = kernel_ext.session().worker()
    assert worker.task_queue == "notebook" and worker.is_running
    with pytest.raises(InvalidArgumentError, match="--task-queue other"):
        kernel_ext.session().worker("other")


def test_activities_run_while_a_cell_blocks(shell: InteractiveShell) -> None:
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    run(
        shell,
        "client = await Client.connect()\n"
        "handle = await client.start_workflow(Greeting.run, 'Bo', id='g-2', task_queue='notebook')",
    )
    # No await in this cell: the kernel's loop is stuck in time.sleep, the worker is not.
    run(
        shell,
        "import time, kernel_ext\n"
        "deadline = time.monotonic() + 15\n"
        "while kernel_ext.session().describe('g-2').status.name == 'RUNNING':\n"
        "    assert time.monotonic() < deadline, 'the run did not finish while the cell slept'\n"
        "    time.sleep(0.05)\n"
        "blocked_calls = list(calls)",
    )
    assert shell.user_ns["blocked_calls"] == ["Bo"]
    run(shell, "outcome = await handle.result()")
    assert shell.user_ns["outcome"] == "Hello, Bo!"


def test_redefining_a_workflow_names_open_runs_and_they_fail_nondeterministically(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, ORDER_V1)
    shell.run_line_magic("durable", "worker start")
    run(
        shell,
        "client = await Client.connect()\n"
        "order = await client.start_workflow(Order.run, 'order-1', id='order-1', "
        "task_queue='notebook')",
    )
    session = kernel_ext.session()
    wait_for(lambda: any(e.event_type == "TimerStarted" for e in session.history("order-1")))
    capsys.readouterr()

    run(shell, ORDER_V2)
    note = capsys.readouterr().out
    assert "Order: new definition registered; replayed its 1 open run against it" in note
    assert "BREAKS order-1 at event 5 (ActivityTaskScheduled)" in note
    run(shell, "await order.signal(Order.poke)")  # a new workflow task: replay on new code

    def failed_task() -> Any:
        events = session.history("order-1").events
        return [e for e in events if e.event_type == "WorkflowTaskFailed"]

    failure = wait_for(failed_task)[0]
    assert failure.attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
    assert session.describe("order-1").status == WorkflowExecutionStatus.RUNNING

    shell.run_line_magic("durable", "replay order-1")
    out = capsys.readouterr().out
    assert out.startswith("NondeterminismError: order-1 (run ")

    # New runs follow the new code: the timer comes first.
    run(
        shell,
        "order2 = await client.start_workflow(Order.run, 'order-2', id='order-2', "
        "task_queue='notebook')",
    )
    types = wait_for(
        lambda: [
            e.event_type
            for e in session.history("order-2").events
            if e.event_type in ("TimerStarted", "ActivityTaskScheduled")
        ]
    )
    assert types[0] == "TimerStarted"


def test_magics_print_status_lists_histories_and_replays(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    run(
        shell,
        "client = await Client.connect()\n"
        "await client.execute_workflow(Greeting.run, 'Cy', id='g-3', task_queue='notebook')",
    )
    capsys.readouterr()
    # The result arrives as the run closes; the worker counts its task just after.
    wait_for(lambda: kernel_ext.session().workers()[0].metrics["workflow_tasks_completed"] == 2)

    shell.run_line_magic("durable", "status")
    status = capsys.readouterr().out
    assert f"database: sqlite:///{tmp_path / 'durable.db'}" in status
    assert "task queue 'notebook': worker running" in status
    assert "workflows:  Greeting" in status and "activities: greet" in status
    assert "workflow tasks completed 2" in status and "activities completed 1" in status

    shell.run_line_magic("durable", "list WorkflowType = 'Greeting'")
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[:4] == ["workflow", "id", "type", "status"]
    assert listing[2].split()[:4] == ["g-3", "Greeting", "COMPLETED", "notebook"]

    shell.run_line_magic("durable", "history g-3")
    history = capsys.readouterr().out.splitlines()
    assert history[0].split()[:4] == ["1", "WorkflowExecutionStarted", "workflow", "Greeting"]
    assert history[4].split()[:4] == ["5", "ActivityTaskScheduled", "activity", "greet"]
    assert history[-1].split()[:2] == ["11", "WorkflowExecutionCompleted"]
    assert history[-1].endswith('"Hello, Cy!"')

    shell.run_line_magic("durable", "replay g-3")
    assert capsys.readouterr().out.startswith("OK: g-3 (run ")

    shell.run_line_magic("durable", "worker stop")
    assert capsys.readouterr().out.strip() == "worker stopped on task queue 'notebook'"
    shell.run_line_magic("durable", "status")
    assert "task queue 'notebook': worker stopped" in capsys.readouterr().out

    bad = shell.run_cell("%durable worker jump", store_history=False)
    assert type(bad.error_in_exec).__name__ == "UsageError"
    missing = shell.run_cell("%durable history nope", store_history=False)
    assert type(missing.error_in_exec).__name__ == "UsageError"
    assert "nope" in str(missing.error_in_exec)


def test_a_run_waits_without_a_worker_and_resumes_after_a_restart(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, DEFINITIONS)
    run(
        shell,
        "client = await Client.connect()\n"
        "handle = await client.start_workflow(Greeting.run, 'Di', id='g-4', task_queue='notebook')",
    )
    time.sleep(0.5)
    assert kernel_ext.session().describe("g-4").status == WorkflowExecutionStatus.RUNNING
    assert shell.user_ns["calls"] == []
    # A kernel restart: the session goes away and comes back; the cells run again.
    shell.run_line_magic("unload_ext", "kernel_ext")
    shell.run_line_magic("load_ext", "kernel_ext")
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    run(shell, "outcome = await handle.result()")
    assert shell.user_ns["outcome"] == "Hello, Di!"


def test_register_by_call_and_decorator_on_a_named_queue(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run(
        shell,
        DEFINITIONS
        + "import kernel_ext\n"
        + "kernel_ext.register(Greeting, greet, task_queue='greetings')\n"
        + "@kernel_ext.register(task_queue='greetings')\n"
        + "@activity.defn(name='shout')\n"
        + "async def shout(text: str) -> str:\n"
        + "    return text.upper()\n",
    )
    workers = {w.task_queue: w for w in kernel_ext.session().workers()}
    assert set(workers) == {"greetings"}  # explicitly registered: not also on "notebook"
    assert workers["greetings"].activity_types == ["greet", "shout"]
    shell.run_line_magic("durable", "worker start --task-queue greetings")
    run(
        shell,
        "client = await Client.connect()\n"
        "result = await client.execute_workflow(Greeting.run, 'Ed', id='g-5', "
        "task_queue='greetings')",
    )
    assert shell.user_ns["result"] == "Hello, Ed!"
    bad = shell.run_cell("kernel_ext.register(print)", store_history=False)
    assert "neither a @workflow.defn class" in str(bad.error_in_exec)


def test_a_workflow_handle_displays_its_status(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The terminal shell renders text only; a notebook kernel also asks for HTML.
    monkeypatch.setattr(shell.display_formatter.formatters["text/html"], "enabled", True)
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    run(
        shell,
        "client = await Client.connect()\n"
        "handle = await client.start_workflow(Greeting.run, 'Flo', id='g-6', "
        "task_queue='notebook')\n"
        "await handle.result()",
    )
    handle = shell.user_ns["handle"]
    # A terminal shell (no kernel, so no widgets front end): the summary as text and HTML.
    data, _ = shell.display_formatter.format(handle)
    assert data["text/plain"].startswith("<WorkflowHandle g-6 · Greeting · COMPLETED · 11 events")
    html = data["text/html"]
    for text in ("g-6", "Greeting", "COMPLETED", "11", handle.result_run_id):
        assert f"<code>{text}</code>" in html

    # In a kernel, with the widgets installed (as here): the live history widget; showing
    # the same run again closes the view shown before (no refresh left behind).
    from widgets import HistoryView

    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    kernel_ext.kernel._install_view(shell)
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    assert shell.display_formatter.format(handle) == ({}, {})
    shell.display_formatter.format(handle)
    first, second = shown
    assert isinstance(second, HistoryView) and second.status == "completed"
    assert "g-6" in second.title and [r["kind"] for r in second.rows][:2] == [
        "workflow",
        "activity",
    ]
    # The first one stopped refreshing; with stop() it keeps its model (its output stays).
    assert not first.refreshing and second.comm is not None
    if callable(getattr(first, "stop", None)):
        assert first.comm is not None
    second.close()

    # A view that fails: the summary, saying why.
    kernel_ext.set_handle_view(lambda h: 1 / 0)
    shown.clear()
    shell.display_formatter.format(handle)
    (bundle,) = shown
    assert bundle["text/plain"].startswith("<WorkflowHandle g-6")
    assert "the live view is unavailable: division by zero" in bundle["text/plain"]

    seen: list[Any] = []
    kernel_ext.set_handle_view(lambda h: seen.append(h) or "a richer view")
    try:
        shell.display_formatter.format(handle)
        assert seen == [handle]
    finally:
        kernel_ext.set_handle_view(None)
    data, _ = shell.display_formatter.format(handle)
    assert "text/html" in data


# --- a notebook run again in the same kernel, on a new database ---------------------------


def _setup_cell(db: Path, load_ext: bool = True) -> str:
    """The first cell of the notebooks: a fresh database, then the extension."""
    cell = f"import os\nos.environ['DURABLE_DATABASE_URL'] = 'sqlite:///{db}'\n"
    return cell + ("%load_ext kernel_ext\n" if load_ext else "")


def test_rerunning_the_setup_cell_moves_the_session_and_its_worker_to_the_new_database(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first, second = tmp_path / "durable.db", tmp_path / "second" / "durable.db"
    second.parent.mkdir()
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    run(
        shell,
        "client = await Client.connect()\n"
        "await client.execute_workflow(Greeting.run, 'Ada', id='g-1', task_queue='notebook')\n"
        "await client.close()",
    )
    capsys.readouterr()

    # The notebook from the top: setup cell, definitions, worker, client, a run.
    run(shell, _setup_cell(second))
    out = capsys.readouterr().out
    assert out.count("moved from") == 1, out  # said once, by %load_ext (not again after)
    assert f"moved from sqlite:///{first} to sqlite:///{second}" in out
    assert "worker restarted there on 'notebook'" in out
    assert "already loaded" not in out
    run(shell, DEFINITIONS)
    assert "no open runs of Greeting" in capsys.readouterr().out
    shell.run_line_magic("durable", "worker start")
    assert capsys.readouterr().out.startswith(
        f"a worker is already polling task queue 'notebook' on sqlite:///{second}"
    )
    run(
        shell,
        "import asyncio\n"
        "client = await Client.connect()\n"
        "result = await asyncio.wait_for(client.execute_workflow(Greeting.run, 'Bo', id='g-2', "
        "task_queue='notebook'), 15)",
    )
    assert shell.user_ns["result"] == "Hello, Bo!"
    session = kernel_ext.session()
    assert str(second) in session.database_url
    assert [r.id for r in session.list_runs()] == ["g-2"]  # g-1 stayed on the first database
    assert session.worker().client is session.client

    # %load_ext once more, nothing changed: where the session is, not IPython's hint.
    run(shell, "%load_ext kernel_ext")
    assert capsys.readouterr().out.strip() == (
        f"kernel_ext is already loaded; its durable session uses sqlite:///{second}"
    )


def test_the_cell_after_the_url_changed_and_every_entry_point_follow_the_url(
    shell: InteractiveShell,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    capsys.readouterr()
    # No %load_ext: the post_run_cell hook moves the session as the cell ends.
    run(shell, _setup_cell(tmp_path / "b.db", load_ext=False))
    assert f"to sqlite:///{tmp_path / 'b.db'}; worker restarted" in capsys.readouterr().out
    run(
        shell,
        "import asyncio\n"
        "client = await Client.connect()\n"
        "result = await asyncio.wait_for(client.execute_workflow(Greeting.run, 'Cy', id='g-3', "
        "task_queue='notebook'), 15)\n"
        "await client.close()",
    )
    assert shell.user_ns["result"] == "Hello, Cy!"

    monkeypatch.setenv("DURABLE_DATABASE_URL", f"sqlite:///{tmp_path / 'c.db'}")
    session = kernel_ext.session()  # kernel_ext.session() follows too
    assert f"to sqlite:///{tmp_path / 'c.db'}" in capsys.readouterr().out
    assert str(tmp_path / "c.db") in session.database_url

    monkeypatch.setenv("DURABLE_DATABASE_URL", f"sqlite:///{tmp_path / 'd.db'}")
    shell.run_line_magic("durable", "status")  # and every %durable magic, first
    out = capsys.readouterr().out
    assert f"to sqlite:///{tmp_path / 'd.db'}" in out.splitlines()[0]
    assert f"database: sqlite:///{tmp_path / 'd.db'}" in out
    assert "task queue 'notebook': worker running" in out


def test_a_move_that_is_impossible_fails_at_once_saying_what_to_do(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(shell, DEFINITIONS)
    shell.run_line_magic("durable", "worker start")
    capsys.readouterr()
    # Nothing listens on port 1: the new database cannot be opened.
    bad = shell.run_cell(
        "import os\n"
        "os.environ['DURABLE_DATABASE_URL'] = "
        "'postgresql+psycopg://ann:s3cret@127.0.0.1:1/nowhere'\n"
        "%load_ext kernel_ext\n",
        store_history=False,
    )
    assert type(bad.error_in_exec).__name__ == "UsageError"  # no traceback, the message
    message = str(bad.error_in_exec)
    assert "cannot move from sqlite:///" in message and "postgresql+psycopg://ann:***@" in message
    assert f"It stays on sqlite:///{tmp_path / 'durable.db'}" in message
    assert "fix DURABLE_DATABASE_URL" in message
    assert "s3cret" not in message
    assert capsys.readouterr().err.count("cannot move") == 1  # the hook does not repeat it

    magic = shell.run_cell("%durable status", store_history=False)
    assert type(magic.error_in_exec).__name__ == "UsageError"
    assert "fix DURABLE_DATABASE_URL" in str(magic.error_in_exec)

    unparseable = shell.run_cell(
        "os.environ['DURABLE_DATABASE_URL'] = 'mysql://x/y'\n%load_ext kernel_ext",
        store_history=False,
    )
    assert "unsupported database 'mysql'" in str(unparseable.error_in_exec)
    capsys.readouterr()
    # Without %load_ext: the hook after the cell says it, once (not after every cell).
    run(shell, "os.environ['DURABLE_DATABASE_URL'] = 'postgresql+psycopg://127.0.0.1:1/other'")
    run(shell, "x = 1")
    err = capsys.readouterr().err
    assert err.count("kernel_ext: ") == 1 and "stays on sqlite:///" in err, err

    # Set back: the session never left, and its worker still serves.
    run(shell, _setup_cell(tmp_path / "durable.db"))
    run(
        shell,
        "import asyncio\n"
        "client = await Client.connect()\n"
        "result = await asyncio.wait_for(client.execute_workflow(Greeting.run, 'Di', id='g-4', "
        "task_queue='notebook'), 15)",
    )
    assert shell.user_ns["result"] == "Hello, Di!"


# --- redefining a workflow: which open runs it breaks -------------------------------------

NAP_V1 = """
import asyncio
from datetime import timedelta
from engine import Client, activity, workflow

@activity.defn
async def wake(name: str) -> str:
    return f"{name} woke"

@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return "v1"
"""

# An activity before the timer: runs that recorded the timer first break.
NAP_BREAKING = """
@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.execute_activity(wake, "nap", start_to_close_timeout=timedelta(seconds=9))
        await workflow.sleep(timedelta(seconds=seconds))
        return "v2"
"""

# An activity after the timer, and a query: runs still on their timer replay the same.
NAP_SAFE = """
@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return await workflow.execute_activity(
            wake, "nap", start_to_close_timeout=timedelta(seconds=9)
        )

    @workflow.query
    def version(self) -> str:
        return "safe"
"""


# Replaying it takes a second per run (a stand-in for a slow check).
NAP_SLOW = """
import time

@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        time.sleep(1)
        await workflow.sleep(timedelta(seconds=seconds))
        return "v1"
"""


def _start_naps(shell: InteractiveShell, *ids: str, seconds: float = 3600) -> None:
    run(shell, NAP_V1)
    shell.run_line_magic("durable", "worker start")
    starts = "".join(
        f"{i.replace('-', '_')} = await client.start_workflow(Nap.run, {seconds}, id='{i}', "
        "task_queue='notebook')\n"
        for i in ids
    )
    run(shell, "client = await Client.connect()\n" + starts)
    session = kernel_ext.session()
    for i in ids:
        wait_for(lambda i=i: any(e.event_type == "TimerStarted" for e in session.history(i)))


def test_a_breaking_redefinition_names_the_run_event_commands_and_remedies(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    _start_naps(shell, "nap-1")
    capsys.readouterr()
    run(shell, NAP_BREAKING)
    note = capsys.readouterr().out
    lines = note.strip().splitlines()
    assert lines[0] == (
        "Nap: new definition registered; replayed its 1 open run against it before the "
        "worker uses it:"
    )
    assert lines[1] == (
        "  BREAKS nap-1 at event 5 (TimerStarted): history recorded StartTimer(timer id 1, "
        "3600s), the new code produces ScheduleActivityTask(wake, activity id 1)"
    )
    assert "restore the previous code" in lines[2]
    assert 'workflow.patched("some-id")' in lines[2]
    assert "let them fail" in lines[3] and 'get_workflow_handle("nap-1").terminate()' in lines[3]
    assert len(lines) == 4 and "safe" not in note and "not checked" not in note
    assert note.count("Nap: new definition registered") == 1  # not again after the cell


def test_a_safe_redefinition_names_the_runs_and_the_check_is_bounded(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    _start_naps(shell, "nap-1", "nap-2", "nap-3")
    capsys.readouterr()
    run(shell, NAP_SAFE)
    note = capsys.readouterr().out.strip().splitlines()
    assert note == [
        "Nap: new definition registered; replayed its 3 open runs against it before the "
        "worker uses it:",
        "  safe (replays on the new code): nap-3, nap-2, nap-1",
    ]

    session = kernel_ext.session()
    session.redefinition_check_limit = 2  # newest first; the rest is named, unchecked
    run(shell, NAP_SAFE)
    note = capsys.readouterr().out.strip().splitlines()
    assert note[0].endswith("replayed 2 of its 3 open runs against it before the worker uses it:")
    assert note[1] == "  safe (replays on the new code): nap-3, nap-2"
    assert note[2].startswith(
        "  not checked: 1 open run (at most the newest 2 are replayed): nap-1"
    )

    # Replays that take too long: the check gives up at its timeout and says what is left.
    session.redefinition_check_limit = 20
    session.redefinition_check_timeout = 0.5
    started = time.monotonic()
    run(shell, NAP_SLOW)
    assert time.monotonic() - started < 5
    note = capsys.readouterr().out
    assert "not checked: 3 open runs (the check ran out of its 0.5 s): nap-3, nap-2, nap-1" in note


def test_a_cell_that_restores_the_code_then_awaits_the_run_completes(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    _start_naps(shell, "nap-1", seconds=0.5)
    run(shell, NAP_BREAKING)
    assert "BREAKS nap-1 at event 5" in capsys.readouterr().out
    session = kernel_ext.session()

    def failed_task() -> Any:
        return [e for e in session.history("nap-1").events if e.event_type == "WorkflowTaskFailed"]

    wait_for(failed_task)  # the timer fired; the new code cannot go on with this run
    # One cell: the old code back, then the result. The definition takes effect as its
    # statement runs, so the await does not wait for the cell's end (it would never come).
    result = run(shell, NAP_V1 + "result = await asyncio.wait_for(nap_1.result(), 15)\n")
    assert result.success and shell.user_ns["result"] == "v1"
    out = capsys.readouterr().out
    assert out.count("Nap: new definition registered") == 1


def test_definitions_register_as_their_statement_runs_and_unload_removes_the_hook(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = kernel_ext.kernel._hook
    assert hook in shell.ast_transformers
    names = set(shell.user_ns)
    result = run(
        shell,
        DEFINITIONS + "import kernel_ext\n"
        "registered = kernel_ext.session().workers()[0].workflow_types\n"
        "class Plain:\n    pass\n",
    )
    assert shell.user_ns["registered"] == ["Greeting"]  # before the cell ended
    assert result.result is None and capsys.readouterr().out == ""  # a class last: no output
    assert set(shell.user_ns) - names == {
        "timedelta",
        "Client",
        "activity",
        "workflow",
        "calls",
        "greet",
        "Greeting",
        "kernel_ext",
        "registered",
        "Plain",
    }
    shell.run_line_magic("unload_ext", "kernel_ext")
    assert hook not in shell.ast_transformers


# --- %unload_ext keeps the outputs of the views it displayed -------------------------------


class _StandIn:
    """Records which of stop() / close() the extension called."""

    def __init__(self, log: list[str], name: str, *, can_stop: bool = True) -> None:
        self.log, self.name = log, name
        if can_stop:
            self.stop = lambda: log.append(f"{name}.stop")

    def close(self) -> None:
        self.log.append(f"{self.name}.close")


def test_views_are_stopped_not_closed_when_replaced_and_on_unload(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(
        shell,
        "from engine import Client\n"
        "client = await Client.connect()\n"
        "one = client.get_workflow_handle('w-1')\n"
        "two = client.get_workflow_handle('w-2')",
    )
    log: list[str] = []
    made: list[_StandIn] = []

    def factory(handle: Any) -> _StandIn:
        view = _StandIn(log, f"{handle.id}#{len(made)}", can_stop=handle.id == "w-1")
        made.append(view)
        return view

    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: None)
    kernel_ext.set_handle_view(factory)
    shell.display_formatter.format(shell.user_ns["one"])
    shell.display_formatter.format(shell.user_ns["one"])  # shown again: the first one stops
    assert log == ["w-1#0.stop"]
    shell.display_formatter.format(shell.user_ns["two"])  # no stop(): closed
    shell.display_formatter.format(shell.user_ns["two"])
    assert log == ["w-1#0.stop", "w-2#2.close"]
    shell.run_line_magic("unload_ext", "kernel_ext")
    assert log == ["w-1#0.stop", "w-2#2.close", "w-1#1.stop", "w-2#3.close"]
