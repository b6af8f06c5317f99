"""Timeline: a run's activities, attempts, backoffs, timers, children and signals in time."""

from __future__ import annotations

import base64
import io
import logging
import threading
from datetime import timedelta
from typing import Any

import anywidget
import traitlets

from engine import DataConverter, HistoryEvent, WorkflowHandle, WorkflowHistory

from . import _live
from ._source import LiveRunView, RunSource, seconds
from ._static import CSS, esm
from .models import (
    STATUS_COLOURS,
    HistoryModel,
    axis_ticks,
    min_bar_seconds,
    offset_text,
    timeline_ticks,
)
from .timeline_model import TimelineData, timeline

__all__ = ["Timeline"]

log = logging.getLogger("widgets")


class Timeline(LiveRunView, anywidget.AnyWidget):  # type: ignore[misc]
    """A horizontal timeline of a run, live while it is open.

    One lane for the workflow tasks, one per activity (each attempt a bar, failed ones in
    red, the backoff waits between them dashed), one per timer (a span to its firing, its
    due time marked), one per child, and one lane of signal / update / marker ticks. A
    "now" line moves while the run is open. The axis is ticked at round values (0, 1 s,
    2 s, 5 s ... minutes, hours); a bar is never drawn narrower than a few pixels, so a
    millisecond activity stays visible. The run's static summary (and, opened, its details)
    stands under the title, and each activity, timer or child with a ``summary=`` shows it
    beside its bars: always as plain text. ``data_converter`` decodes them (by default the
    handle's client's).

    :meth:`figure` draws the same view with matplotlib (re-reading the run first) for
    static output; the widget's display data holds that figure as a PNG, so a saved
    notebook shows the timeline without a kernel. :meth:`stop` ends the live refresh and
    keeps the drawing on screen; :meth:`close` removes the widget.
    """

    _esm = esm("timeline.js")
    _css = CSS

    title = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    data = traitlets.Dict({}).tag(sync=True)
    #: The "now" line (seconds since the start) while the run is open; None once closed.
    now = traitlets.Float(None, allow_none=True).tag(sync=True)
    #: The axis ticks, ``[seconds, label]`` at round values, up to the end of the axis.
    ticks: traitlets.List[Any] = traitlets.List([]).tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)

    def __init__(
        self,
        source: WorkflowHandle | WorkflowHistory,
        *,
        refresh_interval: float | timedelta = 0.5,
        max_lanes: int = 200,
        data_converter: DataConverter | None = None,
        **kwargs: Any,
    ) -> None:
        interval = seconds(refresh_interval)
        self._lock = threading.RLock()
        self._source = RunSource(source, attempts=True, data_converter=data_converter)
        self._model = HistoryModel(self._source.events, data_converter=self._source.data_converter)
        self._attempts: list[dict[str, Any]] = list(self._source.attempts)
        self._max_lanes = max_lanes
        super().__init__(**kwargs)
        workflow_type = next((r.label for r in self._model.compact()[:1]), "")
        self.title = f"{self._source.workflow_id} · {workflow_type}"
        with self.hold_sync():
            self._redraw()
            self.live = self._source.live
        # Attempts change only while an activity is scheduled or running.
        self._follow(f"timeline {self._source.workflow_id}", interval, self._model.activities_open)

    def __repr__(self) -> str:
        lanes = len(self.data.get("lanes", []))
        return f"<Timeline {self.title} · {lanes} lanes{' · live' if self.live else ''}>"

    def _stopped(self) -> None:
        with self.hold_sync():
            self.live = False
            self._set_now(None)

    def _set_now(self, now: float | None) -> None:
        """Move the "now" line, and the ticks with the end of the axis."""
        self.now = now
        self.ticks = timeline_ticks(self.data.get("end"), now)

    @property
    def timeline(self) -> TimelineData:
        """The view model: lanes of bars and ticks (offsets in seconds since the start)."""
        following = self._source.handle is not None and not self._model.closed
        now = self._source.now() if following else None
        return timeline(self._model, self._attempts, now=now, max_lanes=self._max_lanes)

    def _redraw(self) -> None:
        data = self.timeline.to_json()
        with self.hold_sync():
            self.data = data
            self._set_now(data["now"])

    def _apply(self, events: list[HistoryEvent], attempts: list[dict[str, Any]] | None) -> bool:
        with self._lock:
            added = self._model.extend(events)
            # Retries show up in the attempts table before any event records them.
            changed = added > 0 or (attempts is not None and attempts != self._attempts)
            if attempts is not None:
                self._attempts = attempts
            if changed:
                self._redraw()
            elif not self._model.closed:  # only the "now" line moves
                with self.hold_sync():
                    self._set_now(max(0.0, self._source.now() - self._model.t0))
            if self._model.closed:
                self.live = False
                return False
            return True

    def _catch_up(self) -> None:
        """Read what the run recorded since the last refresh (a refresh runs every
        ``refresh_interval``, may pause while no view is open, or may be stopped)."""
        if self._source.handle is None:
            return
        source, model = self._source, self._model
        try:
            events, attempts = _live.call(source.poll(model.last_event_id, attempts=True))
        except Exception as err:  # the drawing still shows what was read before
            log.warning("the timeline of %s could not read the run: %s", source.workflow_id, err)
            return
        with self._lock:
            model.extend(events)
            if attempts is not None:
                self._attempts = attempts
            with self.hold_sync():
                self._redraw()
                if model.closed:
                    self.live = False
        subscription = self._subscription
        if model.closed and subscription is not None and subscription.active:
            subscription.cancel()  # the run has closed: nothing is left to follow
            self._publish_snapshot()

    def figure(self, *, width: float = 10.0) -> Any:
        """The timeline as a matplotlib Figure (for static output), drawn from the run as
        it is now: a handle's run is read again first. No pyplot state is touched."""
        self._catch_up()
        return self._figure(width=width)

    def _figure(self, *, width: float = 10.0, inline: bool = True) -> Any:
        from matplotlib.figure import Figure

        with self._lock:
            data = self.timeline
            title = self.title
        lanes = list(reversed(data.lanes))
        fig = Figure(figsize=(width, 0.45 * max(len(lanes), 1) + 1.2), layout="constrained")
        ax = fig.add_subplot()
        end = max(data.end, data.now or 0.0, 1e-3)
        # The plot takes about three quarters of the figure's width (labels on the left).
        shortest = min_bar_seconds(end, 0.75 * width * fig.dpi)
        for y, lane in enumerate(lanes):
            last = 0.0
            for bar in lane.bars:
                stop = bar.end if bar.end is not None else (data.now if data.now else end)
                colour = STATUS_COLOURS.get(bar.status, STATUS_COLOURS["waiting"])
                if bar.kind == "backoff":
                    ax.hlines(y, bar.start, stop, colors=colour, linestyles="dashed", lw=1.5)
                    continue
                width_s = max(stop - bar.start, shortest)
                ax.broken_barh([(bar.start, width_s)], (y - 0.3, 0.6), facecolors=colour)
                last = max(last, bar.start + width_s)
            if lane.summary:  # the user's text: no mathtext ("$" stays a dollar sign)
                ax.text(
                    last + end * 0.01,
                    y,
                    _cut(lane.summary, 60),
                    va="center",
                    fontsize=8,
                    color="#343a40",
                    parse_math=False,
                    clip_on=True,
                )
            for tick in lane.ticks:
                marker = "|" if tick.kind == "due" else "v"
                ax.plot([tick.at], [y], marker=marker, color="#495057", markersize=9)
        if data.now is not None:
            ax.axvline(data.now, color="#e03131", linestyle="--", lw=1)
        ax.set_yticks(range(len(lanes)), [lane.label for lane in lanes])
        ticks = axis_ticks(end)
        ax.set_xticks([at for at, _ in ticks], [label for _, label in ticks])
        ax.set_xlim(0, end * 1.02)
        ax.set_xlabel("time since the run started")
        if data.summary:
            title = f"{title}\n{_cut(data.summary, 120)}"
        ax.set_title(title, loc="left", fontsize=10, parse_math=False)
        ax.grid(axis="x", alpha=0.3)
        if inline:
            _show_figures_inline()
        return fig

    # -- static fallbacks ---------------------------------------------------------------

    def _static_png(self) -> str:
        fig = self._figure(inline=False)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=90)
        return base64.b64encode(out.getvalue()).decode("ascii")

    def _static_text(self) -> str:
        with self._lock:
            data = self.timeline
        lines = [repr(self)]
        if data.summary:
            lines.append(f"  {data.summary}")
        for lane in data.lanes[:30]:
            bars = [b for b in lane.bars if b.kind != "backoff"]
            statuses = ", ".join(b.status.replace("_", " ") for b in bars[-5:])
            ticks = f" · {len(lane.ticks)} ticks" if lane.ticks else ""
            span = ""
            if bars:
                last = bars[-1].end
                until = offset_text(last) if last is not None else "now"
                span = f" · {offset_text(bars[0].start)} to {until}"
            note = f" — {lane.summary}" if lane.summary else ""
            lines.append(f"  {lane.label}{note}: {statuses or '-'}{ticks}{span}")
        more = max(0, len(data.lanes) - 30) + data.hidden_lanes
        if more:
            lines.append(f"  … {more} more lanes")
        return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _show_figures_inline() -> None:
    """Let IPython show a bare Figure as a PNG (pyplot's inline backend does this only once
    pyplot is imported; the timeline draws without pyplot, to leave its state alone)."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
        from matplotlib.figure import Figure
    except ImportError:
        return
    shell = get_ipython()  # type: ignore[no-untyped-call]
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    if Figure not in png.type_printers:  # pyplot's inline backend may have set one already
        png.for_type(Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))
