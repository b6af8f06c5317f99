"""The List Filter against a fixed corpus of runs, compared with the same filter worked out
in Python (hypothesis generates the filters, each with its meaning as a Python tree).

The corpus: runs of several types, ids and task queues, completed, failed, cancelled,
terminated and still running, a parent with a child. The answer expected for a filter is
computed from the runs' visibility rows as stored, with Temporal's rules written out here
independently of the engine's parser: SQL's three-valued logic for a missing value
(``CloseTime != x`` does not match an open run, and neither does ``NOT CloseTime = x``),
code-point order for keywords, whole-word prefix matching for ``STARTS_WITH``. Listing
order is checked too: open runs first, then closed ones newest first, and ``ORDER BY``.
"""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ApplicationError, Client, Worker, workflow
from engine.operator import AddSearchAttributesRequest

BASE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@workflow.defn(name="Order")
class Order:
    @workflow.run
    async def run(self, outcome: str) -> str:
        if outcome == "fail":
            raise ApplicationError("no stock", non_retryable=True)
        if outcome == "wait":
            await workflow.wait_condition(lambda: False)
        if outcome == "child":
            return await workflow.execute_child_workflow(
                "Refund", "done", id=f"{workflow.info().workflow_id}-child"
            )
        return outcome


@workflow.defn(name="Refund")
class Refund(Order):
    pass


@workflow.defn(name="Refund Special")
class RefundSpecial(Order):
    pass


#: Custom search attributes of the corpus, registered first.
CUSTOM_TYPES = {
    "CustomerId": "Keyword",
    "Notes": "Text",
    "Tags": "KeywordList",
    "Amount": "Int",
    "Paid": "Bool",
}
#: The custom attributes each run starts with (workflow id -> the dict form's lists).
CUSTOM_VALUES: dict[str, dict[str, list[Any]]] = {
    "order-1": {
        "CustomerId": ["c1"],
        "Notes": ["Hello big World"],
        "Tags": ["x", "y"],
        "Amount": [5],
        "Paid": [True],
    },
    "order-2": {"CustomerId": ["c2"], "Notes": ["hello there"], "Tags": ["y"], "Amount": [10]},
    "order-10": {"CustomerId": ["c1"], "Paid": [False]},
    "refund-1": {"Notes": ["Refund_requested: WORLD-wide"], "Tags": ["z"], "Amount": [-3]},
    "x_y%z": {"CustomerId": ["c10"], "Tags": ["x"], "Amount": [5], "Paid": [True]},
}

#: (workflow id, type, task queue, outcome): "wait" runs stay open, "terminate" and
#: "cancel" runs are ended from the client.
CORPUS = [
    ("order-1", "Order", "tq-a", "done"),
    ("order-2", "Order", "tq-a", "fail"),
    ("order-10", "Order", "tq-b", "wait"),
    ("Order-3", "Order", "tq-b", "terminate"),
    ("refund-1", "Refund", "tq-a", "done"),
    ("refund é", "Refund", "tq-a", "cancel"),
    ("x_y%z", "Refund Special", "tq-b", "wait"),
    ("parent", "Order", "tq-a", "child"),
    ("it's", "Refund", "tq-b", "done"),
]

#: attribute -> (visibility column, kind)
ATTRIBUTES = {
    "WorkflowId": ("workflow_id", "keyword"),
    "RunId": ("run_id", "keyword"),
    "WorkflowType": ("workflow_type", "keyword"),
    "TaskQueue": ("task_queue", "keyword"),
    "ExecutionStatus": ("status", "status"),
    "StartTime": ("start_time", "datetime"),
    "CloseTime": ("close_time", "datetime"),
    "ExecutionTime": ("execution_time", "datetime"),
    "HistoryLength": ("history_length", "int"),
    "ParentWorkflowId": ("parent_workflow_id", "keyword"),
    "RootWorkflowId": ("root_workflow_id", "keyword"),
    "CustomerId": ("CustomerId", "keyword"),
    "Notes": ("Notes", "text"),
    "Tags": ("Tags", "list"),
    "Amount": ("Amount", "int"),
    "Paid": ("Paid", "bool"),
}
STATUS = {
    "Running": 1,
    "Completed": 2,
    "Failed": 3,
    "Canceled": 4,
    "Terminated": 5,
    "ContinuedAsNew": 6,
    "TimedOut": 7,
}


@pytest.fixture
def corpus(db_url: str) -> Iterator[tuple[asyncio.Runner, Client, list[dict[str, Any]]]]:
    with asyncio.Runner() as runner:
        client = runner.run(Client.connect(db_url))
        try:
            rows = runner.run(_make_corpus(client))
            yield runner, client, rows
        finally:
            runner.run(client.close())


async def _make_corpus(client: Client) -> list[dict[str, Any]]:
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(search_attributes=CUSTOM_TYPES)
    )
    workers = [
        Worker(client, task_queue=q, workflows=[Order, Refund, RefundSpecial])
        for q in ("tq-a", "tq-b")
    ]
    for w in workers:
        await w.__aenter__()
    try:
        for wid, wtype, queue, outcome in CORPUS:
            handle = await client.start_workflow(
                wtype,
                "wait" if outcome in ("terminate", "cancel") else outcome,
                id=wid,
                task_queue=queue,
                search_attributes=CUSTOM_VALUES.get(wid),
            )
            if outcome == "terminate":
                await handle.terminate()
            elif outcome == "cancel":
                await _until_started(handle)
                await handle.cancel()
            if outcome not in ("wait",):
                try:
                    await asyncio.wait_for(handle.result(), 30)
                except Exception:
                    pass
            await asyncio.sleep(0.002)  # distinct start times
    finally:
        for w in workers:
            await w.__aexit__(None, None, None)
    engine = sa.create_engine(client.store.url.render_as_string(hide_password=False))
    try:
        with engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM dn_visibility"))]
    finally:
        engine.dispose()
    # The custom attributes as the test set them (not as the engine stored them).
    for row in rows:
        held = CUSTOM_VALUES.get(row["workflow_id"], {})
        for name, kind in CUSTOM_TYPES.items():
            values = held.get(name)
            row[name] = None if values is None else values if kind == "KeywordList" else values[0]
    return rows


async def _until_started(handle: Any) -> None:
    for _ in range(1000):
        if any(
            e.event_type == "WorkflowTaskCompleted" for e in (await handle.fetch_history()).events
        ):
            return
        await asyncio.sleep(0.01)


# -- filters with their meaning ---------------------------------------------------------

Pred = Callable[[dict[str, Any]], bool | None]


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _literal(kind: str, value: Any) -> tuple[str, Any]:
    """The value's text in a filter, and what it means."""
    if kind == "status":
        name = next(k for k, v in STATUS.items() if v == value)
        return _quote(name), value
    if kind == "datetime":
        text = _rfc3339(value)
        return _quote(text), datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    if kind == "int":
        return str(value), value
    if kind == "bool":
        return ("true" if value else "false"), value
    return _quote(value), value


def _compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None:
        return None
    return {
        "=": a == b,
        "!=": a != b,
        ">": a > b,
        ">=": a >= b,
        "<": a < b,
        "<=": a <= b,
    }[op]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


@st.composite
def values_of(draw: st.DrawFn, rows: list[dict[str, Any]], attribute: str) -> Any:
    column, kind = ATTRIBUTES[attribute]
    seen = [r[column] for r in rows if r[column] is not None]
    if kind == "status":
        return draw(st.sampled_from(sorted(STATUS.values())))
    if kind == "datetime":
        base = draw(st.sampled_from(seen or [1.8e9]))
        return base + draw(st.sampled_from([0.0, -0.001, 0.001, -3600.0]))
    if kind == "int":
        return draw(st.sampled_from(seen or [0])) + draw(st.integers(-1, 1))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "text":
        known = sorted({w for text in seen for w in _words(text)} | {"nope", "hel"})
        picked = draw(st.lists(st.sampled_from(known), min_size=1, max_size=2))
        return " ".join(w.upper() if draw(st.booleans()) else w for w in picked)
    if kind == "list":
        return draw(st.sampled_from(sorted({v for items in seen for v in items} | {"nope"})))
    options = [*seen, "order", "Order-", "nope", "r", "x_y"]
    return draw(st.sampled_from(sorted(set(options))))


@st.composite
def atoms(draw: st.DrawFn, rows: list[dict[str, Any]]) -> tuple[str, Pred]:
    attribute = draw(st.sampled_from(sorted(ATTRIBUTES)))
    column, kind = ATTRIBUTES[attribute]
    form = draw(st.sampled_from(["cmp", "cmp", "in", "between", "prefix", "null"]))
    if form == "null":
        negated = draw(st.booleans())

        def absent(r: dict[str, Any]) -> bool:
            return r[column] is None or (kind == "list" and not r[column])

        return (
            f"{attribute} IS {'NOT ' if negated else ''}NULL",
            lambda r: absent(r) != negated,
        )
    if form == "prefix" and kind == "keyword":
        value = draw(values_of(rows, attribute))
        prefix = value[: draw(st.integers(0, max(0, len(value))))] if value else ""
        text, meaning = _literal(kind, prefix)
        return (
            f"{attribute} STARTS_WITH {text}",
            lambda r: None if r[column] is None else r[column].startswith(meaning),
        )
    if form == "in" and kind != "text":
        picked = draw(st.lists(values_of(rows, attribute), min_size=1, max_size=3))
        texts, meanings = zip(*(_literal(kind, v) for v in picked), strict=True)
        negated = draw(st.booleans())

        def member(r: dict[str, Any]) -> bool | None:
            if kind == "list":  # yes or no, as a list's match is
                return any(m in (r[column] or []) for m in meanings) != negated
            if r[column] is None:
                return None
            return (r[column] in meanings) != negated

        return f"{attribute} {'NOT ' if negated else ''}IN ({', '.join(texts)})", member
    if form == "between" and kind in ("keyword", "int", "datetime"):
        low, high = sorted(draw(st.lists(values_of(rows, attribute), min_size=2, max_size=2)))
        (lt, lm), (ht, hm) = _literal(kind, low), _literal(kind, high)
        negated = draw(st.booleans())

        def between(r: dict[str, Any]) -> bool | None:
            if r[column] is None:
                return None
            return (lm <= r[column] <= hm) != negated

        return f"{attribute} {'NOT ' if negated else ''}BETWEEN {lt} AND {ht}", between
    if kind in ("status", "text", "list", "bool"):
        ops = ["=", "!="]
    else:
        ops = ["=", "!=", ">", ">=", "<", "<="]
    op = draw(st.sampled_from(ops))
    text, meaning = _literal(kind, draw(values_of(rows, attribute)))
    if kind == "text":  # any of the value's words, case-insensitive; yes or no

        def matches(r: dict[str, Any]) -> bool:
            found = r[column] is not None and bool(_words(meaning) & _words(r[column]))
            return found if op == "=" else not found

        return f"{attribute} {op} {text}", matches
    if kind == "list":

        def holds(r: dict[str, Any]) -> bool:
            found = meaning in (r[column] or [])
            return found if op == "=" else not found

        return f"{attribute} {op} {text}", holds
    return f"{attribute} {op} {text}", lambda r: _compare(op, r[column], meaning)


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def filters(rows: list[dict[str, Any]]) -> st.SearchStrategy[tuple[str, Pred]]:
    def extend(children: st.SearchStrategy[tuple[str, Pred]]) -> st.SearchStrategy[Any]:
        def both(pair: tuple[tuple[str, Pred], tuple[str, Pred]], word: str) -> tuple[str, Pred]:
            (ta, pa), (tb, pb) = pair
            join = _and if word == "AND" else _or
            return f"({ta}) {word} ({tb})", lambda r: join(pa(r), pb(r))

        def negate(child: tuple[str, Pred]) -> tuple[str, Pred]:
            text, pred = child

            def flipped(r: dict[str, Any]) -> bool | None:
                value = pred(r)
                return None if value is None else not value

            return f"NOT ({text})", flipped

        return st.one_of(
            st.tuples(children, children).map(lambda p: both(p, "AND")),
            st.tuples(children, children).map(lambda p: both(p, "OR")),
            children.map(negate),
        )

    return st.recursive(atoms(rows), extend, max_leaves=4)


def _listing_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["close_order"], row["start_time"], row["run_id"])


def test_the_corpus_is_what_the_rules_are_checked_on(corpus: Any) -> None:
    _, _, rows = corpus
    statuses = collections.Counter(r["status"] for r in rows)
    assert statuses == {1: 2, 2: 5, 3: 1, 4: 1, 5: 1}, statuses  # the child completed too
    child = next(r for r in rows if r["workflow_id"] == "parent-child")
    assert child["parent_workflow_id"] == "parent" and child["root_workflow_id"] == "parent"
    open_rows = [r for r in rows if r["status"] == 1]
    assert all(r["close_time"] is None and r["history_length"] is None for r in open_rows)
    closed = [r for r in rows if r["status"] != 1]
    assert all(r["history_length"] >= 3 and r["execution_duration"] >= 0 for r in closed)


def test_every_filter_selects_what_its_meaning_selects(corpus: Any) -> None:
    runner, client, rows = corpus

    async def listed(query: str, page_size: int) -> list[str]:
        return [e.run_id async for e in client.list_workflows(query, page_size=page_size)]

    seen = collections.Counter[str]()

    @settings(BASE, max_examples=150)
    @given(filters(rows), st.sampled_from([2, 1000]))
    def prop(case: tuple[str, Pred], page_size: int) -> None:
        query, meaning = case
        expected = sorted((r for r in rows if meaning(r) is True), key=_listing_key, reverse=True)
        got = runner.run(listed(query, page_size))
        assert got == [r["run_id"] for r in expected], query
        count = runner.run(client.count_workflows(query))
        assert count.count == len(expected), query
        seen["some" if expected else "none"] += 1

    prop()
    assert seen["some"] > 20 and seen["none"] > 10, seen


@pytest.mark.parametrize(
    ("order", "key"),
    [
        ("StartTime", lambda r: (r["start_time"], r["run_id"])),
        ("WorkflowId DESC", lambda r: (r["workflow_id"], r["run_id"])),
        ("WorkflowType, StartTime DESC", None),
    ],
)
def test_order_by(corpus: Any, order: str, key: Any) -> None:
    runner, client, rows = corpus

    async def listed() -> list[str]:
        q = f"TaskQueue = 'tq-a' OR TaskQueue = 'tq-b' ORDER BY {order}"
        return [e.run_id async for e in client.list_workflows(q, page_size=2)]

    got = runner.run(listed())
    if key is None:
        by_type = sorted(rows, key=lambda r: (r["workflow_type"], -r["start_time"]))
        assert got == [r["run_id"] for r in by_type]
        return
    expected = sorted(rows, key=key, reverse=order.endswith("DESC"))
    assert got == [r["run_id"] for r in expected]


def test_counting_by_status(corpus: Any) -> None:
    runner, client, rows = corpus
    counted = runner.run(client.count_workflows("TaskQueue = 'tq-a' GROUP BY ExecutionStatus"))
    expected = collections.Counter(r["status"] for r in rows if r["task_queue"] == "tq-a")
    names = {v: k for k, v in STATUS.items()}
    assert {g.group_values[0]: g.count for g in counted.groups} == {
        names[s]: n for s, n in expected.items()
    }
    assert counted.count == sum(expected.values())
    assert [g.count for g in counted.groups] == sorted(
        (g.count for g in counted.groups), reverse=True
    )


def test_a_page_token_belongs_to_its_order(corpus: Any) -> None:
    runner, client, _ = corpus

    async def go() -> None:
        first = client.list_workflows("ORDER BY StartTime", page_size=2)
        await first.fetch_next_page()
        token = first.next_page_token
        assert token is not None
        again = client.list_workflows("ORDER BY StartTime", page_size=2, next_page_token=token)
        await again.fetch_next_page()
        assert again.current_page and again.current_page[0].start_time >= (
            first.current_page[-1].start_time
        )
        other = client.list_workflows(None, page_size=2, next_page_token=token)
        with pytest.raises(Exception, match="page token does not belong to this query"):
            await other.fetch_next_page()

    runner.run(go())
