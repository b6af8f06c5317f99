"""The names of ``temporalio.service`` that user code catches: :class:`RPCError` and
:class:`RPCStatusCode` (defined in :mod:`engine.exceptions`, with the rest of the tree).

There is no gRPC service here (the client calls the engine's service in-process, through
the database), so the connection classes of ``temporalio.service`` have no counterpart.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from .exceptions import RPCError, RPCStatusCode

__all__ = ["PayloadLimitsConfig", "RPCError", "RPCStatusCode"]


@dataclass(frozen=True)
class PayloadLimitsConfig:
    """Warning thresholds for the size of what a client or worker sends, as
    ``temporalio.service.PayloadLimitsConfig``: a payload field (an input, a result, ...)
    over ``payloads_warn_size`` bytes, or a memo over ``memo_warn_size``, is logged
    (logger ``engine.payloads``); 0 turns a warning off. The error limits (2 MB) apply
    whatever these say."""

    payloads_warn_size: int = 512 * 1024
    memo_warn_size: int = 2 * 1024


T = TypeVar("T")


async def within_rpc_timeout(
    call: Awaitable[T],
    rpc_timeout: timedelta | None,
    what: str,
    rpc_metadata: Mapping[str, str | bytes] | None = None,
) -> T:
    """``call``, bounded by a client call's ``rpc_timeout`` as ``temporalio`` bounds its RPC:
    when it has not finished in time it is cancelled and :class:`RPCError`
    ``DEADLINE_EXCEEDED`` is raised (what it asked for may still happen, as with a gRPC
    deadline). ``rpc_metadata`` (gRPC headers in ``temporalio``) is accepted and ignored:
    there is no gRPC here.
    """
    del rpc_metadata
    if rpc_timeout is None:
        return await call
    seconds = max(rpc_timeout.total_seconds(), 0.0)
    if seconds == 0:
        # Expired before it is awaited, as a gRPC call's zero deadline: a call that would
        # not suspend (a lone change on SQLite runs on this thread) would otherwise finish
        # before the timeout could cancel it. (What was set going before, an eager start's
        # task say, may still happen, as with a gRPC deadline.)
        if inspect.iscoroutine(call):
            call.close()
        raise RPCError(
            f"deadline exceeded: {what} did not finish within the rpc_timeout of 0s",
            RPCStatusCode.DEADLINE_EXCEEDED,
        )
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if not deadline.expired():
            raise
        raise RPCError(
            f"deadline exceeded: {what} did not finish within the rpc_timeout of {seconds:g}s",
            RPCStatusCode.DEADLINE_EXCEEDED,
        ) from None
