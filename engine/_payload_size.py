"""Payload sizes: Temporal's limits on what one request carries, measured without
decoding, and the warnings of ``PayloadLimitsConfig`` (re-exported by
:mod:`engine.converter`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .exceptions import PayloadSizeError

if TYPE_CHECKING:
    from .converter import Payload

MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
"""Largest total payload size one request (start, signal, result, ...) may carry."""

MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
"""Largest total payload size one history transaction may append."""


def _format_mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f}".removesuffix(".0") + " MB"


def _b64_size(text: object) -> int:
    """Bytes a canonical base64 string decodes to."""
    if not isinstance(text, str) or not text:
        return 0
    return len(text) * 3 // 4 - text.count("=", len(text) - 2)


def json_payload_size(payload: Mapping[str, object]) -> int:
    """``Payload.from_json(payload).size`` without decoding."""
    metadata = payload.get("metadata") or {}
    size = _b64_size(payload.get("data"))
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            size += len(str(key).encode()) + _b64_size(value)
    return size


_size_log = logging.getLogger("engine.payloads")


def warn_payload_size(what: str, size: int, warn_at: int) -> None:
    """The warning for data over a ``PayloadLimitsConfig`` threshold (under the limit)."""
    _size_log.warning(
        "%s is %s bytes, over the warning threshold of %s bytes (payload_limits); the "
        "limit is %s: consider storing large data elsewhere and passing its key",
        what,
        f"{size:,}",
        f"{warn_at:,}",
        _format_mb(MAX_PAYLOAD_BYTES),
    )


def check_payloads_size(
    payloads: Sequence[Payload], *, what: str, limit: int = MAX_PAYLOAD_BYTES, warn_at: int = 0
) -> None:
    """Raise :class:`PayloadSizeError` if ``payloads`` together exceed ``limit`` bytes;
    log a warning if they exceed ``warn_at`` (when not 0: ``payload_limits``' threshold).

    ``what`` names the data in the message, e.g. ``"workflow input"``.
    """
    size = sum(p.size for p in payloads)
    if size <= limit:
        if warn_at and size > warn_at:
            warn_payload_size(what, size, warn_at)
        return
    shown = _format_mb(size)
    if shown == _format_mb(limit):
        shown = f"{size:,} bytes"
    raise PayloadSizeError(
        f"{what} is {shown}; a single request may carry at most {_format_mb(limit)}. "
        "Store large data elsewhere and pass its key."
    )
