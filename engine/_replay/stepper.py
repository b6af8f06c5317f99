"""Stepping through a recorded history: the replay debugger behind ``Replayer.debug()``.

A :class:`ReplaySession` applies a history one event at a time to a fresh workflow
instance. At every point it can show the event just applied, the commands the code has
produced (and the events they were matched with), where the workflow code is suspended
(file, line, local variables), the workflow object's attributes, what is pending (timers,
activities, handlers, conditions), and whether the code has diverged from the history.
Stepping back replays from the first event to the earlier position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .._model import commands as cmd
from .._model.definitions import WorkflowDefinition
from .._model.events import HistoryEvent
from ..converter import DataConverter
from ..exceptions import NondeterminismError
from .driver import HistoryDriver
from .handlers import WorkflowTaskError
from .replayer import new_driver
from .snapshot import SourceLocation, safe_repr

__all__ = ["RecordedCommand", "ReplaySession", "Snapshot", "SourceLocation", "safe_repr"]


@dataclass
class RecordedCommand:
    """A command the code produced, and the event it was matched with (if yet)."""

    description: str
    event_id: int | None
    activation_event_id: int


@dataclass
class Snapshot:
    """The state of the replay after ``position`` events have been applied."""

    position: int
    total: int
    event: HistoryEvent | None
    next_event: HistoryEvent | None
    replaying: bool
    workflow_time: datetime | None
    commands: list[RecordedCommand]
    source: SourceLocation | None
    locals: dict[str, str]
    attributes: dict[str, str]
    pending_timers: list[dict[str, Any]]
    pending_activities: list[dict[str, Any]]
    running_handlers: int
    waiting_conditions: int
    completed: bool
    diverged: Exception | None
    #: After ``run_to``: whether it stopped at the breakpoint (False: end or divergence).
    breakpoint_hit: bool | None = None
    pending_children: list[dict[str, Any]] = field(default_factory=list)

    @property
    def at_end(self) -> bool:
        """Whether every event has been applied."""
        return self.position >= self.total

    def describe(self) -> str:
        """A few lines for a terminal or a notebook."""
        lines = []
        if self.event is not None:
            lines.append(f"event {self.event.event_id}/{self.total}: {self.event.event_type}")
        else:
            lines.append(f"before the first event (0/{self.total})")
        if self.source is not None:
            lines.append(
                f"code at {self.source.filename}:{self.source.line} ({self.source.function})"
            )
        if self.locals:
            lines.append("locals: " + ", ".join(f"{k}={v}" for k, v in self.locals.items()))
        if self.diverged is not None:
            lines.append(f"DIVERGED: {self.diverged}")
        return "\n".join(lines)


class ReplaySession:
    """Step through one history against workflow code (see the module docstring)."""

    def __init__(
        self,
        events: Sequence[HistoryEvent],
        definitions: dict[str, WorkflowDefinition],
        converter: DataConverter,
        *,
        workflow_id: str,
    ) -> None:
        self.events = list(events)
        self._definitions = definitions
        self._converter = converter
        self._workflow_id = workflow_id
        self._hit: bool | None = None
        self._reset()

    # -- movement ---------------------------------------------------------------------

    @property
    def position(self) -> int:
        """How many events have been applied."""
        return self._position

    def step(self) -> Snapshot:
        """Apply the next event."""
        if self._position < len(self.events) and self._diverged is None:
            self._apply_next()
        return self.snapshot()

    def step_task(self) -> Snapshot:
        """Run to the next point where the workflow code runs (an activation), or the end."""
        start = self._activations
        while (
            self._position < len(self.events)
            and self._diverged is None
            and self._activations == start
        ):
            self._apply_next()
        return self.snapshot()

    def run_to(
        self,
        event_id: int | None = None,
        event_type: str | None = None,
        predicate: Callable[[HistoryEvent], bool] | None = None,
    ) -> Snapshot:
        """Run until the event just applied has ``event_id`` / ``event_type`` / matches the
        predicate (a breakpoint), the code diverges, or the history ends."""
        if event_id is not None and event_id <= self._position:
            snap = self.goto(event_id)
            snap.breakpoint_hit = True
            return snap
        hit = False
        while self._position < len(self.events) and self._diverged is None:
            event = self._apply_next()
            if (
                (event_id is not None and event.event_id == event_id)
                or (event_type is not None and event.event_type == event_type)
                or (predicate is not None and predicate(event))
            ):
                hit = True
                break
        self._hit = hit
        try:
            return self.snapshot()
        finally:
            self._hit = None

    def step_back(self) -> Snapshot:
        """Return to the state one event earlier (by replaying from the start)."""
        return self.goto(max(0, self._position - 1))

    def goto(self, position: int) -> Snapshot:
        """Move to the state after ``position`` events (0 = before the first)."""
        position = max(0, min(position, len(self.events)))
        if position < self._position or self._diverged is not None:
            self._reset()
            if position:
                self._apply(self.events[:position], self.events[position:])
        while self._position < position and self._diverged is None:
            self._apply_next()
        return self.snapshot()

    def run(self) -> Snapshot:
        """Run to the end (or to a divergence)."""
        return self.run_to(predicate=lambda _event: False)

    # -- state ------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The state at the current position."""
        driver = self._driver
        state = driver.instance.snapshot()
        event = self.events[self._position - 1] if self._position else None
        nxt = self.events[self._position] if self._position < len(self.events) else None
        # Commands of the latest activation that no event has matched (yet): at a
        # divergence, the one the code produced instead of what history recorded.
        commands = list(self._commands) + [
            RecordedCommand(c.describe(), None, self._activation_id)
            for c in driver.unmatched_commands()
        ]
        when = state.workflow_time
        return Snapshot(
            position=self._position,
            total=len(self.events),
            event=event,
            next_event=nxt,
            replaying=state.replaying,
            workflow_time=datetime.fromtimestamp(when, UTC) if when else None,
            commands=commands,
            breakpoint_hit=self._hit,
            source=state.source,
            locals=dict(state.locals),
            attributes=dict(state.attributes),
            pending_timers=[
                {"timer_id": t.timer_id, "fires_at": datetime.fromtimestamp(t.fires_at, UTC)}
                for t in state.pending_timers
            ],
            pending_activities=[
                {
                    "seq": a.seq,
                    "activity_type": a.activity_type,
                    "activity_id": a.activity_id,
                    "scheduled_event_id": a.scheduled_event_id,
                }
                for a in state.pending_activities
            ],
            pending_children=[
                {
                    "seq": c.seq,
                    "workflow_id": c.workflow_id,
                    "workflow_type": c.workflow_type,
                    "run_id": c.run_id,
                    "initiated_event_id": c.initiated_event_id,
                }
                for c in state.pending_children
            ],
            running_handlers=state.running_handlers,
            waiting_conditions=state.waiting_conditions,
            completed=state.completed,
            diverged=self._diverged,
        )

    # -- internals --------------------------------------------------------------------

    def _reset(self) -> None:
        self._driver: HistoryDriver = new_driver(
            self.events, self._definitions, self._converter, workflow_id=self._workflow_id
        )
        self._driver.on_activation = self._on_activation
        self._driver.on_recorded = self._on_recorded
        self._position = 0
        self._activations = 0
        self._diverged: Exception | None = None
        self._commands: list[RecordedCommand] = []
        self._activation_id = 0
        self._hit = None

    def _apply_next(self) -> HistoryEvent:
        event = self.events[self._position]
        self._apply([event], self.events[self._position + 1 :])
        return event

    def _apply(self, chunk: Sequence[HistoryEvent], future: Sequence[HistoryEvent]) -> None:
        try:
            produced = self._driver.apply(chunk, future)
            if not future:
                self._driver.finish()
        except NondeterminismError as err:
            self._diverged = err
        except WorkflowTaskError as err:
            cause = err.cause
            self._diverged = cause if isinstance(cause, Exception) else err
        else:
            del produced
        self._position += len(chunk)

    def _on_activation(self, started: HistoryEvent, replaying: bool) -> None:
        self._activations += 1
        self._activation_id = started.event_id

    def _on_recorded(self, command: cmd.Command, event: HistoryEvent) -> None:
        self._commands.append(
            RecordedCommand(
                f"{command.describe()} -> event {event.event_id} {event.event_type}",
                event.event_id,
                self._activation_id,
            )
        )
