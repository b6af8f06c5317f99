"""Finishing an activity from outside its worker: ``client.get_async_activity_handle``.

An activity that calls ``activity.raise_complete_async()`` ends its function without an
outcome; its attempt stays running (its start-to-close and heartbeat timeouts still count)
until some process with a client on the same database completes, fails or cancels it through
an :class:`AsyncActivityHandle`, named by the attempt's task token or by workflow id, run id
and activity id (as in ``temporalio.client``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ._ids import random_uuid
from ._service.types import ActivityRef
from .activity import ActivityCancellationDetails
from .exceptions import AsyncActivityCancelledError, InvalidArgumentError
from .service import within_rpc_timeout

if TYPE_CHECKING:
    from .client import Client

__all__ = ["AsyncActivityHandle", "AsyncActivityIDReference"]

_UNSET: Any = object()
_no_metadata: Mapping[str, str | bytes] = {}


@dataclass(frozen=True)
class AsyncActivityIDReference:
    """An activity named by ids rather than by task token."""

    workflow_id: str
    run_id: str | None
    activity_id: str


class AsyncActivityHandle:
    """Heartbeat, complete, fail or cancel one activity from any process."""

    def __init__(self, client: Client, id_or_token: AsyncActivityIDReference | bytes) -> None:
        """Use :meth:`Client.get_async_activity_handle` rather than this."""
        self._client = client
        self._id_or_token = id_or_token
        if isinstance(id_or_token, AsyncActivityIDReference):
            self._ref = ActivityRef(
                namespace=client.namespace,
                workflow_id=id_or_token.workflow_id,
                run_id=id_or_token.run_id,
                activity_id=id_or_token.activity_id,
            )
        else:
            self._ref = ActivityRef.from_token(id_or_token)

    async def heartbeat(
        self,
        *details: Any,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Record a heartbeat (with details for the next attempt). Raises
        :class:`AsyncActivityCancelledError` once the activity was asked to cancel.
        ``rpc_timeout`` bounds each of these calls (``RPCError`` ``DEADLINE_EXCEEDED``)."""
        payloads = self._client.data_converter.to_payloads_json(list(details)) if details else None
        beat = self._client.service.heartbeat_activity_by_ref(self._ref, payloads)
        if await within_rpc_timeout(beat, rpc_timeout, "the heartbeat", rpc_metadata):
            raise AsyncActivityCancelledError(
                details=ActivityCancellationDetails(cancel_requested=True)
            )

    async def complete(
        self,
        result: Any = _UNSET,
        *,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Complete the activity with ``result`` (no result: the workflow gets None)."""
        payloads = (
            [] if result is _UNSET else self._client.data_converter.to_payloads_json([result])
        )
        await self._settle(rpc_timeout, rpc_metadata, "completed", payloads)

    async def _settle(
        self,
        rpc_timeout: timedelta | None,
        rpc_metadata: Mapping[str, str | bytes],
        outcome: str,
        value: Any,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        # One request id for every try the store makes: a try whose commit went through
        # unheard is recognised and not reported as "the activity has ended".
        settling = self._client.service.settle_activity_by_ref(
            self._ref, outcome, value, details, random_uuid()
        )
        await within_rpc_timeout(
            settling, rpc_timeout, f"reporting the activity {outcome}", rpc_metadata
        )

    async def fail(
        self,
        error: Exception,
        *,
        last_heartbeat_details: Sequence[Any] = (),
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Fail the attempt with ``error`` (retried by the activity's retry policy; the
        next attempt sees ``last_heartbeat_details``)."""
        if not isinstance(error, BaseException):
            raise InvalidArgumentError(
                f"fail() takes the exception to fail with, got {type(error).__name__}"
            )
        converter = self._client.data_converter
        failure = converter.to_failure(error)
        details = (
            converter.to_payloads_json(list(last_heartbeat_details))
            if last_heartbeat_details
            else None
        )
        await self._settle(rpc_timeout, rpc_metadata, "failed", failure, details)

    async def report_cancellation(
        self,
        *details: Any,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Report the activity cancelled (after it was asked to cancel)."""
        payloads = self._client.data_converter.to_payloads_json(list(details)) if details else []
        await self._settle(rpc_timeout, rpc_metadata, "canceled", payloads)


def async_activity_handle(
    client: Client,
    *,
    workflow_id: str | None,
    run_id: str | None,
    activity_id: str | None,
    task_token: bytes | None,
) -> AsyncActivityHandle:
    """The handle :meth:`Client.get_async_activity_handle` returns, its arguments checked."""
    if task_token is not None:
        if workflow_id is not None or run_id is not None or activity_id is not None:
            raise InvalidArgumentError(
                "pass either task_token or workflow_id/run_id/activity_id, not both"
            )
        return AsyncActivityHandle(client, task_token)
    if not workflow_id or not activity_id:
        raise InvalidArgumentError(
            "get_async_activity_handle needs task_token=, or workflow_id= and activity_id= "
            "(run_id= optional: the workflow's open run)"
        )
    return AsyncActivityHandle(client, AsyncActivityIDReference(workflow_id, run_id, activity_id))
