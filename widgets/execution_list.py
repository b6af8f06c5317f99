"""ExecutionList: runs matching a list filter, counted by status, a page at a time, live."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from html import escape
from typing import Any

import anywidget
import ipywidgets
import traitlets

from engine import Client, WorkflowExecution, WorkflowExecutionStatus
from engine.client import WorkflowExecutionCount
from engine.exceptions import InvalidArgumentError

from . import _live
from ._snapshot import StaticDisplay, html_table
from ._source import seconds
from ._static import CSS, esm
from .history_view import HistoryView
from .models import STATUS_COLOURS, short_id
from .search_attributes import attribute_text, attribute_values, catalogue, suggestions

__all__ = [
    "ExecutionList",
    "ExecutionTable",
    "StatusCounts",
    "count_statuses",
    "execution_row",
    "status_name",
    "with_status",
]


#: The statuses in the order their chips appear.
STATUSES = [s.name.lower() for s in WorkflowExecutionStatus]

#: Seconds between two counts by status while the list refreshes live.
COUNT_INTERVAL = 5.0


# -- pure view model --------------------------------------------------------------------


def status_name(status: WorkflowExecutionStatus) -> str:
    """``WorkflowExecutionStatus.TIMED_OUT`` → ``"timed_out"`` (the key of the colours)."""
    return status.name.lower()


def _query_status(status: str) -> str:
    """``"timed_out"`` → ``"TimedOut"``, as the list filter spells it."""
    return "".join(part.capitalize() for part in status.split("_"))


#: ``"TimedOut"`` (a status as a count's group names it) → ``"timed_out"``.
_STATUS_OF_NAME = {_query_status(s): s for s in STATUSES}


def with_status(query: str, status: str | None) -> str:
    """``query`` narrowed to the runs of ``status`` (``query`` itself when None): the
    filter is kept whole, in parentheses, whatever it says.

    ``with_status("WorkflowType = 'A' OR TaskQueue = 'q'", "running")`` →
    ``"(WorkflowType = 'A' OR TaskQueue = 'q') AND ExecutionStatus = 'Running'"``. A
    filter with ``ORDER BY`` cannot be narrowed so (the engine says where it fails).
    """
    query = query.strip()
    if not status:
        return query
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
    term = f"ExecutionStatus = '{_query_status(status)}'"
    return f"({query}) AND {term}" if query else term


def count_query(query: str) -> str:
    """The count by status of ``query``'s matches: ``"<query> GROUP BY ExecutionStatus"``."""
    return f"{query.strip()} GROUP BY ExecutionStatus".strip()


def _took(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    if value < 172800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"


def execution_row(execution: WorkflowExecution) -> dict[str, Any]:
    """One listed run as the JSON-able row the table shows (times in UTC).

    An open run has no "took" yet (its status chip says it runs): a row depends only on
    what is recorded, so a live refresh of a page where nothing happened changes nothing
    and sends nothing to the front end. ``run_id_short`` is the run id by its end
    (``…3f9a1c2d``): run ids are UUIDv7, whose start is the same for runs started together.
    """
    status = status_name(execution.status)
    start = execution.start_time.timestamp()
    closed = execution.close_time
    return {
        "id": execution.id,
        "run_id": execution.run_id,
        "run_id_short": short_id(execution.run_id),
        "workflow_type": execution.workflow_type,
        "task_queue": execution.task_queue,
        "status": status,
        "status_colour": STATUS_COLOURS.get(status, "#868e96"),
        "start": start,
        "started": execution.start_time.strftime("%Y-%m-%d %H:%M:%S"),
        "closed": closed.strftime("%Y-%m-%d %H:%M:%S") if closed else "",
        "took": _took(max(0.0, closed.timestamp() - start)) if closed else "",
        "history_length": execution.history_length,
        # The run's search attributes as text (chips "CustomerId=abc"), by name.
        "search_attributes": {
            name: attribute_text(value) for name, value in attribute_values(execution).items()
        },
    }


@dataclass(frozen=True)
class StatusCounts:
    """Matches by status. ``capped``: counts of the first ``total`` matches only (only
    :func:`count_statuses` with a limit makes such counts; the list's are exact).
    ``error``: why there are no counts (a filter that cannot be counted, one with
    ``ORDER BY``), else ``""``."""

    by_status: dict[str, int]
    total: int
    capped: bool = False
    error: str = ""

    def text(self, status: str | None = None) -> str:
        """``"12"`` (``"12+"`` when capped)."""
        n = self.total if status is None else self.by_status.get(status, 0)
        return f"{n}+" if self.capped else str(n)

    @staticmethod
    def of(count: WorkflowExecutionCount) -> StatusCounts:
        """From ``client.count_workflows("... GROUP BY ExecutionStatus")``."""
        counts: Counter[str] = Counter()
        for group in count.groups:
            (name,) = group.group_values
            counts[_STATUS_OF_NAME.get(str(name), str(name).lower())] += group.count
        return StatusCounts(_ordered(counts), count.count)


def count_statuses(executions: Iterable[WorkflowExecution], limit: int) -> StatusCounts:
    """Count the first ``limit`` executions by status; ``capped`` if there were more."""
    counts: Counter[str] = Counter()
    total = 0
    for execution in executions:
        if total == limit:
            return StatusCounts(_ordered(counts), total, True)
        counts[status_name(execution.status)] += 1
        total += 1
    return StatusCounts(_ordered(counts), total, False)


def _ordered(counts: Counter[str]) -> dict[str, int]:
    known = {s: counts[s] for s in STATUSES if counts[s]}
    return known | {s: n for s, n in counts.items() if s not in known and n}


# -- the table (anywidget) --------------------------------------------------------------


class ExecutionTable(anywidget.AnyWidget):  # type: ignore[misc]
    """The table part of :class:`ExecutionList`: filter box (with attribute names
    suggested as you type), status chips, rows with their search attributes, pager.

    The front end sets ``query`` (Enter in the filter box) and ``selected`` (a click on a
    row), and sends ``{"type": "next" | "previous" | "status"}`` messages; the
    :class:`ExecutionList` that owns it does the rest. ``status`` is the chip pressed
    ("" for all), ``attributes`` the names the filter box suggests.
    """

    _esm = esm("execution_list.js", "suggest.js")
    _css = CSS

    query = traitlets.Unicode("").tag(sync=True)
    applied_query = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    rows: traitlets.List[dict[str, Any]] = traitlets.List([]).tag(sync=True)
    counts = traitlets.Dict({}).tag(sync=True)
    count_total = traitlets.Int(0).tag(sync=True)
    counts_error = traitlets.Unicode("").tag(sync=True)
    attributes: traitlets.List[dict[str, Any]] = traitlets.List([]).tag(sync=True)
    page = traitlets.Int(1).tag(sync=True)
    page_size = traitlets.Int(50).tag(sync=True)
    has_next = traitlets.Bool(False).tag(sync=True)
    has_previous = traitlets.Bool(False).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Dict({}).tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)


@dataclass
class _Page:
    rows: list[dict[str, Any]]
    next_token: bytes | None
    counts: StatusCounts


class _BadFilter(Exception):
    """A filter the engine refused: the message says where (and the filter)."""


class ExecutionList(StaticDisplay, ipywidgets.VBox):  # type: ignore[misc]
    """Runs matching a list filter, newest first: status chips with counts, a page at a
    time, refreshed live; clicking a run opens its :class:`HistoryView` below the table.

    ``query`` is Temporal's List Filter, the whole language (``CustomerId = 'c1' AND
    (StartTime > '2026-12-01T00:00:00Z' OR ExecutionStatus IN ('Failed', 'TimedOut'))``,
    custom search attributes once registered); the filter box suggests attribute names
    (the system ones and the namespace's custom ones) for the word under the cursor. A
    filter the engine cannot read shows its message (with the column) as :attr:`error`,
    and the previous rows stay. A status chip (:meth:`set_status`) narrows the list to
    ``(<query>) AND ExecutionStatus = '<status>'``; the chips' counts are exact, from
    ``client.count_workflows("<query> GROUP BY ExecutionStatus")``, and cover the whole
    filter whichever chip is pressed (a filter with ``ORDER BY`` lists, but cannot be
    counted or narrowed by a chip: :attr:`counts_error` says so). Each row shows the
    run's search attributes as chips (``CustomerId=abc``). The current page is re-read
    every ``refresh_interval`` (the counts every few seconds) while the
    widget is open, and not at all while no view of it is shown. A failed read shows in
    :attr:`error` and is retried after a growing pause; after five in a row the refresh
    stops and says so. :meth:`stop` ends the refresh (and the history view's) and
    leaves both on screen as they are; :meth:`close` stops it and removes the widget.
    ``count_limit`` is no longer used (counts are exact) and warns when given.

    Its display data holds, besides the widget view, the page of runs and the counts by
    status as HTML, so a saved notebook shows them without a kernel.
    """

    def __init__(
        self,
        client: Client,
        query: str = "",
        *,
        page_size: int = 50,
        refresh_interval: float | timedelta = 1.0,
        count_limit: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"expected an engine Client, not {type(client).__name__}")
        if not 1 <= page_size <= 500:
            raise ValueError(f"page_size must be between 1 and 500, not {page_size}")
        if count_limit is not None:
            warnings.warn(
                "ExecutionList's count_limit is no longer used: the counts by status are "
                "exact (client.count_workflows)",
                DeprecationWarning,
                stacklevel=2,
            )
        self._interval = seconds(refresh_interval)
        self._client = client
        self._page_size = page_size
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every change of query, status or page
        self._applied = ""
        self._status: str | None = None  # the status chip pressed (None: all)
        self._tokens: list[bytes | None] = [None]  # the token of each page visited
        self._next: bytes | None = None
        self._counts: StatusCounts | None = None
        self._syncing = False  # set while Python itself writes query / selected
        self._view: HistoryView | None = None
        self._view_key: dict[str, str] = {}  # the run whose history is shown
        self._open_failed = False
        self._refresh_error = ""  # what the live refresh last put in the table's error
        self._closed = False
        self._frozen = False  # stop(): no live refresh, and no live history view
        self._views = _live.Views()  # the table's open front-end views
        self.table = ExecutionTable(page_size=page_size)
        self.detail = ipywidgets.VBox()
        super().__init__(children=[self.table, self.detail], **kwargs)
        self.add_class("dn-execution-list")
        self._load_attributes()
        if not self.set_query(query):
            self._applied = self.table.applied_query = query.strip()  # no rows, not all rows
        self.table.observe(self._on_query, names=["query"])
        self.table.observe(self._on_selected, names=["selected"])
        self.table.on_msg(self._on_message)
        self._subscription = _live.subscribe(self._refresh, f"executions {client.namespace}")
        self.table.live = True

    def __repr__(self) -> str:
        if not hasattr(self, "_subscription"):  # the constructor failed
            return "<ExecutionList (not built)>"
        counts = StatusCounts(self.counts, int(self.table.count_total))
        by_status = ", ".join(f"{s.replace('_', ' ')} {counts.text(s)}" for s in counts.by_status)
        query = f" matching {self._applied!r}" if self._applied else ""
        if self._status:
            showing = f"showing {self._status.replace('_', ' ')}"
            by_status = f"{by_status}; {showing}" if by_status else showing
        total = "?" if self.counts_error else counts.text()
        return (
            f"<ExecutionList {total} runs{query}"
            + (f" ({by_status})" if by_status else "")
            + f" · page {self.page}{' · live' if self.refreshing else ''}>"
        )

    # -- what the table shows (read-only views of its traits) ---------------------------

    @property
    def query(self) -> str:
        """The filter whose matches are listed (the last one the engine accepted),
        without the status chip's narrowing (see :attr:`listed_query`)."""
        return self._applied

    @property
    def status(self) -> str | None:
        """The status chip pressed (``"running"``, ...), or None for every status."""
        return self._status

    @property
    def listed_query(self) -> str:
        """What is listed: :attr:`query` narrowed by the status chip (:func:`with_status`)."""
        return with_status(self._applied, self._status)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The runs of the current page, as the table shows them (``search_attributes``:
        name → value as text)."""
        return list(self.table.rows)

    @property
    def counts(self) -> dict[str, int]:
        """Matches of :attr:`query` by status, exact (whichever chip is pressed); empty,
        with :attr:`counts_error` set, when the filter cannot be counted."""
        return dict(self.table.counts)

    @property
    def counts_error(self) -> str:
        """Why there are no counts (the engine's message), or ``""``."""
        return str(self.table.counts_error)

    @property
    def counts_capped(self) -> bool:
        """Always False: the counts are exact (kept for code written when they were not)."""
        return False

    @property
    def attributes(self) -> list[dict[str, Any]]:
        """The search attributes the filter box suggests: ``{name, type, custom}`` each."""
        return list(self.table.attributes)

    @property
    def error(self) -> str:
        """The last error (a filter the engine refused, a run that could not open, a
        failed live refresh)."""
        return str(self.table.error)

    @property
    def page(self) -> int:
        """The page shown, from 1."""
        return len(self._tokens)

    @property
    def history_view(self) -> HistoryView | None:
        """The history of the run last clicked, while it is open."""
        return self._view

    @property
    def refreshing(self) -> bool:
        """Whether the live refresh runs."""
        return self._subscription.active

    # -- reading pages ------------------------------------------------------------------

    async def _fetch(
        self,
        query: str,
        status: str | None,
        token: bytes | None,
        counts: StatusCounts | None = None,
    ) -> _Page:
        """Read a page of ``query`` narrowed to ``status``; count ``query``'s matches by
        status unless ``counts`` (still current) is given and counting would take a query
        of its own."""
        client = self._client
        listed = with_status(query, status)
        listing = client.list_workflows(
            listed or None, page_size=self._page_size, next_page_token=token
        )
        try:
            await listing.fetch_next_page()
        except InvalidArgumentError as err:
            raise _BadFilter(_describe(err, listed)) from err
        page = listing.current_page or []
        if status is None and token is None and listing.next_page_token is None:
            counts = count_statuses(page, len(page) + 1)  # every match is on this page
        elif counts is None:
            counting = count_query(query)
            try:
                counts = StatusCounts.of(await client.count_workflows(counting))
            except InvalidArgumentError as err:  # ORDER BY, say: the rows still show
                counts = StatusCounts({}, 0, error=f"no counts: {err} (counting: {counting})")
        return _Page([execution_row(e) for e in page], listing.next_page_token, counts)

    def _show(self, page: _Page) -> None:
        """Put a page on the table; call with ``_lock`` held."""
        table = self.table
        with table.hold_sync():
            table.rows = page.rows
            table.counts = page.counts.by_status
            table.count_total = page.counts.total
            table.counts_error = page.counts.error
            table.page = len(self._tokens)
            table.has_previous = len(self._tokens) > 1
            table.has_next = page.next_token is not None
            table.applied_query = self._applied
            table.status = self._status or ""
        self._next, self._counts = page.next_token, page.counts

    def _load(self, query: str, status: str | None, tokens: list[bytes | None]) -> bool:
        """Read the page ``tokens[-1]`` of ``query`` narrowed to ``status`` and show it;
        on an error keep the rows and show the error instead."""
        try:
            page = _live.call(self._fetch(query, status, tokens[-1]))
        except _BadFilter as err:
            self.table.error = str(err)
            return False
        except Exception as err:
            self.table.error = _describe(err, with_status(query, status))
            return False
        with self._lock:
            self._generation += 1
            self._applied, self._status, self._tokens = query, status, tokens
            self._show(page)
            self.table.error = ""
        return True

    def _load_attributes(self) -> None:
        """Read the names the filter box suggests (the system ones and the namespace's
        custom ones); on an error keep those it had (suggestions are a help, not data)."""
        try:
            names = _live.call(catalogue(self._client))
        except Exception:  # the list itself reports a store that is gone
            return
        self.table.attributes = suggestions(names)

    def set_query(self, query: str) -> bool:
        """List the runs matching ``query`` from the first page (the status chip pressed
        stays); returns False (and shows the engine's message, keeping the rows) when
        the filter cannot be read. The suggested attribute names are read again too
        (one registered meanwhile is offered)."""
        query = query.strip()
        self._syncing = True
        try:
            self.table.query = query
        finally:
            self._syncing = False
        if getattr(self, "_subscription", None) is not None:  # the constructor read them
            self._load_attributes()
        return self._load(query, self._status, [None])

    def set_status(self, status: str | None) -> bool:
        """Press a status chip (``"running"``, ...; None for every status): list the
        filter's runs of that status from the first page. Returns False (showing why)
        when the filter cannot be narrowed (one with ``ORDER BY``)."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        return self._load(self._applied, status, [None])

    def next_page(self) -> bool:
        """Show the next page; returns False on the last page."""
        if self._next is None:
            return False
        return self._load(self._applied, self._status, [*self._tokens, self._next])

    def previous_page(self) -> bool:
        """Show the previous page; returns False on the first page."""
        if len(self._tokens) < 2:
            return False
        return self._load(self._applied, self._status, self._tokens[:-1])

    def refresh(self) -> bool:
        """Read the current page again now."""
        return self._load(self._applied, self._status, list(self._tokens))

    async def _refresh(self) -> None:
        # Counting takes a query of its own (unless the first page holds every match):
        # the live refresh does it every COUNT_INTERVAL, not at every tick.
        loop = asyncio.get_running_loop()
        counted_at = loop.time()
        await asyncio.sleep(self._interval)  # the constructor has just read the page

        async def read() -> tuple[int, Any]:
            nonlocal counted_at
            with self._lock:
                generation, query, token = self._generation, self._applied, self._tokens[-1]
                status = self._status
                count = loop.time() - counted_at >= COUNT_INTERVAL
                counts = None if count else self._counts
            page = await self._fetch(query, status, token, counts)
            if count:
                counted_at = loop.time()
            return generation, page

        def show(read_back: tuple[int, Any]) -> bool:
            generation, page = read_back
            with self._lock:
                if not self._closed and generation == self._generation:
                    self._show(page)  # else the filter or page changed meanwhile
            return True

        await _live.refresh_loop(
            read,
            show,
            interval=self._interval,
            views=self._views,
            on_error=self._refresh_failed,
            name="the execution list",
        )
        self._publish_snapshot()  # the refresh gave up: the outputs get the last page

    def _refresh_failed(self, message: str, stopped: bool) -> None:
        """Show a failed read of the live refresh (and that it stopped); ``""``: reads
        work again, so clear what the refresh showed (not a bad filter's message)."""
        with self._lock:
            if self._closed:
                return
            with self.table.hold_sync():
                if not message:
                    if self._refresh_error and self.table.error == self._refresh_error:
                        self.table.error = ""
                else:
                    self.table.error = message
                self._refresh_error = message
                if stopped:
                    self.table.live = False

    # -- the front end's requests -------------------------------------------------------

    def _on_query(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._load_attributes()
            self._load(str(change["new"]).strip(), self._status, [None])

    def _on_message(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        if self._views.message(content):
            return
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "next":
            self.next_page()
        elif kind == "previous":
            self.previous_page()
        elif kind == "refresh":
            self.refresh()
        elif kind == "query":
            self.set_query(str(content.get("query", "")))
        elif kind == "status":
            status = content.get("status") or None
            if status is None or status in STATUSES:
                self.set_status(status)

    def _on_selected(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        selected = change["new"] or {}
        if selected.get("id"):
            self._open(str(selected["id"]), str(selected.get("run_id") or "") or None)
        else:
            self._close_view()

    # -- the history of the clicked run -------------------------------------------------

    def open_run(self, workflow_id: str, run_id: str | None = None) -> HistoryView | None:
        """Select a run (the latest of ``workflow_id`` unless ``run_id`` is given) and
        show its history below the table; returns the view, or None when the run could
        not be opened (the error shows and the previous view stays)."""
        return self._open(workflow_id, run_id)

    def _open(self, workflow_id: str, run_id: str | None) -> HistoryView | None:
        try:
            if run_id is None:
                handle = self._client.get_workflow_handle(workflow_id)
                run_id = _live.call(handle.describe()).run_id
            view = HistoryView(self._client.get_workflow_handle(workflow_id, run_id=run_id))
        except Exception as err:
            self._select(self._view_key)  # back to the run still shown
            which = f"run {run_id} of workflow" if run_id else "workflow"
            self.table.error = f"could not open {which} {workflow_id!r}: {err}"
            self._open_failed = True
            return None
        if self._frozen:
            view.stop()  # a stopped list opens snapshots, not live views
        previous, self._view = self._view, view
        self._view_key = {"id": workflow_id, "run_id": run_id}
        self._select(self._view_key)
        self.detail.children = (view,)
        if previous is not None:
            previous.close()
        if self._open_failed:
            self._open_failed = False
            self.table.error = ""
        return view

    def _select(self, key: dict[str, str]) -> None:
        self._syncing = True
        try:
            self.table.selected = dict(key)
        finally:
            self._syncing = False

    def _close_view(self) -> None:
        view, self._view, self._view_key = self._view, None, {}
        self._select({})
        self.detail.children = ()
        if view is not None:
            view.close()

    def stop(self) -> None:
        """Stop the live refresh (and the history view's) and keep the widget on screen
        as it is: no background thread is left once no widget is live, and the saved
        output gets a static snapshot of the page. The filter, pager and rows still
        answer (a run opened now shows its history without following it).
        :meth:`close` removes the widget as well."""
        subscription = getattr(self, "_subscription", None)  # None: construction failed
        if subscription is None:
            return
        with self._lock:
            self._frozen = True
        subscription.cancel()
        self.table.live = False
        if self._view is not None:
            self._view.stop()
        self._publish_snapshot()

    def close(self) -> None:
        """Stop the refresh, close the history view and the widget (ipywidgets' close:
        every view of it is removed, its output goes blank; see :meth:`stop`)."""
        subscription = getattr(self, "_subscription", None)  # None: construction failed
        if subscription is not None:
            with self._lock:
                self._closed = True
            subscription.cancel()
            self._close_view()
            self.table.live = False
            self.table.close()
            self.detail.close()
        super().close()

    # -- static fallbacks ---------------------------------------------------------------

    def _static_html(self) -> str:
        rows = self.rows
        counts = StatusCounts(self.counts, int(self.table.count_total))
        chips = self.counts_error or " · ".join(
            [f"all {counts.text()}"]
            + [f"{s.replace('_', ' ')} {counts.text(s)}" for s in counts.by_status]
        )
        listed = self.listed_query
        query = f"<p>filter: <code>{escape(listed)}</code></p>" if listed else ""
        table = html_table(
            [
                "status",
                "workflow id",
                "type",
                "run id",
                "task queue",
                "started (UTC)",
                "took",
                "events",
                "search attributes",
            ],
            [
                (
                    r["status"].replace("_", " "),
                    r["id"],
                    r["workflow_type"],
                    r.get("run_id_short") or short_id(r["run_id"]),
                    r["task_queue"],
                    r["started"],
                    r["took"],
                    r["history_length"],
                    "; ".join(f"{k}={v}" for k, v in r.get("search_attributes", {}).items()),
                )
                for r in rows
            ],
            failed=[r["status"] in ("failed", "timed_out") for r in rows],
        )
        more = " · more on the next page" if self.table.has_next else ""
        error = f"<p><em>{escape(self.error)}</em></p>" if self.error else ""
        return (
            f'<div class="dn-static dn-xl">{query}<p><strong>{escape(chips)}</strong></p>'
            f"{error}{table}<p>page {self.page}{more}</p></div>"
        )

    def _static_text(self) -> str:
        lines = [repr(self)]
        for r in self.rows[:30]:
            run = r.get("run_id_short") or short_id(r["run_id"])
            lines.append(f"  {r['status']:<16} {r['id']}  {r['workflow_type']}  run {run}")
        if len(self.rows) > 30:
            lines.append(f"  … {len(self.rows) - 30} more on this page")
        return "\n".join(lines)


def _describe(err: Exception, query: str) -> str:
    message = str(err) or type(err).__name__
    if query and query not in message:
        message = f"{message} (filter: {query})"
    return message
