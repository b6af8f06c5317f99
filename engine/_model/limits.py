"""Checks of what callers name things with, before anything is written: Temporal's limits,
the same on SQLite and PostgreSQL.

Ids, type names, task queues, request ids and signal, query and update names are at most
1,000 bytes in UTF-8 (Temporal's ``limit.maxIDLength``, which counts bytes: 250 emoji
already reach it), and no text that reaches a database column
may hold NUL (PostgreSQL refuses it; SQLite would keep it and cut it off elsewhere) or a
lone surrogate (not encodable as UTF-8, so no driver can send it). Messages about a bad
value quote at most 200 characters of it. Enum options given as members, their integer
values or their names are all accepted; anything else is refused with the choices.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from ..exceptions import InvalidArgumentError

#: Temporal's ``limit.maxIDLength`` (UTF-8 bytes): ids, type names, task queues, handler
#: names, request ids.
MAX_ID_LENGTH = 1000
#: How much of a bad value an error message quotes.
QUOTE_LIMIT = 200

E = TypeVar("E", bound=enum.Enum)


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters (saying how long the value was)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value):,} characters" if isinstance(value, str) else f"{len(text):,} long"
    return f"{text[:limit]}... ({size})"


def check_text(value: Any, field: str) -> str:
    """A string that can be stored: no NUL, no lone surrogate. Returns it."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        at = value.index("\x00")
        raise InvalidArgumentError(
            f"{field} contains a NUL character (at {at}): {quote(value)}; remove it"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidArgumentError(
            f"{field} contains a lone surrogate {value[err.start]!r} (at {err.start}), which "
            f"is not valid Unicode text: {quote(value)}; it usually comes from decoding "
            "bytes with errors='surrogateescape'"
        ) from None
    return value


def check_id(value: Any, field: str, *, limit: int = MAX_ID_LENGTH) -> str:
    """An id or name: a non-empty string of at most ``limit`` bytes in UTF-8 that can be
    stored (see :func:`check_text`). Returns it."""
    text = check_text(value, field)
    if not text:
        raise InvalidArgumentError(f"{field} must not be empty")
    # Most ids are short ASCII: no need to encode those to know their size.
    size = len(text) if len(text) * 4 <= limit else len(text.encode("utf-8"))
    if size > limit:
        chars = "" if size == len(text) else f" ({len(text):,} characters)"
        raise InvalidArgumentError(
            f"{field} is {size:,} bytes long in UTF-8{chars}; Temporal's limit (and this "
            f"engine's) is {limit:,} bytes: {quote(text)}"
        )
    return text


#: Bytes of a namespace name: the store's column holds 255 (Temporal's server takes longer
#: names; a deliberate limit of this schema).
MAX_NAMESPACE_LENGTH = 255


def check_namespace(value: Any) -> str:
    """A namespace name (see :func:`check_id`; at most 255 bytes). Returns it."""
    return check_id(value, "namespace", limit=MAX_NAMESPACE_LENGTH)


def check_enum(value: Any, kind: type[E], field: str) -> E:
    """``value`` as a member of ``kind``: a member, its integer value, or its name (also
    with Temporal's prefix, ``WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE``)."""
    if isinstance(value, kind):
        return value
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        try:
            return kind(value)
        except ValueError:
            pass
    elif isinstance(value, str):
        name = value.strip().upper()
        for member in kind:
            if name == member.name or (
                name.endswith("_" + member.name) and _prefixed(name, member.name, kind)
            ):
                return member
    choices = ", ".join(m.name for m in kind)
    raise InvalidArgumentError(f"{field} must be a {kind.__name__} ({choices}), not {quote(value)}")


def _prefixed(name: str, member: str, kind: type[enum.Enum]) -> bool:
    """Whether ``name`` is ``member`` with Temporal's enum prefix for ``kind``
    (``WorkflowIDReusePolicy`` -> ``WORKFLOW_ID_REUSE_POLICY_``)."""
    prefix = name[: -len(member)]
    letters = "".join(c for c in kind.__name__ if c.isalpha()).upper()
    return prefix.replace("_", "") == letters
