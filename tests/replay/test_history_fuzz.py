"""Fuzzing the history importer: mutated reference histories never crash it.

Each example takes one reference history (the goldens in ``histories/`` and Temporal's
recordings in ``tests/data/temporal``), applies a few structure-aware mutations (a field's
value replaced by another JSON type or an extreme, a field deleted, events duplicated,
swapped or truncated) and reads it with ``WorkflowHistory.from_json``, then replays it.
The property: the history is refused with a documented error (``HistoryFormatError`` or
another ``InvalidArgumentError``), or it replays, the result carrying any
nondeterminism or workflow error; never a ``RecursionError``, ``OverflowError``,
``IndexError``, ``KeyError``, ``TypeError``, ``ValueError`` or ``AttributeError`` from
inside the engine. Deterministic (``derandomize=True``) and bounded in examples.
"""

from __future__ import annotations

import asyncio
import copy
import json
import traceback
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import WorkflowHistory
from engine.exceptions import InvalidArgumentError
from engine.worker import Replayer
from tests.interop import engine_code as code

from ..conftest import TEMPORAL_DATA
from ..integration.test_basics import HelloWF, TimerWF
from ..integration.test_temporal_shapes import (
    CaughtFailureWF,
    FailedActivityWF,
    RetryWF,
    SeqActivitiesWF,
    SignalWF,
)

HISTORIES = Path(__file__).resolve().parent / "histories"
TEMPORAL_WORKFLOWS = [
    HelloWF,
    TimerWF,
    SignalWF,
    SeqActivitiesWF,
    RetryWF,
    FailedActivityWF,
    CaughtFailureWF,
]
SOURCES: list[tuple[Path, list[Any]]] = [
    *((p, code.ALL_WORKFLOWS) for p in sorted(HISTORIES.glob("*.json"))),
    *(
        (p, TEMPORAL_WORKFLOWS)
        for p in sorted(TEMPORAL_DATA.glob("temporal_history_*.json"))
        if "seq1000" not in p.name  # 6,000 events: too slow to replay per example
    ),
]
#: Errors that mean the engine crashed on its input instead of refusing it.
CRASHES = (
    RecursionError,
    OverflowError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    UnicodeError,
)
RAW = "\x00raw\x00"  # a string replaced in the JSON text by raw number text
RAW_NUMBERS = ["1e400", "-1e400", "1" * 5000, "-9223372036854775809", "NaN", "Infinity"]
DEEP = 3000

Path_ = tuple[str | int, ...]


@cache
def _source(index: int) -> tuple[dict[str, Any], list[Path_]]:
    """The parsed history and the paths of all its values (computed once)."""
    data = json.loads(SOURCES[index][0].read_text())
    paths: list[Path_] = []
    stack: list[tuple[Path_, Any]] = [((), data)]
    while stack:
        path, node = stack.pop()
        if path:
            paths.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    paths.sort(key=repr)
    return data, paths


def _deep(kind: str) -> Any:
    node: Any = {} if kind == "dict" else []
    for _ in range(DEEP):
        node = {"cause": node} if kind == "dict" else [node]
    return node


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
extremes = st.sampled_from(
    [
        None,
        True,
        0,
        -1,
        2**63,
        -(2**63) - 1,
        2**64,
        10**30,
        float("nan"),
        float("inf"),
        -0.0,
        1.5,
        "",
        "\ud800",
        "x" * 100_000,
        "EVENT_TYPE_",
        "-1",
        "1e400",
        "9999-12-31T23:59:59Z",
        "0000-00-00T00:00:00Z",
        "99999999999999s",
        {},
        [],
        [{}],
        {"payloads": [{}]},
        {"name": 3},
        RAW,
        "deep-dict",
        "deep-list",
    ]
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """A mutated reference history, as JSON text, with the workflows it was recorded from."""
    index = draw(st.integers(0, len(SOURCES) - 1))
    original, paths = _source(index)
    data = copy.deepcopy(original)
    raw = "1e400"
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "events"]))
        events = data.get("events") if isinstance(data, dict) else None
        if op == "events" and isinstance(events, list) and events:
            how = draw(st.sampled_from(["duplicate", "swap", "truncate", "drop"]))
            i = draw(st.integers(0, len(events) - 1))
            j = draw(st.integers(0, len(events) - 1))
            if how == "duplicate":
                events.insert(j, copy.deepcopy(events[i]))
            elif how == "swap":
                events[i], events[j] = events[j], events[i]
            elif how == "truncate":
                del events[i:]
            else:
                del events[i]
            continue
        path = paths[draw(st.integers(0, len(paths) - 1))]
        parent: Any = data
        for step in path[:-1]:
            try:
                parent = parent[step]
            except (KeyError, IndexError, TypeError):
                parent = None
                break
        last = path[-1]
        if not isinstance(parent, dict | list) or (
            isinstance(parent, list) and not (isinstance(last, int) and last < len(parent))
        ):
            continue
        if isinstance(parent, dict) and last not in parent:
            continue
        if op == "delete":
            del parent[last]  # type: ignore[arg-type]
            continue
        value = draw(extremes | json_values)
        if value == "deep-dict" or value == "deep-list":
            value = _deep(value.removeprefix("deep-"))
        elif value == RAW:
            raw = draw(st.sampled_from(RAW_NUMBERS))
        parent[last] = value  # type: ignore[index]
    try:
        text = json.dumps(data)
    except RecursionError:  # a deep value that json cannot write: use a shallower one
        text = json.dumps(original)
    return text.replace(json.dumps(RAW), raw), SOURCES[index][1]


@settings(
    derandomize=True,
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_mutated_histories_are_refused_or_replayed(case: tuple[str, list[Any]]) -> None:
    text, workflows = case
    try:
        history = WorkflowHistory.from_json("fuzz", text)
    except InvalidArgumentError:
        return  # refused with a message (HistoryFormatError is one)

    async def replay() -> Any:
        return await Replayer(workflows=workflows).replay_workflow(
            history, raise_on_replay_failure=False
        )

    try:
        result = asyncio.run(replay())
    except InvalidArgumentError:
        return  # e.g. a gap in the event ids, or a history of another workflow type
    # A payload the converter cannot decode, or input that does not fit the code, is a
    # workflow task failure in the result (as in temporalio), not a crash of the replay.
    failure = result.replay_failure
    if isinstance(failure, (TypeError, ValueError)) and _from_input(failure):
        return  # the recorded input or a result does not fit the code: a task failure
    assert not isinstance(failure, CRASHES) or isinstance(failure, InvalidArgumentError), (
        f"replay crashed with {type(failure).__name__}: {failure}"
    )


def _from_input(err: BaseException) -> bool:
    """Whether a replay failure is the code refusing its recorded input: decoding a
    payload (``from_payload``), or calling the run method with the start's arguments."""
    names = {frame.name for frame in traceback.extract_tb(err.__traceback__)}
    decoding = {"from_payload", "from_payloads", "from_payloads_json", "from_json"}
    return bool(names & (decoding | {"_apply_initialize_workflow"}))
