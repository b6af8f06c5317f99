"""The schedule classes of ``temporalio.client``, with the same names, fields and defaults.

``engine.client`` exports them; ``engine._schedule_api`` turns them into the service's JSON
and back. Read back from the service (``describe()``, ``list_schedules()``), an action's
``args`` are :class:`~engine.converter.Payload` objects, as ``temporalio`` gives raw
payloads; they can be passed back unchanged in an update.
"""

from __future__ import annotations

import dataclasses
from abc import ABC
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ._model.schedules import ScheduleOverlapPolicy
from .common import Priority, RetryPolicy, SearchAttributes, TypedSearchAttributes
from .exceptions import InvalidArgumentError

_missing: Any = object()


@dataclass(frozen=True)
class ScheduleRange:
    """Values ``start`` to ``end`` inclusive, every ``step``: an ``end`` below ``start``
    is ``start``, a ``step`` of 0 is 1 (as ``temporalio``)."""

    start: int
    end: int = 0
    step: int = 0

    def __post_init__(self) -> None:
        """Fill the defaults (frozen: set through object)."""
        if self.end < self.start:
            object.__setattr__(self, "end", self.start)
        if self.step == 0:
            object.__setattr__(self, "step", 1)


@dataclass
class ScheduleCalendarSpec:
    """Times whose every field matches one of its ranges (``year`` empty: every year),
    on the wall clock of the spec's time zone. The defaults: midnight every day."""

    second: Sequence[ScheduleRange] = (ScheduleRange(0),)
    minute: Sequence[ScheduleRange] = (ScheduleRange(0),)
    hour: Sequence[ScheduleRange] = (ScheduleRange(0),)
    day_of_month: Sequence[ScheduleRange] = (ScheduleRange(1, 31),)
    month: Sequence[ScheduleRange] = (ScheduleRange(1, 12),)
    year: Sequence[ScheduleRange] = ()
    #: 0-6, 0 is Sunday.
    day_of_week: Sequence[ScheduleRange] = (ScheduleRange(0, 6),)
    comment: str | None = None


@dataclass
class ScheduleIntervalSpec:
    """Times ``epoch + n * every + offset``."""

    every: timedelta
    offset: timedelta | None = None


@dataclass
class ScheduleSpec:
    """When a schedule's actions fall: the union of ``calendars``, ``intervals`` and
    ``cron_expressions``, minus what ``skip`` matches, between ``start_at`` and ``end_at``;
    each time moved later by up to ``jitter``; calendars in ``time_zone_name`` (IANA)."""

    calendars: Sequence[ScheduleCalendarSpec] = dataclasses.field(default_factory=list)
    intervals: Sequence[ScheduleIntervalSpec] = dataclasses.field(default_factory=list)
    cron_expressions: Sequence[str] = dataclasses.field(default_factory=list)
    skip: Sequence[ScheduleCalendarSpec] = dataclasses.field(default_factory=list)
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: timedelta | None = None
    time_zone_name: str | None = None


class ScheduleAction(ABC):  # noqa: B024 (temporalio's base class, with no method here)
    """What a schedule does at its times: :class:`ScheduleActionStartWorkflow`."""


@dataclass(init=False, eq=True)
class ScheduleActionStartWorkflow(ScheduleAction):
    """Start a run of ``workflow`` (a ``@workflow.run`` method or a type name) with
    ``arg`` / ``args``; the options are ``Client.start_workflow``'s. Each run's workflow
    id is ``id`` followed by the action's time (``my-id-2026-12-02T09:00:00Z``)."""

    workflow: str
    args: Sequence[Any]
    id: str
    task_queue: str
    execution_timeout: timedelta | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    retry_policy: RetryPolicy | None
    memo: Mapping[str, Any] | None
    typed_search_attributes: TypedSearchAttributes
    untyped_search_attributes: SearchAttributes
    static_summary: str | None
    static_details: str | None
    priority: Priority
    headers: Mapping[str, Any] | None

    def __init__(
        self,
        workflow: str | Callable[..., Awaitable[Any]],
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        id: str | None = None,
        task_queue: str | None = None,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        task_timeout: timedelta | None = None,
        retry_policy: RetryPolicy | None = None,
        memo: Mapping[str, Any] | None = None,
        typed_search_attributes: TypedSearchAttributes = TypedSearchAttributes.empty,
        untyped_search_attributes: SearchAttributes | None = None,
        static_summary: str | None = None,
        static_details: str | None = None,
        headers: Mapping[str, Any] | None = None,
        priority: Priority = Priority.default,
    ) -> None:
        """Create the action (``id`` and ``task_queue`` are required)."""
        from .workflow import definition_name

        if not id:
            raise InvalidArgumentError("ScheduleActionStartWorkflow: id is required")
        if not task_queue:
            raise InvalidArgumentError("ScheduleActionStartWorkflow: task_queue is required")
        if not isinstance(workflow, str):
            try:
                workflow = definition_name(workflow)
            except Exception as err:
                raise InvalidArgumentError(f"ScheduleActionStartWorkflow.workflow: {err}") from None
        if not workflow:
            raise InvalidArgumentError(
                "ScheduleActionStartWorkflow.workflow: a schedule cannot start a dynamic "
                "workflow by itself: give the workflow type name"
            )
        if arg is not _missing and args:
            raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
        self.workflow: str = workflow
        self.args: Sequence[Any] = [arg] if arg is not _missing else list(args)
        self.id: str = id
        self.task_queue: str = task_queue
        self.execution_timeout = execution_timeout
        self.run_timeout = run_timeout
        self.task_timeout = task_timeout
        self.retry_policy = retry_policy
        self.memo = memo
        self.typed_search_attributes = typed_search_attributes
        self.untyped_search_attributes: SearchAttributes = dict(untyped_search_attributes or {})
        self.static_summary = static_summary
        self.static_details = static_details
        self.headers = headers
        self.priority = priority


@dataclass
class ScheduleBackfill:
    """Take the action times in (``start_at``, ``end_at``] as if they were now (no
    catch-up window applies); ``overlap`` overrides the schedule's policy for them."""

    start_at: datetime
    end_at: datetime
    overlap: ScheduleOverlapPolicy | None = None


@dataclass
class SchedulePolicy:
    """``overlap``: what an action does while a run it started is open (SKIP).
    ``catchup_window``: how late an action may still be taken after the service was
    down (None: a year; never under 10 s). ``pause_on_failure``: pause when a run fails
    or times out (after its retries)."""

    overlap: ScheduleOverlapPolicy = dataclasses.field(
        default_factory=lambda: ScheduleOverlapPolicy.SKIP
    )
    catchup_window: timedelta | None = None
    pause_on_failure: bool = False


@dataclass
class ScheduleState:
    """``note`` (the scheduler may overwrite it, pausing on failure), ``paused``, and
    ``limited_actions`` with ``remaining_actions`` (each action takes one)."""

    note: str | None = None
    paused: bool = False
    limited_actions: bool = False
    remaining_actions: int = 0


@dataclass
class Schedule:
    """A schedule: its action, its spec, its policy and its state."""

    action: ScheduleAction
    spec: ScheduleSpec
    policy: SchedulePolicy = dataclasses.field(default_factory=SchedulePolicy)
    state: ScheduleState = dataclasses.field(default_factory=ScheduleState)


class ScheduleActionExecution(ABC):  # noqa: B024
    """An action taken: :class:`ScheduleActionExecutionStartWorkflow`."""


@dataclass
class ScheduleActionExecutionStartWorkflow(ScheduleActionExecution):
    """The run an action started."""

    workflow_id: str
    first_execution_run_id: str


@dataclass
class ScheduleActionResult:
    """When an action was due (``scheduled_at``, with its jitter), when it started, what."""

    scheduled_at: datetime
    started_at: datetime
    action: ScheduleActionExecution


@dataclass
class ScheduleInfo:
    """Where a schedule stands (``temporalio``'s fields first, this engine's after)."""

    num_actions: int
    num_actions_missed_catchup_window: int
    num_actions_skipped_overlap: int
    running_actions: Sequence[ScheduleActionExecution]
    #: The 10 most recent actions, oldest first.
    recent_actions: Sequence[ScheduleActionResult]
    #: The next 10 action times (with their jitter).
    next_action_times: Sequence[datetime]
    created_at: datetime
    last_updated_at: datetime | None
    #: Starts waiting for the open run to close (BUFFER_ONE, BUFFER_ALL, CANCEL_OTHER):
    #: their nominal times. Temporal keeps them too but does not show them.
    buffered_actions: Sequence[datetime] = ()
    #: Why the spec cannot be used any more (a time zone gone from this machine), if so.
    invalid_schedule_error: str | None = None


@dataclass
class ScheduleActionLogEntry:
    """One row of a schedule's action log (this engine's; Temporal keeps counters only):
    an action time and what became of it. ``outcome`` is one of ``started``,
    ``skipped_overlap``, ``missed_catchup_window``, ``superseded``, ``not_taken``,
    ``start_failed``, ``cancelled_other`` or ``terminated_other`` (the run named is the
    one cancelled or terminated); ``source`` is ``spec``, ``trigger`` or ``backfill``."""

    id: int
    nominal_time: datetime
    scheduled_time: datetime
    decided_time: datetime
    outcome: str
    source: str
    overlap: ScheduleOverlapPolicy
    workflow_id: str | None
    run_id: str | None
    detail: str | None


@dataclass
class ScheduleDescription:
    """A schedule as described: ``schedule`` can be changed and passed to ``update``.
    ``raw_description`` is the service's record of it (JSON-like)."""

    id: str
    schedule: Schedule
    info: ScheduleInfo
    typed_search_attributes: TypedSearchAttributes
    search_attributes: SearchAttributes
    data_converter: Any
    raw_description: Any

    async def memo(self) -> Mapping[str, Any]:
        """The schedule's memo, decoded without type hints."""
        return {k: self._decode(p, None) for k, p in self._raw_memo().items()}

    async def memo_value(
        self, key: str, default: Any = _missing, *, type_hint: type | None = None
    ) -> Any:
        """One memo value (``default`` if it is missing, else :class:`KeyError`)."""
        raw = self._raw_memo()
        if key not in raw:
            if default is _missing:
                raise KeyError(f"memo does not have a value for key {key!r}")
            return default
        return self._decode(raw[key], type_hint)

    def _raw_memo(self) -> dict[str, Any]:
        return dict(getattr(self.raw_description, "memo", None) or {})

    def _decode(self, payload: Mapping[str, Any], type_hint: type | None) -> Any:
        from .converter import Payload

        return self.data_converter.from_payload(Payload.from_json(payload), type_hint)


@dataclass
class ScheduleUpdateInput:
    """What an ``update`` callback is given."""

    description: ScheduleDescription


@dataclass
class ScheduleUpdate:
    """What an ``update`` callback returns (None: no change)."""

    schedule: Schedule
    search_attributes: TypedSearchAttributes | None = None


class ScheduleListAction(ABC):  # noqa: B024
    """A listed schedule's action: :class:`ScheduleListActionStartWorkflow`."""


@dataclass
class ScheduleListActionStartWorkflow(ScheduleListAction):
    """The workflow type a listed schedule starts."""

    workflow: str


@dataclass
class ScheduleListState:
    """A listed schedule's note and whether it is paused."""

    note: str | None
    paused: bool


@dataclass
class ScheduleListSchedule:
    """A listed schedule's action, spec and state."""

    action: ScheduleListAction
    spec: ScheduleSpec
    state: ScheduleListState


@dataclass
class ScheduleListInfo:
    """A listed schedule's recent actions and next action times."""

    recent_actions: Sequence[ScheduleActionResult]
    next_action_times: Sequence[datetime]


@dataclass
class ScheduleListDescription:
    """One schedule of ``list_schedules``."""

    id: str
    schedule: ScheduleListSchedule | None
    info: ScheduleListInfo | None
    typed_search_attributes: TypedSearchAttributes
    search_attributes: SearchAttributes
    data_converter: Any
    raw_entry: Any

    async def memo(self) -> Mapping[str, Any]:
        """The schedule's memo, decoded without type hints."""
        from .converter import Payload

        raw = dict(getattr(self.raw_entry, "memo", None) or {})
        return {k: self.data_converter.from_payload(Payload.from_json(p)) for k, p in raw.items()}
