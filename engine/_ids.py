"""UUID texts for ids the engine makes (run ids, request ids), formatted directly.

``str(uuid.uuid4())`` builds a ``UUID`` object and formats it through Python code; a busy
worker makes several ids per workflow, so these write the same canonical text from the
random bytes straight away.
"""

from __future__ import annotations

import os
import time


def _text(raw: bytearray) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_uuid() -> str:
    """A random UUID (version 4), as ``str(uuid.uuid4())`` writes it."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return _text(raw)


def time_ordered_uuid() -> str:
    """A UUID version 7 (RFC 9562): the Unix time in milliseconds in its first 48 bits,
    then 74 random bits, so ids made later sort after ids made earlier."""
    ms = time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return _text(raw)
