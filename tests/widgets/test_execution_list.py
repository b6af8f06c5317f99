"""ExecutionList: filter, counts by status, paging by tokens, click to open, live refresh."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from engine import Client, Worker, WorkflowExecution, WorkflowExecutionStatus
from engine.client import WorkflowExecutionCount, WorkflowExecutionCountAggregationGroup
from widgets import ExecutionList, HistoryView, _live, execution_list
from widgets.execution_list import (
    StatusCounts,
    count_query,
    count_statuses,
    execution_row,
    with_status,
)

from ..interop.engine_code import HelloWF, SignalWF, say_hello
from .conftest import eventually, widget_threads

# -- the pure parts ---------------------------------------------------------------------


def _execution(status: WorkflowExecutionStatus, i: int = 0) -> WorkflowExecution:
    start = datetime(2024, 5, 1, 12, 0, i, tzinfo=UTC)
    closed = None if status == WorkflowExecutionStatus.RUNNING else start.replace(minute=2)
    return WorkflowExecution(
        id=f"wf-{i}",
        run_id=f"run-{i}",
        workflow_type="Order",
        task_queue="q",
        status=status,
        start_time=start,
        close_time=closed,
        history_length=11,
        namespace="default",
    )


def test_with_status_keeps_the_filter_whole() -> None:
    assert with_status("", "running") == "ExecutionStatus = 'Running'"
    # OR binds looser than AND: the filter goes in parentheses, never split.
    assert (
        with_status("WorkflowType = 'A' or TaskQueue = 'b AND c'", "timed_out")
        == "(WorkflowType = 'A' or TaskQueue = 'b AND c') AND ExecutionStatus = 'TimedOut'"
    )
    assert with_status(" TaskQueue = 'q' ", None) == "TaskQueue = 'q'"
    with pytest.raises(ValueError, match="unknown status 'lost'"):
        with_status("", "lost")
    assert count_query("") == "GROUP BY ExecutionStatus"
    assert count_query(" A = 'x' ") == "A = 'x' GROUP BY ExecutionStatus"


def test_status_counts_from_a_grouped_count() -> None:
    groups = [
        WorkflowExecutionCountAggregationGroup(3, ["Completed"]),
        WorkflowExecutionCountAggregationGroup(2, ["TimedOut"]),
        WorkflowExecutionCountAggregationGroup(1, ["Running"]),
    ]
    counts = StatusCounts.of(WorkflowExecutionCount(6, groups))
    # In the chips' order (running first), keyed as the colours are.
    assert list(counts.by_status.items()) == [("running", 1), ("completed", 3), ("timed_out", 2)]
    assert (counts.total, counts.capped, counts.error, counts.text("completed")) == (
        6,
        False,
        "",
        "3",
    )


def test_rows_and_counts_from_executions() -> None:
    running = execution_row(_execution(WorkflowExecutionStatus.RUNNING))
    assert running["status"] == "running" and running["closed"] == ""
    # An open run has no "took": its row stays the same until something is recorded.
    assert running["started"] == "2024-05-01 12:00:00" and running["took"] == ""
    done = execution_row(_execution(WorkflowExecutionStatus.CONTINUED_AS_NEW, 3))
    assert done["status"] == "continued_as_new" and done["took"] == "2.0 min"
    assert done["closed"] == "2024-05-01 12:02:03" and done["history_length"] == 11

    runs = [_execution(WorkflowExecutionStatus.COMPLETED, i) for i in range(3)]
    runs.insert(1, _execution(WorkflowExecutionStatus.RUNNING, 9))
    exact = count_statuses(runs, 10)
    assert exact.by_status == {"running": 1, "completed": 3}
    assert (exact.total, exact.capped, exact.text()) == (4, False, "4")
    capped = count_statuses(runs, 2)
    assert capped.by_status == {"running": 1, "completed": 1}
    assert (capped.total, capped.capped, capped.text(), capped.text("running")) == (
        2,
        True,
        "2+",
        "1+",
    )


# -- against a store --------------------------------------------------------------------


async def _start_waiting(client: Client, task_queue: str, n: int, prefix: str) -> list[str]:
    """``n`` runs that stay open (no worker needed): their ids, oldest first."""
    ids = []
    for i in range(n):
        handle = await client.start_workflow(
            SignalWF.run, 1, id=f"{prefix}-{i}", task_queue=task_queue
        )
        ids.append(handle.id)
    return ids


async def _complete_hellos(client: Client, task_queue: str, n: int) -> list[str]:
    ids = []
    async with Worker(
        client, task_queue=task_queue, workflows=[HelloWF, SignalWF], activities=[say_hello]
    ):
        for i in range(n):
            wid = f"hello-{i}-{uuid.uuid4().hex[:6]}"
            await client.execute_workflow(HelloWF.run, "you", id=wid, task_queue=task_queue)
            ids.append(wid)
    return ids


def _assert_stopped(view: ExecutionList) -> None:
    assert not view.refreshing and not view.table.live
    assert _live.subscriptions() == 0
    assert _live.live_thread() is None and widget_threads() == []


async def test_filter_narrows_the_rows_and_a_bad_filter_keeps_them(
    client: Client, task_queue: str
) -> None:
    waiting = await _start_waiting(client, task_queue, 3, "wait-" + uuid.uuid4().hex[:6])
    hellos = await _complete_hellos(client, task_queue, 2)
    await _start_waiting(client, task_queue + "-other", 1, "elsewhere")
    in_queue = f"TaskQueue = '{task_queue}'"

    view = ExecutionList(client, in_queue)
    try:
        assert view.error == "" and view.query == in_queue
        assert sorted(r["id"] for r in view.rows) == sorted(waiting + hellos)
        assert view.counts == {"running": 3, "completed": 2} and not view.counts_capped
        assert view.table.count_total == 5 and view.counts_error == ""

        # Narrower: only the completed HelloWF runs.
        assert view.set_query(f"{in_queue} AND WorkflowType = 'HelloWF'")
        assert sorted(r["id"] for r in view.rows) == sorted(hellos)
        assert {r["status"] for r in view.rows} == {"completed"}
        assert view.counts == {"completed": 2}
        narrowed = view.rows

        # A filter the engine cannot read: its message shows, the rows stay.
        assert not view.set_query("Nonsense = 'x'")
        assert "unknown search attribute 'Nonsense'" in view.error
        assert view.rows == narrowed and view.query.endswith("'HelloWF'")
        assert view.table.query == "Nonsense = 'x'"  # left in the box to be fixed

        # The front end sets the filter box's text when Enter is pressed.
        view.table.query = "WorkflowType ~ 'Hello'"
        assert "cannot stand here" in view.error and view.rows == narrowed
        view.table.query = in_queue
        assert view.error == "" and len(view.rows) == 5

        # A status chip narrows to that status (and is cleared by the "all" chip); the
        # filter stays as typed, and the counts still cover every status of it.
        view.table._handle_custom_msg({"type": "status", "status": "running"}, [])
        assert view.query == in_queue and view.status == "running"
        assert view.listed_query == f"({in_queue}) AND ExecutionStatus = 'Running'"
        assert view.table.status == "running" and view.table.query == in_queue
        assert sorted(r["id"] for r in view.rows) == sorted(waiting)
        assert view.counts == {"running": 3, "completed": 2}
        # Another chip replaces it (it does not pile up terms).
        assert view.set_status("completed")
        assert sorted(r["id"] for r in view.rows) == sorted(hellos)
        # A new filter keeps the chip: an OR inside it stays inside the parentheses.
        either = f"{in_queue} OR WorkflowId = '{waiting[0]}'"
        assert view.set_query(either) and view.status == "completed"
        assert sorted(r["id"] for r in view.rows) == sorted(hellos)
        view.table._handle_custom_msg({"type": "status", "status": None}, [])
        assert view.query == either and view.status is None and len(view.rows) == 5
        assert view.set_query(in_queue)

        # No filter: every run, the other queue's too.
        assert view.set_query("") and len(view.rows) == 6
        assert view.counts == {"running": 4, "completed": 2}
    finally:
        view.close()
    _assert_stopped(view)


async def test_a_bad_initial_filter_shows_no_rows_and_the_error(client: Client) -> None:
    await _start_waiting(client, "q-" + uuid.uuid4().hex[:6], 1, "one")
    view = ExecutionList(client, "ExecutionStatus = 'Sleeping'")
    try:
        assert (
            "invalid value for search attribute ExecutionStatus of type Keyword: 'Sleeping'"
            in view.error
        )
        assert view.rows == [] and view.query == "ExecutionStatus = 'Sleeping'"
    finally:
        view.close()
    _assert_stopped(view)


async def test_counts_are_exact_and_pages_follow_tokens_visiting_each_run_once(
    client: Client, task_queue: str
) -> None:
    ids = await _start_waiting(client, task_queue, 7, "page-" + uuid.uuid4().hex[:6])
    with pytest.warns(DeprecationWarning, match="count_limit is no longer used"):
        view = ExecutionList(client, f"TaskQueue = '{task_queue}'", page_size=3, count_limit=5)
    try:
        # More matches than a page (and than the old count_limit): still counted exactly.
        assert view.counts == {"running": 7} and not view.counts_capped
        assert view.table.count_total == 7

        pages = [[r["run_id"] for r in view.rows]]
        assert view.page == 1 and view.table.has_next and not view.table.has_previous
        while view.next_page():
            pages.append([r["run_id"] for r in view.rows])
            assert view.table.page == view.page == len(pages)
        assert [len(p) for p in pages] == [3, 3, 1]
        assert not view.table.has_next and view.table.has_previous
        seen = [run for page in pages for run in page]
        assert len(seen) == len(set(seen)) == 7
        assert sorted(r["id"] for r in view.rows) != []
        # Newest first: the last page holds the run started first.
        assert view.rows[0]["id"] == ids[0]

        # Back by the kept tokens, with the same rows as on the way forward.
        assert view.previous_page() and [r["run_id"] for r in view.rows] == pages[1]
        view.table._handle_custom_msg({"type": "previous"}, [])  # the front end's button
        assert view.page == 1 and [r["run_id"] for r in view.rows] == pages[0]
        assert not view.previous_page() and view.page == 1
        view.table._handle_custom_msg({"type": "next"}, [])
        assert view.page == 2 and [r["run_id"] for r in view.rows] == pages[1]

        # A new filter starts again from the first page.
        assert view.set_query(f"TaskQueue = '{task_queue}'") and view.page == 1
    finally:
        view.close()
    _assert_stopped(view)


async def test_clicking_a_row_opens_its_history_and_closing_closes_it(
    client: Client, task_queue: str
) -> None:
    prefix = "click-" + uuid.uuid4().hex[:6]
    first_id, second_id = await _start_waiting(client, task_queue, 2, prefix)
    view = ExecutionList(client, refresh_interval=0.05)
    try:
        assert view.history_view is None and view.detail.children == ()
        row = next(r for r in view.rows if r["id"] == first_id)

        # What the front end does on a click.
        view.table.selected = {"id": row["id"], "run_id": row["run_id"]}
        first = view.history_view
        assert isinstance(first, HistoryView) and view.detail.children == (first,)
        assert row["run_id"] in first.title and first.status == "running"
        assert first.refreshing  # the run is open: its history follows it

        # Another run replaces it; the first view is closed and stops following.
        second = view.open_run(second_id)
        assert second is view.history_view and view.detail.children == (second,)
        assert view.table.selected["id"] == second_id and view.table.selected["run_id"]
        assert view.table.selected["run_id"] in second.title
        assert not first.refreshing and first.comm is None

        # An unknown run leaves an error, not an exception, and the view shown stays.
        shown = dict(view.table.selected)
        assert view.open_run("no-such-workflow") is None
        assert "could not open workflow 'no-such-workflow'" in view.error
        assert view.history_view is second and view.table.selected == shown
        view.table.selected = {"id": first_id, "run_id": "no-such-run"}
        assert "could not open run no-such-run" in view.error
        assert view.history_view is second and view.table.selected == shown
        again = view.open_run(first_id, row["run_id"])
        assert again is not None and view.error == "" and second.comm is None

        # Unselecting (as the front end may) closes the view.
        view.table.selected = {}
        assert view.history_view is None and view.detail.children == ()
        assert again.comm is None and not again.refreshing
        third = view.open_run(second_id)
        assert third is not None
    finally:
        view.close()
    _assert_stopped(view)
    assert third.comm is None and not third.refreshing


async def test_a_click_that_arrives_on_a_subshell_thread_opens_the_history(
    client: Client, task_queue: str
) -> None:
    """With ipykernel 7, JupyterLab 4.4+ sends comm messages over kernel subshells (the
    project's pin keeps ipykernel 6 for now, see pyproject.toml): a click's state change
    is applied on a subshell's thread, neither the kernel's main thread nor the widgets'
    own, while the live refresh runs."""
    prefix = "subshell-" + uuid.uuid4().hex[:6]
    first_id, _ = await _start_waiting(client, task_queue, 2, prefix)
    view = ExecutionList(client, refresh_interval=0.05)
    try:
        row = next(r for r in view.rows if r["id"] == first_id)
        seen: list[str] = []

        def click() -> None:  # what ipykernel does with the comm message
            seen.append(threading.current_thread().name)
            view.table.set_state({"selected": {"id": row["id"], "run_id": row["run_id"]}})

        thread = threading.Thread(target=click, name="subshell-like")
        thread.start()
        await asyncio.to_thread(thread.join, 30)
        assert seen == ["subshell-like"] and not thread.is_alive()
        opened = view.history_view
        assert isinstance(opened, HistoryView) and view.detail.children == (opened,)
        assert row["run_id"] in opened.title and opened.refreshing and view.error == ""
    finally:
        view.close()
    _assert_stopped(view)


async def test_live_refresh_picks_up_new_runs_until_closed(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One run a page, so counting takes a query of its own (done every COUNT_INTERVAL).
    monkeypatch.setattr(execution_list, "COUNT_INTERVAL", 0.2)
    prefix = "live-" + uuid.uuid4().hex[:6]
    await _start_waiting(client, task_queue, 1, prefix)
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'", page_size=1, refresh_interval=0.05)
    try:
        assert len(view.rows) == 1 and view.refreshing and not view.table.has_next
        assert _live.subscriptions() == 1 and _live.live_thread() is not None
        handle = await client.start_workflow(
            SignalWF.run, 1, id=f"{prefix}-new", task_queue=task_queue
        )
        await eventually(
            lambda: view.rows[0]["id"] == handle.id and view.table.has_next,
            "the new run at the top of the list",
        )
        await eventually(lambda: view.counts == {"running": 2}, "the new run counted")

        # A finishing run changes status in place.
        await handle.signal(SignalWF.add_message, "done")
        async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
            await handle.result()
        # Open runs are listed first (as Temporal lists them): it moves below the other.
        await eventually(
            lambda: view.rows[0]["id"] != handle.id and view.rows[0]["status"] == "running",
            "the completed run below the open one",
        )
        await eventually(
            lambda: view.counts == {"running": 1, "completed": 1}, "the completed run counted"
        )
    finally:
        view.close()
    _assert_stopped(view)
    assert view.table.live is False and view.comm is None and view.table.comm is None


# -- failures, idleness and quiet ticks of the live refresh -----------------------------


class _Reads:
    """Wraps ``client.list_workflows`` and ``count_workflows``: the monotonic time of each
    call (``kinds``: a page or a count), and raises while ``broken``."""

    def __init__(self, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
        self.times: list[float] = []
        self.kinds: list[str] = []
        self.broken = False
        real_list, real_count = client.list_workflows, client.count_workflows

        def list_workflows(*args: Any, **kwargs: Any) -> Any:
            self.times.append(time.monotonic())
            self.kinds.append("page")
            if self.broken:
                raise ConnectionError("the database went away")
            return real_list(*args, **kwargs)

        async def count_workflows(*args: Any, **kwargs: Any) -> Any:
            self.times.append(time.monotonic())
            self.kinds.append("count")
            if self.broken:
                raise ConnectionError("the database went away")
            return await real_count(*args, **kwargs)

        monkeypatch.setattr(client, "list_workflows", list_workflows)
        monkeypatch.setattr(client, "count_workflows", count_workflows)

    def __len__(self) -> int:
        return len(self.times)


async def test_failing_reads_show_back_off_and_stop_the_refresh(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval = 0.05
    await _start_waiting(client, task_queue, 2, "fail-" + uuid.uuid4().hex[:6])
    reads = _Reads(client, monkeypatch)
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'", refresh_interval=interval)
    try:
        rows = view.rows
        assert len(rows) == 2 and view.error == "" and view.table.live

        # A read fails: it shows, and the refresh tries again; once a read works the
        # message goes away.
        reads.broken = True
        await eventually(lambda: "retrying" in view.error, "the failure shown")
        assert re.fullmatch(
            r"live refresh failed: the database went away \(retrying, [1-4] of 5\)", view.error
        )
        assert view.rows == rows and view.refreshing and view.table.live
        reads.broken = False
        await eventually(lambda: view.error == "", "the error cleared by a read that works")
        assert view.refreshing and view.table.live and view.rows == rows

        # The store goes away for good: five failures in a row, each after a longer
        # pause, stop the refresh; the widget says so and the thread ends.
        first = len(reads)
        reads.broken = True  # fails at once; then the closed store fails the reads
        await eventually(lambda: "retrying" in view.error, "the first failure")
        await client.close()
        reads.broken = False
        await eventually(lambda: not view.refreshing, "the refresh stopped")
        assert view.error == "live refresh stopped: the store is closed"
        assert not view.table.live and view.rows == rows
        await eventually(
            lambda: _live.live_thread() is None and widget_threads() == [],
            "the widgets thread gone",
        )
        failed = reads.times[first:]
        assert len(failed) == 5, failed
        gaps = [b - a for a, b in itertools.pairwise(failed)]
        for n, gap in enumerate(gaps, start=1):  # interval * 2**failures, not interval
            assert gap >= 0.9 * interval * 2**n, gaps
        assert len(reads) == first + 5  # and nothing after the stop
    finally:
        view.close()
    _assert_stopped(view)


async def test_nothing_is_read_while_no_view_is_open(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_live, "IDLE_AFTER", 0.0)
    # One run a page, so the counts take a query of their own.
    monkeypatch.setattr(execution_list, "COUNT_INTERVAL", 0.05)
    await _start_waiting(client, task_queue, 2, "idle-" + uuid.uuid4().hex[:6])
    reads = _Reads(client, monkeypatch)
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'", page_size=1, refresh_interval=0.01)
    opened, closed = {"type": "view", "open": True}, {"type": "view", "open": False}
    try:
        # Never rendered (a script, a test): never idle.
        n = len(reads)
        await eventually(lambda: reads.kinds[n:].count("count") >= 2, "reads before any view")

        # Two views (two outputs of the same widget); one goes: still read.
        view.table._handle_custom_msg(opened, [])
        view.table._handle_custom_msg(opened, [])
        view.table._handle_custom_msg(closed, [])
        n = len(reads)
        await eventually(lambda: reads.kinds[n:].count("count") >= 2, "reads with a view open")

        # The last view goes: the refresh keeps ticking but reads nothing, not even counts.
        idle_at: list[int] = []  # the number of reads at each idle tick
        idle = view._views.idle

        def watched() -> bool:
            out = idle()
            if out:
                idle_at.append(len(reads))
            return out

        monkeypatch.setattr(view._views, "idle", watched)
        view.table._handle_custom_msg(closed, [])
        await eventually(lambda: len(idle_at) >= 20, "twenty idle ticks")
        assert len(set(idle_at)) == 1 and len(reads) == idle_at[0]
        assert view.refreshing and view.table.live

        # A view opens again: reads (and counts) resume.
        view.table._handle_custom_msg(opened, [])
        n = len(reads)
        await eventually(lambda: reads.kinds[n:].count("count") >= 2, "reads resumed")
        assert reads.kinds[n:].count("page") >= 2
    finally:
        view.close()
    _assert_stopped(view)


async def test_open_runs_rows_do_not_change_when_nothing_happens(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _start_waiting(client, task_queue, 3, "quiet-" + uuid.uuid4().hex[:6])
    reads = _Reads(client, monkeypatch)
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'", refresh_interval=0.01)
    try:
        assert [r["status"] for r in view.rows] == ["running"] * 3
        assert all(r["took"] == "" for r in view.rows)
        rows = view.rows
        changes: list[str] = []
        view.table.observe(lambda change: changes.append(change["name"]))
        sent: list[Any] = []  # the messages to the front end
        send = view.table._send

        def recording(msg: Any, buffers: Any = None) -> None:
            sent.append(msg)
            send(msg, buffers)

        monkeypatch.setattr(view.table, "_send", recording)
        n = len(reads)
        await eventually(lambda: len(reads) >= n + 5, "five more ticks")
        assert changes == [] and sent == [] and view.rows == rows
    finally:
        view.close()
    _assert_stopped(view)
