"""Replaying recorded histories against workflow code, without a database or a worker.

Used by :class:`engine.worker.Replayer` (replay tests, the ``durable replay`` command) and
by the step-through debugger. Pure: events in, verdict out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._model.definitions import WorkflowDefinition, find_definition
from .._model.events import HistoryEvent
from ..converter import DataConverter
from ..exceptions import InvalidArgumentError, NondeterminismError
from .driver import HistoryDriver
from .handlers import WorkflowTaskError
from .instance import WorkflowInstance
from .teardown import tear_down


@dataclass
class ReplayOutcome:
    """What replaying one history found."""

    workflow_id: str
    run_id: str
    workflow_type: str
    events: int
    failure: Exception | None


def check_history(events: Sequence[HistoryEvent], *, workflow_id: str = "") -> None:
    """Raise :class:`InvalidArgumentError` if the events cannot be a history."""
    if not events:
        raise InvalidArgumentError(f"history of {workflow_id or 'the workflow'} has no events")
    if events[0].event_type != "WorkflowExecutionStarted":
        raise InvalidArgumentError(
            f"history of {workflow_id or 'the workflow'} starts with event "
            f"{events[0].event_id} {events[0].event_type}, not WorkflowExecutionStarted"
        )
    expected = events[0].event_id
    if expected != 1:
        raise InvalidArgumentError(
            f"history of {workflow_id or 'the workflow'} starts at event id {expected}, not 1"
        )
    for event in events:
        if event.event_id != expected:
            raise InvalidArgumentError(
                f"history of {workflow_id or 'the workflow'} has a gap: event id "
                f"{event.event_id} follows {expected - 1} (event {expected} is missing)"
            )
        expected += 1


def _workflow_type(started: HistoryEvent) -> str:
    return str(started.attributes.get("workflowType", {}).get("name", ""))


def new_driver(
    events: Sequence[HistoryEvent],
    definitions: dict[str, WorkflowDefinition],
    converter: DataConverter,
    *,
    workflow_id: str,
    failure_types: tuple[type[BaseException], ...] = (),
    namespace: str = "default",
) -> HistoryDriver:
    """A driver over a fresh instance of the history's workflow type (``failure_types``:
    the worker-level ``workflow_failure_exception_types``; ``namespace``: what
    ``workflow.info().namespace`` says)."""
    check_history(events, workflow_id=workflow_id)
    attrs = events[0].attributes
    wf_type = _workflow_type(events[0])
    defn = find_definition(definitions, wf_type)
    if defn is None:
        known = ", ".join(sorted(definitions)) or "none"
        raise InvalidArgumentError(
            f"the history of {workflow_id or 'this workflow'} is of workflow type "
            f"{wf_type!r}, which is not among the workflows given to the replayer ({known})"
        )
    run_id = str(
        attrs.get("originalExecutionRunId") or attrs.get("firstExecutionRunId") or "replay"
    )
    instance = WorkflowInstance(  # type: ignore[abstract]
        defn,
        namespace=namespace,
        workflow_id=workflow_id or str(attrs.get("workflowId", "")),
        run_id=run_id,
        task_queue=str(attrs.get("taskQueue", {}).get("name", "")),
        converter=converter,
    )
    instance.failure_types += failure_types
    return HistoryDriver(instance)


def replay_events(
    events: Sequence[HistoryEvent],
    definitions: dict[str, WorkflowDefinition],
    converter: DataConverter,
    *,
    workflow_id: str,
    failure_types: tuple[type[BaseException], ...] = (),
    namespace: str = "default",
) -> ReplayOutcome:
    """Replay a whole history; the outcome's ``failure`` says what went wrong, if anything."""
    driver = new_driver(
        events,
        definitions,
        converter,
        workflow_id=workflow_id,
        failure_types=failure_types,
        namespace=namespace,
    )
    failure: Exception | None = None
    try:
        driver.apply(events)
        driver.finish()
    except NondeterminismError as err:
        failure = err
    except WorkflowTaskError as err:
        failure = err
    finally:
        tear_down(driver.instance)  # a running workflow's code ends here, not in the collector
    return ReplayOutcome(
        workflow_id=driver.instance.workflow_id,
        run_id=driver.instance.run_id,
        workflow_type=_workflow_type(events[0]) or driver.instance.defn.name,
        events=len(events),
        failure=failure,
    )


def answer_query(
    events: Sequence[HistoryEvent],
    defn: WorkflowDefinition,
    converter: DataConverter,
    workflow_id: str,
    query_type: str,
    args: list[dict[str, object]],
) -> list[dict[str, object]]:
    """Replay a run up to its last completed workflow task, then run a query handler.

    Nothing is recorded: queries are reads. Raises with a clear message for an unknown
    query type or a handler that raises.
    """
    trimmed = list(events)
    # A task that was scheduled or is running has not produced its state yet.
    while trimmed and trimmed[-1].event_type in ("WorkflowTaskScheduled", "WorkflowTaskStarted"):
        trimmed.pop()
    driver = new_driver(trimmed, {defn.name: defn}, converter, workflow_id=workflow_id)
    try:
        driver.apply(trimmed)
        if trimmed:
            driver.apply_pending(events[-1].event_time)
        return driver.instance.query(query_type, args)
    finally:
        tear_down(driver.instance)  # the replayed code ends here, not in the collector
