"""The hot-path JSON helpers write and read exactly what the standard library does."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from engine._json import compact_dumps, loads

SAMPLES: list[Any] = [
    1,
    -7,
    10**30,
    1.5,
    -0.0,
    1e300,
    float("inf"),
    "plain",
    'é \u2028 \n \x00 "quoted" \\',
    None,
    True,
    [],
    {},
    [[[]]],
    {"b": 1, "a": [1, 2.5, {"z": None, "y": "é"}]},
    {2: "int keys", 1: "become strings"},
]


@pytest.mark.parametrize("value", SAMPLES, ids=repr)
def test_dumps_and_loads_match_the_standard_library(value: Any) -> None:
    for sort_keys in (False, True):
        expected = json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)
        assert compact_dumps(sort_keys=sort_keys)(value) == expected
        assert loads(expected) == json.loads(expected)


def test_nan_round_trips_as_the_standard_library_writes_it() -> None:
    assert compact_dumps()(float("nan")) == "NaN"
    assert math.isnan(loads("NaN"))


def test_default_is_used_and_unknown_types_fail_as_in_the_standard_library() -> None:
    assert compact_dumps(default=str)({"when": object.__new__(_Odd)}) == '{"when":"odd"}'
    with pytest.raises(TypeError, match="Object of type _Odd is not JSON serializable"):
        compact_dumps()(_Odd())


def test_a_cycle_is_reported_as_the_standard_library_reports_it() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected"):
        compact_dumps()(cycle)


@pytest.mark.parametrize("text", [" 1", "1 ", "\n[1]\n"])
def test_surrounding_whitespace_is_read_as_the_standard_library_reads_it(text: str) -> None:
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "[1,", "{'a':1}", "1 2", "tru"])
def test_bad_documents_raise_the_standard_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


class _Odd:
    def __str__(self) -> str:
        return "odd"
