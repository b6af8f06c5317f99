"""UUID texts for ids the engine makes (run ids, request ids), formatted directly.

``str(uuid.uuid4())`` builds a ``UUID`` object and formats it through Python code; a busy
worker makes several ids per workflow, so these write the same canonical text from the
random bytes straight away.

The random bytes come from ``os.urandom``, fetched :data:`_BULK` bytes at a time for each
thread. ``os.urandom`` is a system call made without the interpreter lock, and a thread
that lets the lock go in a busy process waits for it again: up to the switch interval
(5 ms) while the event loop or another store thread runs. One call per id made each id
cost a wait on the store's writer threads, which make three per workflow; one call per
256 ids does not. A forked child starts with an empty buffer (``os.register_at_fork``), so
parent and child never hand out the same bytes. (A fork made by C code that runs no such
hook would share them, as it shares the ``random`` module's state; checking the process
id on every id instead costs a system call, 0.7 us here.)
"""

from __future__ import annotations

import os
import threading
import time

#: Random bytes fetched at once, per thread (256 random UUIDs).
_BULK = 4096


class _Pool(threading.local):
    """This thread's unused random bytes: ``data[at:]``."""

    def __init__(self) -> None:
        self.data = b""
        self.at = 0


_pool = _Pool()


def _forget_after_fork() -> None:
    # The child's one thread is the one that forked: its bytes are the parent's too.
    _pool.data = b""
    _pool.at = 0


os.register_at_fork(after_in_child=_forget_after_fork)


def _random(n: int) -> bytes:
    """``n`` bytes from ``os.urandom`` (read in bulk: see the module docstring)."""
    pool = _pool
    at = pool.at
    if at + n > len(pool.data):
        pool.data = os.urandom(_BULK)
        at = 0
    pool.at = at + n
    return pool.data[at : at + n]


def _text(raw: bytearray) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_uuid() -> str:
    """A random UUID (version 4), as ``str(uuid.uuid4())`` writes it."""
    raw = bytearray(_random(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return _text(raw)


def time_ordered_uuid() -> str:
    """A UUID version 7 (RFC 9562): the Unix time in milliseconds in its first 48 bits,
    then 74 random bits, so ids made later sort after ids made earlier."""
    ms = time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF
    raw = bytearray(ms.to_bytes(6, "big") + _random(10))
    raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 9562 variant
    return _text(raw)
