"""Custom search attributes as Temporal has them: registered with a type before use, set
at start and by upserts, found by the values a run holds at the end, shown by describe,
listing and ``workflow.info()``; an unregistered one fails the workflow task until it is
registered. Messages and behaviour were checked on ``temporal server start-dev``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine.common import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)
from engine.exceptions import InvalidArgumentError
from engine.operator import (
    AddSearchAttributesRequest,
    IndexedValueType,
    RemoveSearchAttributesRequest,
)
from engine.testing import WorkflowEnvironment

CUSTOMER = SearchAttributeKey.for_keyword("CustomerId")
NOTES = SearchAttributeKey.for_text("Notes")
TAGS = SearchAttributeKey.for_keyword_list("Tags")
AMOUNT = SearchAttributeKey.for_int("Amount")
PRICE = SearchAttributeKey.for_float("Price")
PAID = SearchAttributeKey.for_bool("Paid")
DUE = SearchAttributeKey.for_datetime("Due")
LATER = SearchAttributeKey.for_keyword("RegisteredLater")

TYPES = {
    "CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Notes": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Tags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    "Amount": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Price": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Paid": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Due": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}


@workflow.defn
class Upserter:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, plan: str) -> dict[str, Any]:
        seen = {"at start": _typed(workflow.info().typed_search_attributes)}
        if plan == "upsert":
            workflow.upsert_search_attributes([CUSTOMER.value_set("c-early"), AMOUNT.value_set(1)])
            await workflow.wait_condition(lambda: self.go)
            workflow.upsert_search_attributes(
                [CUSTOMER.value_set("c-final"), AMOUNT.value_unset(), TAGS.value_set(["b", "c"])]
            )
        elif plan == "unregistered":
            workflow.upsert_search_attributes([LATER.value_set("now")])
        seen["at end"] = _typed(workflow.info().typed_search_attributes)
        seen["untyped"] = dict(workflow.info().search_attributes)
        return seen


def _typed(attributes: TypedSearchAttributes) -> dict[str, Any]:
    return {pair.key.name: pair.value for pair in attributes}


async def _register(client: Client, types: dict[str, Any] = TYPES) -> None:
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace="default", search_attributes=types)
    )


async def _ids(client: Client, query: str) -> list[str]:
    return sorted([e.id async for e in client.list_workflows(query)])


async def test_registering_listing_and_removing(client: Client) -> None:
    await _register(client)
    listed = await client.operator_service.list_search_attributes()
    assert listed.custom_attributes == TYPES
    assert listed.system_attributes["WorkflowId"] == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    assert listed.system_attributes["TemporalChangeVersion"] == (
        IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST
    )
    # As on Temporal: a name registered already is left as it is, whatever type is asked.
    await _register(client, {"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_INT})
    assert (await client.operator_service.list_search_attributes()).custom_attributes == TYPES
    with pytest.raises(InvalidArgumentError, match="Search attribute WorkflowId is reserved"):
        await _register(client, {"WorkflowId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD})
    with pytest.raises(
        InvalidArgumentError, match="cannot have more than 10 search attribute of type Keyword"
    ):
        await _register(client, {f"K{i}": "Keyword" for i in range(10)})
    await client.operator_service.remove_search_attributes(
        RemoveSearchAttributesRequest(search_attributes=["Notes"])
    )
    assert "Notes" not in (await client.operator_service.list_search_attributes()).custom_attributes
    with pytest.raises(InvalidArgumentError, match="Search attribute Notes doesn't exist"):
        await client.operator_service.remove_search_attributes(
            RemoveSearchAttributesRequest(search_attributes=["Notes"])
        )


async def test_start_attributes_are_found_described_and_seen_by_the_workflow(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    due = datetime(2026, 12, 24, 18, 0, tzinfo=UTC)
    typed = TypedSearchAttributes(
        [
            SearchAttributePair(CUSTOMER, "c1"),
            SearchAttributePair(NOTES, "Gift-wrapped, deliver before Christmas"),
            SearchAttributePair(TAGS, ["gift", "urgent"]),
            SearchAttributePair(AMOUNT, 3),
            SearchAttributePair(PRICE, 19.5),
            SearchAttributePair(PAID, True),
            SearchAttributePair(DUE, due),
        ]
    )
    async with Worker(client, task_queue=task_queue, workflows=[Upserter]):
        first = await client.start_workflow(
            Upserter.run, "none", id="typed", task_queue=task_queue, search_attributes=typed
        )
        seen = await first.result()
        # The older dict form: a list of values per name.
        second = await client.start_workflow(
            Upserter.run,
            "none",
            id="untyped",
            task_queue=task_queue,
            search_attributes={"CustomerId": ["c2"], "Amount": [5]},
        )
        await second.result()
    assert seen["at start"] == {
        "Amount": 3,
        "CustomerId": "c1",
        "Due": due.isoformat(),  # the result went through the JSON converter
        "Notes": "Gift-wrapped, deliver before Christmas",
        "Paid": True,
        "Price": 19.5,
        "Tags": ["gift", "urgent"],
    }
    described = await first.describe()
    assert described.typed_search_attributes == typed
    assert described.search_attributes["Tags"] == ["gift", "urgent"]
    assert (await second.describe()).search_attributes == {"CustomerId": ["c2"], "Amount": [5]}
    for query, ids in [
        ("CustomerId = 'c1'", ["typed"]),
        ("CustomerId IN ('c1', 'c2')", ["typed", "untyped"]),
        ("Amount > 3", ["untyped"]),
        ("Price BETWEEN 19 AND 20", ["typed"]),
        ("Paid = true", ["typed"]),
        ("Due > '2026-12-24T17:00:00Z'", ["typed"]),
        ("Due > '2026-12-24T19:00:00+01:00'", []),
        ("Notes = 'christmas'", ["typed"]),
        ("Notes = 'gift birthday'", ["typed"]),  # any of the words, as a full-text match
        ("Notes = 'chris'", []),
        ("Tags = 'urgent'", ["typed"]),
        ("Tags IN ('nope', 'gift')", ["typed"]),
        ("Tags != 'urgent'", ["untyped"]),
        ("Paid IS NULL", ["untyped"]),
        ("`CustomerId` STARTS_WITH 'c'", ["typed", "untyped"]),
    ]:
        assert await _ids(client, query) == ids, query
    listed = {e.id: e async for e in client.list_workflows()}
    assert listed["typed"].typed_search_attributes == typed
    grouped = await client.count_workflows("CustomerId STARTS_WITH 'c' GROUP BY ExecutionStatus")
    assert [(g.group_values, g.count) for g in grouped.groups] == [(["Completed"], 2)]


async def test_a_run_is_found_by_the_values_it_holds_at_the_end(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    async with Worker(client, task_queue=task_queue, workflows=[Upserter]):
        handle = await client.start_workflow(
            Upserter.run,
            "upsert",
            id="upserts",
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, "c-start")]),
        )
        for _ in range(500):
            if await _ids(client, "CustomerId = 'c-early'"):
                break
            await asyncio.sleep(0.01)
        assert await _ids(client, "CustomerId = 'c-early' AND Amount = 1") == ["upserts"]
        assert await _ids(client, "CustomerId = 'c-start'") == []
        await handle.signal(Upserter.proceed)
        seen = await handle.result()
    assert seen["at end"] == {"CustomerId": "c-final", "Tags": ["b", "c"]}
    assert seen["untyped"] == {"CustomerId": ["c-final"], "Amount": [], "Tags": ["b", "c"]}
    for earlier in ("CustomerId = 'c-start'", "CustomerId = 'c-early'", "Amount = 1"):
        assert await _ids(client, earlier) == [], earlier
    assert await _ids(client, "CustomerId = 'c-final' AND Tags = 'c' AND Amount IS NULL") == [
        "upserts"
    ]
    events = [e.event_type for e in (await handle.fetch_history()).events]
    assert events.count("UpsertWorkflowSearchAttributes") == 2


async def test_an_unregistered_attribute_fails_the_task_until_it_is_registered(
    db_url: str, task_queue: str
) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        client = env.client
        async with Worker(client, task_queue=task_queue, workflows=[Upserter]):
            handle = await client.start_workflow(
                Upserter.run, "unregistered", id="later", task_queue=task_queue
            )
            failed: list[Any] = []
            for _ in range(500):
                events = (await handle.fetch_history()).events
                failed = [e for e in events if e.event_type == "WorkflowTaskFailed"]
                if failed:
                    break
                await asyncio.sleep(0.01)
            assert failed, "the task did not fail"
            attrs = failed[0].attributes
            assert attrs["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES"
            message = attrs["failure"]["message"]
            assert message.startswith(
                "BadSearchAttributes: Namespace default has no mapping defined for search "
                "attribute RegisteredLater"
            )
            assert "durable operator search-attribute create --name RegisteredLater" in message
            described = await handle.describe()
            assert described.status.name == "RUNNING"
            # Registering it, and nothing else, lets a retry of the task through.
            await _register(client, {"RegisteredLater": "Keyword"})
            seen = await asyncio.wait_for(handle.result(), 60)
    assert seen["at end"] == {"RegisteredLater": "now"}


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        (
            TypedSearchAttributes(
                [SearchAttributePair(SearchAttributeKey.for_int("CustomerId"), 5)]
            ),
            "invalid value for search attribute CustomerId of type Keyword: 5",
        ),
        (
            TypedSearchAttributes([SearchAttributePair(LATER, "x")]),
            "Namespace default has no mapping defined for search attribute RegisteredLater",
        ),
        ({"WorkflowId": ["x"]}, "Search attribute WorkflowId is reserved by system"),
        ({"Amount": [1, 2]}, "invalid value for search attribute Amount of type Int: [1, 2]"),
        ({"Tags": ["a\x00b"]}, "contains a NUL character"),
    ],
)
async def test_a_bad_start_attribute_starts_nothing(
    client: Client, task_queue: str, attributes: Any, said: str
) -> None:
    await _register(client)
    with pytest.raises(InvalidArgumentError, match=said.replace("[", r"\[").replace("]", r"\]")):
        await client.start_workflow(
            Upserter.run, "none", id="bad", task_queue=task_queue, search_attributes=attributes
        )
    assert [e async for e in client.list_workflows()] == []


async def test_client_side_type_checks(client: Client, task_queue: str) -> None:
    naive = TypedSearchAttributes([SearchAttributePair(DUE, datetime(2026, 1, 1))])
    with pytest.raises(InvalidArgumentError, match="a datetime needs its time zone"):
        await client.start_workflow(
            Upserter.run, "none", id="x", task_queue=task_queue, search_attributes=naive
        )
    wrong = TypedSearchAttributes([SearchAttributePair(AMOUNT, "five")])
    with pytest.raises(InvalidArgumentError, match="'Amount' is Int: str 'five' does not fit"):
        await client.start_workflow(
            Upserter.run, "none", id="x", task_queue=task_queue, search_attributes=wrong
        )


async def test_removing_an_attribute_clears_it_from_the_filter(
    client: Client, task_queue: str
) -> None:
    await _register(client, {"CustomerId": "Keyword"})
    await client.start_workflow(
        Upserter.run,
        "none",
        id="r",
        task_queue=task_queue,
        search_attributes={"CustomerId": ["c1"]},
    )
    assert await _ids(client, "CustomerId = 'c1'") == ["r"]
    await client.operator_service.remove_search_attributes(
        RemoveSearchAttributesRequest(search_attributes=["CustomerId"])
    )
    with pytest.raises(InvalidArgumentError, match="unknown search attribute 'CustomerId'"):
        await _ids(client, "CustomerId = 'c1'")
    # Its column is empty again: another attribute given it later matches nothing old.
    await _register(client, {"Region": "Keyword"})
    assert await _ids(client, "Region IS NOT NULL") == []


def test_the_key_types_are_temporalios() -> None:
    import temporalio.common as t

    for factory in ("for_text", "for_keyword", "for_int", "for_float", "for_bool", "for_datetime"):
        ours = getattr(SearchAttributeKey, factory)("X")
        theirs = getattr(t.SearchAttributeKey, factory)("X")
        assert ours.indexed_value_type.value == theirs.indexed_value_type.value
        assert ours.value_type is theirs.value_type and ours._metadata_type == theirs._metadata_type
    assert [m.name for m in SearchAttributeIndexedValueType] == [
        m.name for m in t.SearchAttributeIndexedValueType
    ]


@workflow.defn
class Family:
    @workflow.run
    async def run(self, step: int) -> str:
        if step == 0:  # the parent: a child with attributes of its own
            return await workflow.execute_child_workflow(
                Family.run,
                1,
                id=f"{workflow.info().workflow_id}-child",
                search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, "kid")]),
            )
        if step == 1:  # the child: continues as new, carrying what it holds
            workflow.upsert_search_attributes([AMOUNT.value_set(42)])
            workflow.continue_as_new(2)
        if step == 2:  # ... then with attributes given: they replace the held ones
            workflow.continue_as_new(
                3, search_attributes=TypedSearchAttributes([SearchAttributePair(TAGS, ["last"])])
            )
        return repr(_typed(workflow.info().typed_search_attributes))


async def test_children_and_continue_as_new_carry_search_attributes(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    async with Worker(client, task_queue=task_queue, workflows=[Family]):
        said = await client.execute_workflow(Family.run, 0, id="fam", task_queue=task_queue)
    assert said == repr({"Tags": ["last"]})
    runs = [e async for e in client.list_workflows("WorkflowId = 'fam-child'")]
    held = sorted((e.status.name, repr(sorted(e.search_attributes.items()))) for e in runs)
    assert held == [
        ("COMPLETED", repr([("Tags", ["last"])])),  # given to continue-as-new
        # The child started with CustomerId and upserted Amount; its next run carried both.
        ("CONTINUED_AS_NEW", repr([("Amount", [42]), ("CustomerId", ["kid"])])),
        ("CONTINUED_AS_NEW", repr([("Amount", [42]), ("CustomerId", ["kid"])])),
    ], held
    assert await _ids(client, "Amount = 42") == ["fam-child", "fam-child"]  # two runs


async def test_a_local_environment_registers_the_keys_it_is_given() -> None:
    env = await WorkflowEnvironment.start_local(search_attributes=[CUSTOMER, TAGS])
    try:
        listed = await env.client.operator_service.list_search_attributes()
        assert listed.custom_attributes == {
            "CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            "Tags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
        }
    finally:
        await env.shutdown()


async def test_patches_are_found_by_temporal_change_version(env: WorkflowEnvironment) -> None:
    from tests.interop import engine_code as code

    queue = "patches"
    async with Worker(
        env.client, task_queue=queue, workflows=[code.PatchesWF], activities=[code.say_hello]
    ):
        await env.client.execute_workflow(code.PatchesWF.run, "Temporal", id="p", task_queue=queue)
    client = env.client
    assert await _ids(client, "TemporalChangeVersion = 'second-change'") == ["p"]
    assert await _ids(client, "TemporalChangeVersion IN ('first-change', 'nope')") == ["p"]
    assert await _ids(client, "TemporalChangeVersion = 'never-used'") == []
    described = await client.get_workflow_handle("p").describe()
    versions = described.search_attributes["TemporalChangeVersion"]
    assert {"first-change", "second-change"} <= set(versions), versions


@workflow.defn
class Carrier:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, step: int) -> dict[str, Any]:
        if step == 1:
            await workflow.wait_condition(lambda: self.go)
            workflow.upsert_search_attributes({"Amount": []})  # the dict form's unset
            workflow.continue_as_new(2)
        return dict(workflow.info().search_attributes)


async def test_a_removed_attribute_is_not_carried_and_an_empty_list_unsets(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    await _register(client, {"Region": "Keyword"})
    start = {"CustomerId": ["c1"], "Amount": [5], "Region": ["eu"]}
    async with Worker(client, task_queue=task_queue, workflows=[Carrier]):
        handle = await client.start_workflow(
            Carrier.run, 1, id="carry", task_queue=task_queue, search_attributes=start
        )
        # Removed while the run holds it: describe no longer shows it, and the run's
        # continue-as-new does not carry it (it would not be accepted at a start).
        await client.operator_service.remove_search_attributes(
            RemoveSearchAttributesRequest(search_attributes=["Region"])
        )
        assert "Region" not in (await handle.describe()).search_attributes
        await handle.signal(Carrier.proceed)
        said = await asyncio.wait_for(handle.result(), 30)
    assert said == {"CustomerId": ["c1"]}  # Amount unset by [], Region not carried
    assert await _ids(client, "Amount IS NOT NULL") == []
    with pytest.raises(
        InvalidArgumentError, match="no mapping defined for search attribute Region"
    ):
        await client.start_workflow(
            Carrier.run, 2, id="again", task_queue=task_queue, search_attributes=start
        )


async def test_values_past_temporals_size_limit_are_refused(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    import random

    rng = random.Random(3)
    big = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(1000))  # ~3 KB, no repeats
    with pytest.raises(InvalidArgumentError, match=r"value size \d+ exceeds size limit 2048"):
        await client.start_workflow(
            Upserter.run,
            "none",
            id="big",
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(CUSTOMER, big)]),
        )
    assert [e async for e in client.list_workflows()] == []


async def test_a_page_token_of_another_order_is_refused(client: Client, task_queue: str) -> None:
    for i in range(3):
        await client.start_workflow(Upserter.run, "none", id=f"p{i}", task_queue=task_queue)
    first = client.list_workflows(None, page_size=1)
    await first.fetch_next_page()
    token = first.next_page_token
    other = client.list_workflows(
        "ORDER BY StartTime, WorkflowId", page_size=1, next_page_token=token
    )
    with pytest.raises(InvalidArgumentError, match="does not belong to this query's order"):
        await other.fetch_next_page()


async def test_the_size_limit_counts_the_values_bytes_exactly(
    client: Client, task_queue: str
) -> None:
    await _register(client)
    # A keyword's JSON is the text and its two quotes: 2,046 letters are 2,048 bytes.
    at_limit = TypedSearchAttributes([SearchAttributePair(CUSTOMER, "k" * 2046)])
    await client.start_workflow(
        Upserter.run, "none", id="at", task_queue=task_queue, search_attributes=at_limit
    )
    over = TypedSearchAttributes([SearchAttributePair(CUSTOMER, "k" * 2047)])
    with pytest.raises(InvalidArgumentError, match="value size 2049 exceeds size limit 2048"):
        await client.start_workflow(
            Upserter.run, "none", id="over", task_queue=task_queue, search_attributes=over
        )
    assert await _ids(client, "CustomerId STARTS_WITH 'kkk'") == ["at"]


async def test_a_dataframe_has_a_typed_column_per_search_attribute(
    client: Client, task_queue: str
) -> None:
    from engine.dataframes import EXECUTION_COLUMNS, list_workflows_dataframe

    await _register(client, {**TYPES, "status": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD})
    due = datetime(2026, 12, 24, 18, 0, tzinfo=UTC)
    full = TypedSearchAttributes(
        [
            SearchAttributePair(CUSTOMER, "c1"),
            SearchAttributePair(NOTES, "wrapped"),
            SearchAttributePair(TAGS, ["gift", "urgent"]),
            SearchAttributePair(AMOUNT, 3),
            SearchAttributePair(PRICE, 19.5),
            SearchAttributePair(PAID, True),
            SearchAttributePair(DUE, due),
            SearchAttributePair(SearchAttributeKey.for_keyword("status"), "vip"),
        ]
    )
    async with Worker(client, task_queue=task_queue, workflows=[Upserter]):
        for wid, attrs in [("full", full), ("bare", TypedSearchAttributes([]))]:
            handle = await client.start_workflow(
                Upserter.run, "none", id=wid, task_queue=task_queue, search_attributes=attrs
            )
            await handle.result()
    df = await list_workflows_dataframe(client, "WorkflowId IN ('full', 'bare')")
    attribute_columns = ["Amount", "CustomerId", "Due", "Notes", "Paid", "Price", "Tags"]
    assert list(df.columns) == [*EXECUTION_COLUMNS, *attribute_columns, "sa_status"]
    assert {c: str(df[c].dtype) for c in [*attribute_columns, "sa_status"]} == {
        "Amount": "Int64",
        "CustomerId": "string",
        "Due": "datetime64[ns, UTC]",
        "Notes": "string",
        "Paid": "boolean",
        "Price": "float64",
        "Tags": "object",
        "sa_status": "string",
    }
    row = df.set_index("id").loc["full"]
    assert (row.CustomerId, row.Amount, row.Price, row.Paid, row.Tags, row.sa_status) == (
        "c1", 3, 19.5, True, ["gift", "urgent"], "vip",
    )  # fmt: skip
    assert row.Due == due
    bare = df.set_index("id").loc["bare"]
    assert bare[attribute_columns].isna().all()
    # An attribute no listed run holds still has its column: the frame's shape is the
    # namespace's, not the page's.
    empty = await list_workflows_dataframe(client, "WorkflowId = 'nothing'")
    assert list(empty.columns) == list(df.columns) and len(empty) == 0
