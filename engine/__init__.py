"""durable-notebook's engine: durable workflows and activities, Temporal's programming model.

The public API is exactly the names in ``__all__`` (pinned by a test)::

    from engine import Client, Worker, workflow, activity, RetryPolicy
"""

from __future__ import annotations

from . import activity, exceptions, workflow
from ._service.clock import Clock, SkippingClock
from .client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowHandle,
)
from .common import (
    ActivityCancellationType,
    RetryPolicy,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from .converter import DataConverter, Payload, PayloadCodec, PayloadConverter
from .exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    NondeterminismError,
    TerminatedError,
    WorkflowAlreadyStartedError,
    WorkflowFailureError,
)
from .history import HistoryEvent, WorkflowHistory
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "ActivityCancellationType",
    "ActivityError",
    "ApplicationError",
    "CancelledError",
    "Client",
    "Clock",
    "DataConverter",
    "HistoryEvent",
    "NondeterminismError",
    "Payload",
    "PayloadCodec",
    "PayloadConverter",
    "RetryPolicy",
    "SkippingClock",
    "TerminatedError",
    "Worker",
    "WorkflowAlreadyStartedError",
    "WorkflowExecution",
    "WorkflowExecutionDescription",
    "WorkflowExecutionStatus",
    "WorkflowFailureError",
    "WorkflowHandle",
    "WorkflowHistory",
    "WorkflowIDConflictPolicy",
    "WorkflowIDReusePolicy",
    "__version__",
    "activity",
    "exceptions",
    "workflow",
]
