"""ReplayStepper: step through a replay of a recorded history, as a notebook widget."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ipywidgets as w

from engine import DataConverter, HistoryEvent, WorkflowHandle, WorkflowHistory
from engine.worker import Replayer, ReplaySession, Snapshot

from . import _live
from ._snapshot import StaticDisplay
from .models import user_metadata
from .stepper_model import (
    Breakpoints,
    banner_html,
    header_html,
    history_html,
    parse_breakpoints,
    position_label,
    replay_state,
    source_html,
    state_html,
    static_html,
    static_text,
    style_html,
)

__all__ = ["ReplayStepper"]


def _history_of(source: WorkflowHistory | WorkflowHandle) -> WorkflowHistory:
    if isinstance(source, WorkflowHistory):
        return source
    if isinstance(source, WorkflowHandle):
        return _live.call(source.fetch_history())
    raise TypeError(
        "ReplayStepper needs a WorkflowHistory (handle.fetch_history(), "
        "WorkflowHistory.from_json) or a WorkflowHandle, "
        f"not {type(source).__name__}"
    )


class ReplayStepper(StaticDisplay, w.VBox):  # type: ignore[misc]
    """Step through the replay of ``history`` against ``workflows``, one event at a time.

    The session of :meth:`engine.worker.Replayer.debug` as a widget: buttons to restart,
    step back, step, step to the next workflow task, run to a breakpoint and run to the
    end; a slider over the history's positions; the workflow source with the line where
    the code waits highlighted; its locals, the workflow object's attributes, what it
    waits on and the commands matched so far; the history around the current event; and
    a banner when the code diverges from the history (the event, what was recorded, what
    the code produced, and the line that produced it).

    ``history`` is a :class:`~engine.WorkflowHistory` or a :class:`~engine.WorkflowHandle`
    (its history is fetched once). ``breakpoints`` are event ids and/or event types
    (``[5, "TimerFired"]`` or ``"5, TimerFired"``). Only ``window_size`` history rows are
    rendered at a time, so a 50,000-event history costs no more to show than a short one.

    The methods :meth:`step`, :meth:`step_back`, :meth:`step_task`,
    :meth:`run_to_breakpoint`, :meth:`run`, :meth:`goto` and :meth:`restart` do what the
    buttons do and return the new :class:`~engine.worker.Snapshot`.

    Code defined in a notebook cell is named by its cell (``In [12]``), not by the file
    IPython compiled it as. The display data holds, besides the widget view, an HTML
    snapshot (position, source line, banner, the events around), so a saved notebook
    shows where the replay stood. The stepper reads nothing in the background;
    :meth:`stop` refreshes that snapshot and leaves the widget as it is, :meth:`close`
    removes it.
    """

    def __init__(
        self,
        history: WorkflowHistory | WorkflowHandle,
        workflows: Sequence[type],
        *,
        data_converter: DataConverter | None = None,
        breakpoints: str | Iterable[int | str] = (),
        window_size: int = 21,
        **kwargs: Any,
    ) -> None:
        if not 3 <= window_size <= 60:
            raise ValueError(f"window_size must be between 3 and 60 rows, not {window_size}")
        self._history = _history_of(history)
        converter = data_converter
        if converter is None and isinstance(history, WorkflowHandle):
            converter = history.client.data_converter
        #: The user's summaries, decoded once, by event id (and the run's static summary).
        self._summaries = {
            e.event_id: user_metadata(e, converter)[0]
            for e in self._history.events
            if "userMetadata" in e.extra
        }
        replayer = Replayer(workflows=list(workflows), data_converter=data_converter)
        self._session: ReplaySession = replayer.debug(self._history)
        self._events: list[HistoryEvent] = self._session.events
        self._types = {e.event_type for e in self._events}
        self._window = window_size
        self._snapshot = self._session.snapshot()
        self._note = ""
        self._syncing = False

        def button(label: str, tip: str, action: Callable[[], Snapshot]) -> w.Button:
            b = w.Button(description=label, tooltip=tip, layout=w.Layout(width="auto"))
            b.on_click(lambda _b: self._clicked(action))
            return b

        self.restart_button = button("↺ restart", "Back to the start of the history", self.restart)
        self.back_button = button(
            "◀ step back", "Return to the state one event earlier", self.step_back
        )
        self.step_button = button("▶ step", "Apply the next event", self.step)
        self.task_button = button(
            "⇥ step task", "Run to the next point where the workflow code runs", self.step_task
        )
        self.breakpoint_button = button(
            "run to breakpoint",
            "Run until an event listed under breakpoints, a divergence or the end",
            self.run_to_breakpoint,
        )
        self.run_button = button("run to end", "Run to the end (or to a divergence)", self.run)
        self.slider = w.IntSlider(
            value=0,
            min=0,
            max=len(self._events),
            description="position",
            continuous_update=False,  # going back replays from the start: once, on release
            readout=False,
            layout=w.Layout(flex="1 1 auto", min_width="200px"),
        )
        self.slider_label = w.Label(value="")
        self.slider.observe(self._on_slider, names="value")
        spec = breakpoints if isinstance(breakpoints, str) else _spec(breakpoints)
        self.breakpoint_input = w.Text(
            value=spec,
            description="breakpoints",
            placeholder="event ids and/or types, e.g. 5, TimerFired",
            continuous_update=False,
            layout=w.Layout(flex="1 1 auto", min_width="240px"),
        )
        self.breakpoint_input.observe(self._on_breakpoints, names="value")
        self._breakpoints, self._bad = parse_breakpoints(spec)

        self.header = w.HTML()
        self.banner = w.HTML()
        self.source_view = w.HTML()
        self.state_view = w.HTML()
        self.history_view = w.HTML(layout=w.Layout(flex="1 1 420px", min_width="300px"))
        for panel in (self.source_view, self.state_view, self.history_view, self.banner):
            panel.add_class("dn-st-panel")  # may shrink: long lines wrap, nothing clipped
        style = w.HTML(value=style_html(), layout=w.Layout(display="none"))
        toolbar = w.HBox(
            [
                self.restart_button,
                self.back_button,
                self.step_button,
                self.task_button,
                self.breakpoint_button,
                self.run_button,
            ]
        )
        toolbar.add_class("dn-st-bar")
        code = w.VBox(
            [self.source_view, self.state_view],
            layout=w.Layout(flex="1 1 380px", min_width="280px"),
        )
        code.add_class("dn-st-code")
        body = w.HBox([code, self.history_view], layout=w.Layout(flex_flow="row wrap"))
        super().__init__(
            children=[
                style,
                self.header,
                toolbar,
                w.HBox([self.slider, self.slider_label]),
                self.breakpoint_input,
                self.banner,
                body,
            ],
            **kwargs,
        )
        self.add_class("dn-widget")
        self.add_class("dn-stepper")
        self._render()

    def __repr__(self) -> str:
        if not hasattr(self, "_snapshot"):  # the constructor failed
            return "<ReplayStepper (not built)>"
        snap = self._snapshot
        state, _colour = replay_state(snap)
        history = self._history
        return (
            f"<ReplayStepper {history.workflow_id} · {history.workflow_type} · "
            f"event {snap.position} of {snap.total} · {state}>"
        )

    # -- what the buttons do ----------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The state at the current position."""
        return self._snapshot

    @property
    def session(self) -> ReplaySession:
        """The replay session the widget drives."""
        return self._session

    @property
    def history(self) -> WorkflowHistory:
        """The history being replayed."""
        return self._history

    @property
    def breakpoints(self) -> Breakpoints:
        """The breakpoints from the input box (ids and types)."""
        return self._breakpoints

    def step(self) -> Snapshot:
        """Apply the next event."""
        return self._show(self._session.step())

    def step_back(self) -> Snapshot:
        """Return to the state one event earlier."""
        return self._show(self._session.step_back())

    def step_task(self) -> Snapshot:
        """Run to the next point where the workflow code runs (a workflow task)."""
        return self._show(self._session.step_task())

    def goto(self, position: int) -> Snapshot:
        """Move to the state after ``position`` events (0: before the first)."""
        return self._show(self._session.goto(position))

    def restart(self) -> Snapshot:
        """Back to the start, before the first event."""
        return self.goto(0)

    def run(self) -> Snapshot:
        """Run to the end of the history (or to a divergence)."""
        return self._show(self._session.run())

    def run_to_breakpoint(self) -> Snapshot:
        """Run until the event just applied is a breakpoint, the code diverges, or the
        history ends (with no breakpoints set: to the end)."""
        bps = self._breakpoints
        if not bps:
            return self._show(self._session.run(), "No breakpoints set: ran to the end.")
        snap = self._session.run_to(predicate=bps.matches)
        if snap.breakpoint_hit and snap.event is not None:
            note = f"Stopped at breakpoint: event {snap.event.event_id} {snap.event.event_type}."
        elif snap.diverged is not None:
            note = "No breakpoint hit: the code diverged first."
        else:
            note = "No breakpoint hit before the end of the history."
        return self._show(snap, note)

    # -- rendering --------------------------------------------------------------------

    def _show(self, snap: Snapshot, note: str = "") -> Snapshot:
        self._snapshot = snap
        self._note = note
        self._render()
        return snap

    def _clicked(self, action: Callable[[], Snapshot]) -> None:
        try:
            action()
        except Exception as err:  # a button must not fail silently in the browser console
            self._note = f"{type(err).__name__}: {err}"
            self._render()

    def _on_slider(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._clicked(lambda: self.goto(int(change["new"])))

    def _on_breakpoints(self, change: dict[str, Any]) -> None:
        self._breakpoints, self._bad = parse_breakpoints(str(change["new"]))
        self._note = ""
        self._render()

    def _breakpoint_note(self) -> str:
        ignored = [f"{part} (not an event id or type)" for part in self._bad]
        ignored += [
            f"{name} (no event of this type in the history)"
            for name in sorted(self._breakpoints.event_types - self._types)
        ]
        if self._breakpoints.event_ids:
            ids = {e.event_id for e in self._events}
            ignored += [
                f"{i} (no such event id)" for i in sorted(self._breakpoints.event_ids - ids)
            ]
        return "Ignored breakpoints: " + "; ".join(ignored) + "." if ignored else ""

    def _render(self) -> None:
        snap = self._snapshot
        diverged = snap.diverged
        note = " ".join(n for n in (self._note, self._breakpoint_note()) if n)
        first = self._events[0].event_id if self._events else 0
        self.header.value = header_html(
            self._history.workflow_id,
            self._history.workflow_type,
            snap,
            note,
            summary=self._summaries.get(first, ""),
        )
        self.banner.value = banner_html(snap)
        self.banner.layout.display = None if diverged is not None else "none"
        self.source_view.value = source_html(snap)
        self.state_view.value = state_html(snap)
        self.history_view.value = history_html(
            self._events,
            snap.position,
            size=self._window,
            breakpoints=self._breakpoints,
            diverged_at=_diverged_at(snap),
            summaries=self._summaries,
        )
        self._syncing = True
        try:
            self.slider.value = snap.position
        finally:
            self._syncing = False
        self.slider_label.value = position_label(self._events, snap.position)
        forward_blocked = snap.at_end or diverged is not None
        for b in (self.step_button, self.task_button, self.breakpoint_button, self.run_button):
            b.disabled = forward_blocked
        self.back_button.disabled = self.restart_button.disabled = snap.position == 0

    def stop(self) -> None:
        """Leave the widget on screen as it is (a notebook's clean-up, as for the live
        widgets; the stepper has no background refresh to end): its saved output gets a
        static snapshot of the current position. :meth:`close` removes it."""
        self._publish_snapshot()

    def close(self) -> None:
        """Close the widget and every widget it is made of (ipywidgets' close: its views
        are removed and its output goes blank; see :meth:`stop`)."""
        for child in _descendants(self):
            child.close()
        super().close()

    # -- static fallbacks ---------------------------------------------------------------

    def _static_html(self) -> str:
        history = self._history
        return static_html(
            history.workflow_id,
            history.workflow_type,
            self._snapshot,
            self._events,
            summaries=self._summaries,
        )

    def _static_text(self) -> str:
        history = self._history
        return static_text(history.workflow_id, history.workflow_type, self._snapshot)


def _diverged_at(snap: Snapshot) -> int | None:
    err = snap.diverged
    if err is None:
        return None
    event_id = getattr(err, "event_id", None)  # NondeterminismError names the event
    if isinstance(event_id, int):
        return event_id
    return snap.event.event_id if snap.event is not None else None


def _spec(items: Iterable[int | str]) -> str:
    return ", ".join(str(i) for i in items)


def _descendants(box: w.Box) -> list[w.Widget]:
    out: list[w.Widget] = []
    for child in box.children:
        if isinstance(child, w.Box):
            out.extend(_descendants(child))
        out.append(child)
    return out
