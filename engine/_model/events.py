"""History events as the replay core sees them, and Temporal's naming of event types."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

JsonDict = dict[str, Any]


@dataclass
class HistoryEvent:
    """One event: id, time (epoch seconds), short type name, Temporal JSON attributes.

    ``event_type`` is the short name (``"ActivityTaskScheduled"``); Temporal's JSON spells it
    ``EVENT_TYPE_ACTIVITY_TASK_SCHEDULED`` with attributes under
    ``activityTaskScheduledEventAttributes``. ``extra`` keeps top-level fields of imported
    events we do not interpret (``taskId``, ``version``, ...) so they are written back.
    """

    event_id: int
    event_time: float
    event_type: str
    attributes: JsonDict
    extra: JsonDict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<{self.event_id} {self.event_type}>"


#: The events that close a run.
CLOSING_EVENT_TYPES = frozenset(
    {
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "WorkflowExecutionCanceled",
        "WorkflowExecutionTerminated",
        "WorkflowExecutionTimedOut",
        "WorkflowExecutionContinuedAsNew",
    }
)

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def enum_name(event_type: str) -> str:
    """``ActivityTaskScheduled`` → ``EVENT_TYPE_ACTIVITY_TASK_SCHEDULED``."""
    return "EVENT_TYPE_" + _CAMEL.sub("_", event_type).upper()


@lru_cache(maxsize=512)
def short_name(enum: str) -> str:
    """``EVENT_TYPE_ACTIVITY_TASK_SCHEDULED`` → ``ActivityTaskScheduled``."""
    body = enum.removeprefix("EVENT_TYPE_")
    return "".join(part.capitalize() for part in body.split("_"))


@lru_cache(maxsize=512)
def attributes_key(event_type: str) -> str:
    """``ActivityTaskScheduled`` → ``activityTaskScheduledEventAttributes``."""
    return event_type[0].lower() + event_type[1:] + "EventAttributes"
