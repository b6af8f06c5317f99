"""What a run view is built from: a live workflow handle or a recorded history."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from engine import DataConverter, HistoryEvent, WorkflowHandle, WorkflowHistory
from engine.exceptions import WorkflowNotFoundError

from . import _live
from ._snapshot import StaticDisplay
from .models import CLOSE_EVENTS, HistoryModel

__all__ = ["LiveRunView", "RunSource"]


class RunSource:
    """A run to show: its events so far, its activity attempts, and (for a handle of an
    open run) a way to follow it.

    Built from a :class:`~engine.WorkflowHandle` (live: new events and attempts arrive as
    they are recorded) or a :class:`~engine.WorkflowHistory` (fixed). ``data_converter``
    decodes the summaries the events carry: by default a handle's client's (its payload
    codec included), else :attr:`DataConverter.default`.
    """

    def __init__(
        self,
        source: WorkflowHandle | WorkflowHistory,
        *,
        attempts: bool,
        data_converter: DataConverter | None = None,
    ) -> None:
        self.handle: WorkflowHandle | None = None
        self.data_converter: DataConverter | None = data_converter
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
        if data_converter is None:
            self.data_converter = source.client.data_converter
        desc = _live.call(source.describe())
        # Pin the run: a later run of the same workflow id is another view.
        self.handle = source.client.get_workflow_handle(source.id, run_id=desc.run_id)
        self.workflow_id, self.run_id = source.id, desc.run_id
        self.events = _live.call(self._fetch_events(0))
        if attempts:
            self.attempts = _live.call(self.handle.fetch_attempts())

    @property
    def live(self) -> bool:
        """Whether there was anything to follow when the view was made (a handle of a run
        not closed then); the views track the close themselves."""
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
        return [
            e async for e in self.handle.fetch_history_events(after_event_id=after, page_size=5000)
        ]

    async def poll(
        self, after: int, *, attempts: bool | None = None
    ) -> tuple[list[HistoryEvent], list[dict[str, Any]] | None]:
        """New events after ``after``, and the attempts (when asked for at construction,
        and ``attempts`` is not False: a view knows when no activity can change)."""
        assert self.handle is not None
        events = await self._fetch_events(after)
        want = self.with_attempts if attempts is None else attempts and self.with_attempts
        return events, await self.handle.fetch_attempts() if want else None


class LiveRunView(StaticDisplay):
    """What the live run views (HistoryView, Timeline) share, mixed into their widget
    class: the lock between the browser's changes and the refresh, the views the front
    end reports, errors shown in the ``error`` trait, the static fallbacks of their
    display data, :meth:`stop` and :meth:`close`."""

    _lock: threading.RLock
    _views: _live.Views
    _source: RunSource
    _model: HistoryModel
    # Set before anything can fail, so close() (also run by __del__) always works.
    _subscription: _live.Subscription | None = None
    error: str
    live: bool

    #: Each view's: show new events and attempts; False once there is nothing to follow.
    _apply: Callable[[list[HistoryEvent], list[dict[str, Any]] | None], bool]

    def _follow(
        self, name: str, interval: float, want_attempts: Callable[[], bool] | None = None
    ) -> None:
        """Follow the run on the widgets' loop (:func:`_live.refresh_loop`) if it is open:
        new events (and attempts, while ``want_attempts()``) go to :meth:`_apply` until it
        returns False (the run closed); a run that is gone stops the refresh at once."""
        self._views = _live.Views()
        self.on_msg(self._on_message)  # type: ignore[attr-defined]
        if not self._source.live:
            return
        source, model = self._source, self._model

        async def read() -> tuple[list[HistoryEvent], list[dict[str, Any]] | None]:
            want = want_attempts() if want_attempts else None
            return await source.poll(model.last_event_id, attempts=want)

        def show(polled: tuple[list[HistoryEvent], list[dict[str, Any]] | None]) -> bool:
            return self._apply(*polled)

        async def follow() -> None:
            await _live.refresh_loop(
                read,
                show,
                interval=interval,
                views=self._views,
                on_error=self._on_refresh_error,
                name=name,
                fatal=(WorkflowNotFoundError,),
            )
            # The run closed (or the refresh gave up): the outputs get the final state.
            self._publish_snapshot()

        self._subscription = _live.subscribe(follow, name)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        # Changes from the browser arrive on a kernel thread (the main one, or with
        # ipykernel 7 and JupyterLab 4.4+ a subshell's: comms go over subshells); the
        # refresh writes on the widgets' thread: one at a time.
        with self._lock:
            super().set_state(sync_data)  # type: ignore[misc]

    @property
    def refreshing(self) -> bool:
        """Whether a background refresh is following the run."""
        return self._subscription is not None and self._subscription.active

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        self._views.message(content)

    def _on_refresh_error(self, message: str, stopped: bool) -> None:
        with self._lock:
            self.error = message
            if stopped:
                self._stopped()

    def _stopped(self) -> None:
        self.live = False

    def _end_refresh(self) -> None:
        if self._subscription is not None:
            self._subscription.cancel()  # waits; the thread goes with the last one
        lock = getattr(self, "_lock", None)  # None: the constructor failed early
        if lock is None:
            return
        with lock:
            self._stopped()

    def stop(self) -> None:
        """Stop following the run and keep the widget on screen, showing what it shows
        now (the notebook's clean-up: after "Run All" every output stays visible).

        No background refresh (nor thread, once no widget is live) is left. The view
        still answers the browser (scrolling, selecting a row); its saved output gets a
        static snapshot of this final state. Use :meth:`close` to remove it as well.
        """
        self._end_refresh()
        self._publish_snapshot()

    def close(self) -> None:
        """Stop following the run and close the widget: ipywidgets' close, which
        destroys the front-end model and so removes every view of it (its output goes
        blank). To stop the refresh and keep the output, use :meth:`stop`."""
        self._end_refresh()
        super().close()  # type: ignore[misc]


def seconds(value: float | timedelta) -> float:
    """A refresh interval in seconds, checked."""
    out = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not out > 0:
        raise ValueError(f"refresh_interval must be more than 0 seconds, not {value!r}")
    return out
