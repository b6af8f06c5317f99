"""The names of ``temporalio.service`` that user code catches: :class:`RPCError` and
:class:`RPCStatusCode` (defined in :mod:`engine.exceptions`, with the rest of the tree).

There is no gRPC service here (the client calls the engine's service in-process, through
the database), so the connection classes of ``temporalio.service`` have no counterpart.
"""

from __future__ import annotations

from .exceptions import RPCError, RPCStatusCode

__all__ = ["RPCError", "RPCStatusCode"]
