"""The list filter: a small subset of Temporal's visibility query language.

Supported: ``Attribute = 'value'`` terms joined with ``AND``, over WorkflowId, RunId,
WorkflowType, TaskQueue and ExecutionStatus (``Running``, ``Completed``, ``Failed``,
``Canceled``, ``Terminated``, ``ContinuedAsNew``, ``TimedOut``). Anything else is refused
with a message saying what is understood.
"""

from __future__ import annotations

import re
from typing import Any

from ..common import WorkflowExecutionStatus
from ..exceptions import InvalidArgumentError

_COLUMNS = {
    "WorkflowId": "workflow_id",
    "RunId": "run_id",
    "WorkflowType": "workflow_type",
    "TaskQueue": "task_queue",
    "ExecutionStatus": "status",
}
_STATUSES = {
    "running": WorkflowExecutionStatus.RUNNING,
    "completed": WorkflowExecutionStatus.COMPLETED,
    "failed": WorkflowExecutionStatus.FAILED,
    "canceled": WorkflowExecutionStatus.CANCELED,
    "cancelled": WorkflowExecutionStatus.CANCELED,
    "terminated": WorkflowExecutionStatus.TERMINATED,
    "continuedasnew": WorkflowExecutionStatus.CONTINUED_AS_NEW,
    "timedout": WorkflowExecutionStatus.TIMED_OUT,
}
_TERM = re.compile(r"^\s*(\w+)\s*=\s*(?:'([^']*)'|\"([^\"]*)\")\s*$")
_AND = re.compile(r"\s+AND\s+", re.IGNORECASE)


def parse_filter(query: str | None) -> dict[str, Any]:
    """``"WorkflowType = 'Order' AND ExecutionStatus = 'Running'"`` → column filters."""
    if query is None or not query.strip():
        return {}
    filters: dict[str, Any] = {}
    for term in _AND.split(query.strip()):
        match = _TERM.match(term)
        if match is None:
            raise InvalidArgumentError(
                f"cannot read {term.strip()!r} in the list filter {query!r}: write terms "
                "like WorkflowType = 'Order', joined with AND"
            )
        name, value = (
            match.group(1),
            match.group(2) if match.group(2) is not None else match.group(3),
        )
        column = _COLUMNS.get(name)
        if column is None:
            raise InvalidArgumentError(
                f"unknown attribute {name!r} in the list filter {query!r}; known: "
                + ", ".join(_COLUMNS)
            )
        wanted: str | int = value
        if column == "status":
            status = _STATUSES.get(value.replace("_", "").replace(" ", "").lower())
            if status is None:
                raise InvalidArgumentError(
                    f"unknown ExecutionStatus {value!r}; known: Running, Completed, Failed, "
                    "Canceled, Terminated, ContinuedAsNew, TimedOut"
                )
            wanted = int(status)
        if filters.get(column, wanted) != wanted:  # AND of two values: no run has both
            raise InvalidArgumentError(
                f"{name} is given two different values in the list filter {query!r}: "
                "no run matches both; give each attribute once"
            )
        filters[column] = wanted
    return filters
