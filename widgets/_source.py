"""What a run view is built from: a live workflow handle or a recorded history."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from engine import HistoryEvent, WorkflowHandle, WorkflowHistory

from . import _live

__all__ = ["RunSource", "closing_subscription"]

log = logging.getLogger("widgets")


class RunSource:
    """A run to show: its events so far, its activity attempts, and (for a handle of an
    open run) a way to follow it.

    Built from a :class:`~engine.WorkflowHandle` (live: new events and attempts arrive as
    they are recorded) or a :class:`~engine.WorkflowHistory` (fixed).
    """

    def __init__(self, source: WorkflowHandle | WorkflowHistory, *, attempts: bool) -> None:
        self.handle: WorkflowHandle | None = None
        self.workflow_id: str
        self.run_id: str
        self.events: list[HistoryEvent]
        self.attempts: list[dict[str, Any]] = []
        self.with_attempts = attempts
        if isinstance(source, WorkflowHistory):
            self.workflow_id, self.events = source.workflow_id, list(source.events)
            self.run_id = source.run_id if source.events else ""
            return
        if not isinstance(source, WorkflowHandle):
            raise TypeError(
                f"expected a WorkflowHandle (from client.start_workflow or "
                f"client.get_workflow_handle) or a WorkflowHistory, not {type(source).__name__}"
            )
        desc = _live.call(source.describe())
        # Pin the run: a later run of the same workflow id is another view.
        self.handle = source.client.get_workflow_handle(source.id, run_id=desc.run_id)
        self.workflow_id, self.run_id = source.id, desc.run_id
        self.events = _live.call(self._fetch_events(0))
        if attempts:
            self.attempts = _live.call(self.handle.fetch_attempts())

    @property
    def live(self) -> bool:
        """Whether there is anything to follow (a handle of a run not yet closed)."""
        from .models import CLOSE_EVENTS

        return self.handle is not None and not (
            self.events and self.events[-1].event_type in CLOSE_EVENTS
        )

    def now(self) -> float:
        """The current time on the run's clock (epoch seconds)."""
        if self.handle is None:
            return self.events[-1].event_time if self.events else 0.0
        return self.handle.client.clock.now()

    async def _fetch_events(self, after: int) -> list[HistoryEvent]:
        assert self.handle is not None
        return [e async for e in self.handle.fetch_history_events(after_event_id=after)]

    async def poll(self, after: int) -> tuple[list[HistoryEvent], list[dict[str, Any]] | None]:
        """New events after ``after``, and the attempts (when asked for at construction)."""
        assert self.handle is not None
        events = await self._fetch_events(after)
        attempts = await self.handle.fetch_attempts() if self.with_attempts else None
        return events, attempts


def closing_subscription(
    source: RunSource,
    last_event_id: Callable[[], int],
    apply: Callable[[list[HistoryEvent], list[dict[str, Any]] | None], bool],
    interval: float,
    name: str,
) -> _live.Subscription | None:
    """Follow ``source`` on the widgets' loop: every ``interval`` seconds hand new events
    and attempts to ``apply`` (which returns False to stop, e.g. once the run closed)."""
    if not source.live:
        return None
    lock = threading.Lock()

    async def refresh() -> None:
        while True:
            try:
                events, attempts = await source.poll(last_event_id())
            except Exception as err:  # a failed read is retried at the next tick
                log.debug("refresh of %s failed: %s", name, err)
                await asyncio.sleep(interval)
                continue
            with lock:
                if not apply(events, attempts):
                    return
            await asyncio.sleep(interval)

    return _live.subscribe(refresh, name)


def seconds(value: float | timedelta) -> float:
    """A refresh interval in seconds, checked."""
    out = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not out > 0:
        raise ValueError(f"refresh_interval must be more than 0 seconds, not {value!r}")
    return out
