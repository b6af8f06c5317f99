"""What a workflow instance looks like from outside: the typed view the stepper reads.

:meth:`WorkflowInstance.snapshot <engine._replay.instance.WorkflowInstance.snapshot>`
returns an :class:`InstanceSnapshot`: where the workflow code is suspended and its local
variables, the workflow object's attributes, the pending timers, activities and child
workflows, running handlers and waiting conditions. Values are short reprs taken when the
snapshot is made, so a snapshot does not change as the run goes on.
"""

from __future__ import annotations

import asyncio
import linecache
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

_ENGINE_DIR = str(Path(__file__).resolve().parents[1])
_ASYNCIO_DIR = str(Path(asyncio.__file__).resolve().parent)

_repr = reprlib.Repr()
_repr.maxstring = 120
_repr.maxother = 120
_repr.maxlist = 10
_repr.maxdict = 10


def safe_repr(value: Any) -> str:
    """A short repr that never raises."""
    try:
        return _repr.repr(value)
    except Exception as err:  # a broken __repr__ must not break the debugger
        return f"<unrepresentable {type(value).__name__}: {err}>"


@dataclass
class SourceLocation:
    """Where workflow code is suspended."""

    filename: str
    line: int
    function: str
    #: (line number, text) around ``line``; empty when the source is not available.
    context: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PendingTimer:
    """A timer started and neither fired nor cancelled."""

    seq: int
    timer_id: str
    #: Workflow time (epoch seconds) at which it fires.
    fires_at: float


@dataclass(frozen=True, slots=True)
class PendingActivity:
    """An activity scheduled and not yet resolved."""

    seq: int
    activity_type: str
    activity_id: str
    #: The ``ActivityTaskScheduled`` event; None while the command is not recorded yet.
    scheduled_event_id: int | None


@dataclass(frozen=True, slots=True)
class PendingChild:
    """A child workflow started (or being started) and not yet closed."""

    seq: int
    workflow_id: str
    workflow_type: str
    initiated_event_id: int | None
    started_event_id: int | None
    run_id: str | None


@dataclass(frozen=True)
class InstanceSnapshot:
    """The state of one workflow instance between activations."""

    #: Workflow time of the latest activation (epoch seconds); None before the first.
    workflow_time: float | None
    replaying: bool
    completed: bool
    source: SourceLocation | None
    locals: dict[str, str]
    attributes: dict[str, str]
    pending_timers: tuple[PendingTimer, ...]
    pending_activities: tuple[PendingActivity, ...]
    pending_children: tuple[PendingChild, ...]
    running_handlers: int
    waiting_conditions: int


def code_position(task: asyncio.Task[Any] | None) -> tuple[SourceLocation | None, dict[str, str]]:
    """Where the user code under ``task`` is suspended, and its locals (as reprs)."""
    frame = _innermost_user_frame(task)
    if frame is None:
        return None, {}
    local_vars = {k: safe_repr(v) for k, v in frame.f_locals.items() if k != "self"}
    return _location(frame), local_vars


def _innermost_user_frame(task: asyncio.Task[Any] | None) -> FrameType | None:
    if task is None or task.done():
        return None
    coro: Any = task.get_coro()
    found: FrameType | None = None
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        if not _is_internal(frame):
            found = frame
        nxt = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if nxt is None or isinstance(nxt, asyncio.Future):
            break
        coro = nxt
    return found


def _is_internal(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith(_ENGINE_DIR) or filename.startswith(_ASYNCIO_DIR)


def _location(frame: FrameType) -> SourceLocation:
    filename = frame.f_code.co_filename
    line = frame.f_lineno
    context = []
    for number in range(max(1, line - 3), line + 4):
        text = linecache.getline(filename, number)
        if text:
            context.append((number, text.rstrip("\n")))
    return SourceLocation(filename, line, frame.f_code.co_name, context)
