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
    assert (
        "Order: new definition registered; 1 open run of Order will replay against it: order-1"
        in capsys.readouterr().out
    )
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
    assert first.comm is None and second.comm is not None  # the first one was closed
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
