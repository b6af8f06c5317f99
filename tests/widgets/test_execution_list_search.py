"""ExecutionList with Temporal's List Filter: search attributes as chips, the names the
filter box suggests, exact counts by status, and the engine's messages for bad filters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from engine import Client
from engine.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from engine.operator import AddSearchAttributesRequest
from widgets import ExecutionList, _live
from widgets.search_attributes import attribute_text, type_name

from ..interop.engine_code import SignalWF

CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
AMOUNT = SearchAttributeKey.for_int("Amount")
WHEN = SearchAttributeKey.for_datetime("PlacedAt")
TAGS = SearchAttributeKey.for_keyword_list("Tags")
PLACED = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


async def _register(client: Client, **types: str) -> None:
    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(types))


async def _start(client: Client, wid: str, queue: str, *pairs: SearchAttributePair[Any]) -> None:
    await client.start_workflow(
        SignalWF.run,
        1,
        id=wid,
        task_queue=queue,
        search_attributes=TypedSearchAttributes(list(pairs)) if pairs else None,
    )


def _closed(view: ExecutionList) -> None:
    view.close()
    assert not view.refreshing and _live.subscriptions() == 0


def test_type_names_and_value_text() -> None:
    from engine.common import SearchAttributeIndexedValueType as T
    from engine.operator import IndexedValueType as I

    assert [type_name(t) for t in T] == [
        "Text",
        "Keyword",
        "Int",
        "Double",
        "Bool",
        "Datetime",
        "KeywordList",
    ]
    assert type_name(I.INDEXED_VALUE_TYPE_KEYWORD_LIST) == "KeywordList"
    assert (attribute_text(["a", "b"]), attribute_text(True), attribute_text(2.5)) == (
        "a, b",
        "true",
        "2.5",
    )


async def test_rows_carry_search_attributes_and_the_box_suggests_names(
    client: Client, task_queue: str
) -> None:
    await _register(client, CustomerId="Keyword", Amount="Int", PlacedAt="Datetime")
    await _register(client, Tags="KeywordList")
    tag = uuid.uuid4().hex[:6]
    await _start(
        client,
        f"order-{tag}",
        task_queue,
        SearchAttributePair(CUSTOMER, "abc"),
        SearchAttributePair(AMOUNT, 5),
        SearchAttributePair(WHEN, PLACED),
        SearchAttributePair(TAGS, ["gift", "rush"]),
    )
    # The older dict form (no type in the payload) shows too.
    await client.start_workflow(
        SignalWF.run,
        1,
        id=f"legacy-{tag}",
        task_queue=task_queue,
        search_attributes={"CustomerId": ["def"]},
    )
    await _start(client, f"plain-{tag}", task_queue)

    view = ExecutionList(client, f"TaskQueue = '{task_queue}'")
    try:
        by_id = {r["id"]: r["search_attributes"] for r in view.rows}
        assert by_id == {
            f"order-{tag}": {
                "Amount": "5",
                "CustomerId": "abc",
                "PlacedAt": "2026-03-04T05:06:07+00:00",
                "Tags": "gift, rush",
            },
            f"legacy-{tag}": {"CustomerId": "def"},
            f"plain-{tag}": {},
        }
        # Suggestions: the namespace's custom attributes first, then the system ones.
        names = view.attributes
        assert names[:4] == [
            {"name": "Amount", "type": "Int", "custom": True},
            {"name": "CustomerId", "type": "Keyword", "custom": True},
            {"name": "PlacedAt", "type": "Datetime", "custom": True},
            {"name": "Tags", "type": "KeywordList", "custom": True},
        ]
        system = {a["name"]: a["type"] for a in names[4:]}
        assert system["WorkflowId"] == "Keyword" and system["StartTime"] == "Datetime"
        assert system["ExecutionDuration"] == "Int" and not any(a["custom"] for a in names[4:])
        assert view.table.attributes == names  # synced to the front end

        # The full language, custom attributes included.
        q = f"TaskQueue = '{task_queue}' AND (CustomerId IN ('abc', 'def') OR Amount > 100)"
        assert view.set_query(q) and view.error == ""
        assert sorted(r["id"] for r in view.rows) == sorted([f"order-{tag}", f"legacy-{tag}"])
        assert view.set_query("PlacedAt < '2026-03-05T00:00:00Z' AND Tags = 'rush'")
        assert [r["id"] for r in view.rows] == [f"order-{tag}"]
        assert view.counts == {"running": 1}

        # An attribute registered later is suggested once a filter is applied again.
        await _register(client, Region="Keyword")
        assert "Region" not in {a["name"] for a in view.attributes}
        assert view.set_query("Region IS NULL")
        assert {"name": "Region", "type": "Keyword", "custom": True} in view.attributes

        # The saved notebook's HTML has the attributes, escaped like every cell.
        assert view.set_query(f"WorkflowId = 'order-{tag}'")
        html = view._repr_mimebundle_()[0]["text/html"]
        assert "Amount=5; CustomerId=abc; PlacedAt=2026-03-04T05:06:07+00:00" in html
    finally:
        _closed(view)


async def test_bad_filters_show_the_engines_message_with_the_column(
    client: Client, task_queue: str
) -> None:
    await _register(client, CustomerId="Keyword")
    await _start(client, "c1", task_queue, SearchAttributePair(CUSTOMER, "abc"))
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'")
    try:
        rows = view.rows
        assert len(rows) == 1
        # A syntax error: the message names the column; no exception, the rows stay.
        assert not view.set_query("CustomerId = ")
        assert "column 13 of the list filter: the filter ends too soon" in view.error
        assert view.rows == rows
        # A value of the wrong type for a registered attribute.
        assert not view.set_query("CustomerId > 'a' AND StartTime > 'yesterday'")
        assert "column 34 of the list filter" in view.error and "yesterday" in view.error
        # The front end's filter box: the same, through the synced trait.
        view.table.query = "CustomerId = 'abc' AND"
        assert "column 23 of the list filter" in view.table.error
        view.table.query = "CustomerId = 'abc'"
        assert view.error == "" and [r["id"] for r in view.rows] == ["c1"]
    finally:
        _closed(view)


async def test_order_by_lists_but_cannot_be_counted_or_narrowed_by_a_chip(
    client: Client, task_queue: str
) -> None:
    for i in range(3):
        await _start(client, f"o-{i}", task_queue)
    in_queue = f"TaskQueue = '{task_queue}'"
    # One run a page: the counts take a count of their own.
    view = ExecutionList(client, f"{in_queue} ORDER BY WorkflowId", page_size=1)
    try:
        assert view.error == "" and [r["id"] for r in view.rows] == ["o-0"]
        # Its count cannot be grouped: the engine's message, with the text it read.
        assert view.counts == {} and "not 'GROUP'" in view.counts_error
        counting = f"{in_queue} ORDER BY WorkflowId GROUP BY ExecutionStatus"
        assert view.counts_error.endswith(f"(counting: {counting})")
        assert "<ExecutionList ? runs" in repr(view)
        # A chip cannot narrow it: the message says so with the filter it tried.
        assert not view.set_status("running")
        assert f"(filter: ({in_queue} ORDER BY WorkflowId)" in view.error
        assert view.status is None and [r["id"] for r in view.rows] == ["o-0"]
        # Without ORDER BY both work again, and the count is exact.
        assert view.set_query(in_queue) and view.counts_error == ""
        assert view.counts == {"running": 3} and view.table.count_total == 3
        assert view.set_status("running") and view.status == "running"
        assert "(running 3; showing running)" in repr(view)
    finally:
        _closed(view)


async def test_counts_come_from_one_grouped_count(
    client: Client, task_queue: str, monkeypatch: Any
) -> None:
    for i in range(4):
        await _start(client, f"g-{i}", task_queue)
    asked: list[str | None] = []
    real = client.count_workflows

    async def count_workflows(query: str | None = None, **kwargs: Any) -> Any:
        asked.append(query)
        return await real(query, **kwargs)

    monkeypatch.setattr(client, "count_workflows", count_workflows)
    view = ExecutionList(client, f"TaskQueue = '{task_queue}'", page_size=2)
    try:
        assert view.counts == {"running": 4}
        assert asked == [f"TaskQueue = '{task_queue}' GROUP BY ExecutionStatus"]
        # A chip narrows the rows, not the counts (which are of the whole filter).
        assert view.set_status("completed") and view.rows == []
        assert view.counts == {"running": 4}
        assert asked[-1] == f"TaskQueue = '{task_queue}' GROUP BY ExecutionStatus"
    finally:
        _closed(view)
