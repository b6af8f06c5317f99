"""JSON on the hot path: the standard library's C encoder and scanner, called directly.

``json.JSONEncoder.encode`` builds a C encoder object for every call, and ``json.loads`` runs
two regular expressions around the C scanner; per history event and payload that adds up
(about a quarter of the time of encoding a typical event's attributes). The output is the
standard library's, byte for byte; anything unusual (leading whitespace, trailing data, a
cycle) goes through the standard functions, so errors read the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from json import scanner as _scanner
from typing import Any


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_dumps(
    *, sort_keys: bool = False, default: Callable[[Any], Any] | None = None
) -> Callable[[Any], str]:
    """A ``dumps`` writing compact JSON (``separators=(",", ":")``, ASCII only), as
    ``json.dumps(value, separators=(",", ":"), sort_keys=..., default=...)`` does."""
    standard = json.JSONEncoder(separators=(",", ":"), sort_keys=sort_keys, default=default)
    make = getattr(_encoder, "c_make_encoder", None)
    if make is None:  # a Python built without the C accelerator
        return standard.encode
    # No markers (the cycle check): a cycle ends in RecursionError, and the standard
    # encoder, run again, says what it is.
    fast = make(
        None,
        default or _not_serializable,
        _encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        sort_keys,
        False,
        True,
    )

    def dumps(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return standard.encode(value)

    return dumps


_scan_once = _scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads(text: str) -> Any:
    """``json.loads`` for a document without surrounding whitespace (what we write)."""
    try:
        value, end = _scan_once(text, 0)
    except Exception:
        return json.loads(text)  # the standard path raises the standard error
    if end != len(text):
        return json.loads(text)
    return value
