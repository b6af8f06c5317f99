"""HistoryView: a run's event history as a table that grows while the run progresses."""

from __future__ import annotations

import threading
from datetime import timedelta
from html import escape
from typing import Any

import anywidget
import traitlets

from engine import DataConverter, HistoryEvent, WorkflowHandle, WorkflowHistory

from ._snapshot import html_table
from ._source import LiveRunView, RunSource, seconds
from ._static import CSS, esm
from .models import CompactRow, HistoryModel, offset_text

__all__ = ["HistoryView"]

MODES = ("compact", "full")


class HistoryView(LiveRunView, anywidget.AnyWidget):  # type: ignore[misc]
    """The event history of a run, live while it is open.

    ``HistoryView(handle)`` follows a run (new events appear as they are recorded, every
    ``refresh_interval``); ``HistoryView(history)`` shows a recorded one. The compact view
    has one row per activity, timer, child, signal, update and marker (with its status and
    attempts); the full view one row per event. Rows are coloured by category, failures
    are highlighted, and selecting a row shows its attributes with payloads decoded. The
    run's static summary heads the table (its static details open below it), and a step
    with a ``summary=`` shows it first in its summary cell: always as plain text.
    ``data_converter`` decodes them (by default the handle's client's).

    Only the rows in view are sent to the browser (``window_size`` at a time), so a
    50,000-event history opens as fast as a short one. The refresh pauses while no view of
    the widget is on screen, stops by itself once the run has closed, shows what went wrong
    if the database cannot be read, and stops for good with :meth:`stop` (the table
    stays on screen as it is) or :meth:`close` (the widget is removed).

    Its display data holds, besides the widget view, the compact rows as an HTML table
    (and a text summary), so a saved notebook shows the history without a kernel.
    """

    _esm = esm("history_view.js")
    _css = CSS

    title = traitlets.Unicode("").tag(sync=True)
    #: The run's ``static_summary`` / ``static_details`` as text ("" for none).
    run_summary = traitlets.Unicode("").tag(sync=True)
    run_details = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    mode = traitlets.Unicode("compact").tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    event_count = traitlets.Int(0).tag(sync=True)
    failure_count = traitlets.Int(0).tag(sync=True)
    window_start = traitlets.Int(0).tag(sync=True)
    window_size = traitlets.Int(100).tag(sync=True)
    #: The rows of the window, and the index of the first (they travel together, so the
    #: front end places rows computed for an older window where they belong).
    rows = traitlets.List([]).tag(sync=True)
    rows_start = traitlets.Int(0).tag(sync=True)
    #: The attributes (payloads decoded) of the selected row, sent only for that row.
    detail = traitlets.Unicode("").tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)

    error = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def __init__(
        self,
        source: WorkflowHandle | WorkflowHistory,
        *,
        mode: str = "compact",
        window_size: int = 100,
        refresh_interval: float | timedelta = 0.5,
        data_converter: DataConverter | None = None,
        **kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if not 30 <= window_size <= 2000:
            raise ValueError(f"window_size must be between 30 and 2000, not {window_size}")
        interval = seconds(refresh_interval)
        self._lock = threading.RLock()
        self._source = RunSource(source, attempts=False, data_converter=data_converter)
        self._model = HistoryModel(self._source.events, data_converter=self._source.data_converter)
        super().__init__(mode=mode, window_size=window_size, **kwargs)
        with self.hold_sync():
            self._update_header()
            self._update_rows()
            self.live = self._source.live
        self.observe(self._on_view_change, names=["mode", "window_start", "window_size"])
        self.observe(self._on_select, names=["selected"])
        self._follow(f"history {self._source.workflow_id}", interval)

    def __repr__(self) -> str:
        return f"<HistoryView {self.title} · {self.status} · {self.event_count} events>"

    # -- static fallbacks ---------------------------------------------------------------

    def _heading(self) -> str:
        failures = self.failure_count
        more = f" · {failures} failure{'' if failures == 1 else 's'}" if failures else ""
        return f"{self.title} · {self.status.replace('_', ' ')} · {self.event_count} events{more}"

    def _static_html(self) -> str:
        with self._lock:
            rows = self._model.compact()
            heading = self._heading()
        table = html_table(
            ["kind", "name", "status", "attempts", "at", "took", "summary"],
            [_cells(r) for r in rows],
            failed=[r.failed for r in rows],
        )
        about = _about_html(self._model.static_summary, self._model.static_details)
        return (
            f'<div class="dn-static dn-history"><p><strong>{escape(heading)}</strong></p>'
            f"{about}{table}</div>"
        )

    def _static_text(self) -> str:
        with self._lock:
            rows = self._model.compact()
        lines = [repr(self)]
        if self._model.static_summary:
            lines.append(f"  {self._model.static_summary}")
        for r in rows[:30]:
            kind, label, status, attempts, at, took, _summary = _cells(r)
            note = f"— {r.user_summary}" if r.user_summary else ""
            lines.append(
                "  ".join(p for p in (f"{kind:<13}", label, status, attempts, at, took, note) if p)
            )
        if len(rows) > 30:
            lines.append(f"… {len(rows) - 30} more rows")
        return "\n".join(lines)

    # -- model --------------------------------------------------------------------------

    @property
    def model(self) -> HistoryModel:
        """The view model behind the table (events, compact rows)."""
        return self._model

    def _update_header(self) -> None:
        model, source = self._model, self._source
        workflow_type = ""
        status = "running" if source.live else "closed"
        for row in model.compact()[:1]:
            workflow_type, status = row.label, row.status
        parts = [source.workflow_id, workflow_type, f"run {source.run_id}" if source.run_id else ""]
        self.title = " · ".join(p for p in parts if p)
        self.run_summary = model.static_summary
        self.run_details = model.static_details
        self.status = status
        self.event_count = len(model.events)
        self.failure_count = model.failures
        self.total = model.count(self.mode)

    def _update_rows(self) -> None:
        start = max(0, min(self.window_start, max(0, self.total - 1)))
        self.rows = self._model.rows(self.mode, start, start + self.window_size)
        self.rows_start = start

    def _on_select(self, _change: dict[str, Any]) -> None:
        with self._lock:
            self.detail = self._model.detail(self.mode, self.selected)

    def _on_view_change(self, change: dict[str, Any]) -> None:
        if change["name"] == "mode" and change["new"] not in MODES:
            self.mode = change["old"]
            return
        with self._lock, self.hold_sync():
            self.total = self._model.count(self.mode)
            if change["name"] == "mode":
                self.window_start = 0
                self.selected = -1
                self.detail = ""
            self._update_rows()

    def _apply(self, events: list[HistoryEvent], _attempts: Any) -> bool:
        with self._lock:
            if events:
                window_end = self.window_start + self.window_size
                before = self.total
                self._model.extend(events)
                with self.hold_sync():
                    self._update_header()
                    # Rows already in the window may have changed (compact rows gain
                    # events); rows past the window are fetched when scrolled to.
                    if before <= window_end or self.mode == "compact":
                        self._update_rows()
                    if self.mode == "compact" and self.selected >= 0:
                        self.detail = self._model.detail(self.mode, self.selected)
            if self._model.closed:
                self.live = False
                return False
            return True

    def show_event(self, event_id: int) -> None:
        """Scroll the table to the row of ``event_id`` and select it."""
        index = self._model.index_of(event_id, self.mode)
        if index < 0:
            raise ValueError(f"event {event_id} is not in this history ({self.event_count})")
        with self._lock, self.hold_sync():
            self.window_start = max(0, index - self.window_size // 4)
            self.selected = index
            self.detail = self._model.detail(self.mode, index)
            self._update_rows()


def _about_html(summary: str, details: str) -> str:
    """The run's static summary and details as static HTML: escaped text, lines kept."""
    return "".join(
        f"<p><{tag}>{escape(text)}</{tag}></p>".replace("\n", "<br>")
        for tag, text in (("em", summary), ("small", details))
        if text
    )


def _cells(row: CompactRow) -> tuple[str, str, str, str, str, str, str]:
    """A compact row as the static table writes it."""
    took = (
        "" if row.end is None or row.end <= row.start else offset_text(row.end - row.start, sign="")
    )
    return (
        row.kind.replace("_", " "),
        row.label,
        row.status.replace("_", " "),
        f"\u00d7{row.attempts}" if row.attempts else "",  # "x3", as the live table writes it
        offset_text(row.start),
        took,
        " · ".join(p for p in (row.user_summary, row.summary) if p),
    )
