"""Temporal's List Filter: read by the lark grammar, checked against attribute types, and
written as SQL whose every value is a bound parameter."""

from __future__ import annotations

import re

import pytest

from engine._model import list_filter as lf
from engine._service.visibility import (
    Attribute,
    compile_filter,
    parse_datetime,
    parse_go_duration,
    text_column_value,
)
from engine.common import SearchAttributeIndexedValueType as T
from engine.exceptions import InvalidArgumentError

CUSTOM = {
    "CustomerId": Attribute("CustomerId", T.KEYWORD, "keyword01", True),
    "Notes": Attribute("Notes", T.TEXT, "text01", True),
    "Tags": Attribute("Tags", T.KEYWORD_LIST, "keyword_list01", True),
    "Amount": Attribute("Amount", T.INT, "int01", True),
    "Paid": Attribute("Paid", T.BOOL, "bool01", True),
}


def test_the_tree_of_a_filter() -> None:
    parsed = lf.parse(
        "CustomerId = 'c1' AND (Amount > 5 OR NOT Tags IN ('x', \"y\")) "
        "ORDER BY StartTime DESC, WorkflowId"
    )
    assert isinstance(parsed.where, lf.And)
    first, second = parsed.where.items
    assert first == lf.Compare(lf.Name("CustomerId", 1), "=", lf.Value("string", "c1", 14))
    assert isinstance(second, lf.Or) and isinstance(second.items[1], lf.Not)
    member = second.items[1].item
    assert isinstance(member, lf.Member) and [v.raw for v in member.values] == ["x", "y"]
    assert [(o.name.text, o.descending) for o in parsed.order_by] == [
        ("StartTime", True),
        ("WorkflowId", False),
    ]
    assert lf.parse("  ") == lf.ListFilter(None) == lf.parse(None)


def test_keywords_are_case_insensitive_and_do_not_eat_names() -> None:
    parsed = lf.parse("ANDROID = 'x' and ORDERLY between 1 And 2")
    assert isinstance(parsed.where, lf.And)
    names = [i.name.text for i in parsed.where.items]
    assert names == ["ANDROID", "ORDERLY"]


def test_quoting() -> None:
    value = lf.parse(r"`Odd name` = 'it''s \'fine\''").where
    assert isinstance(value, lf.Compare)
    assert value.name.text == "Odd name" and value.value.raw == "it's 'fine'"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (
            "WorkflowId = ",
            "column 13 of the list filter: the filter ends too soon: expected a value after '='",
        ),
        ("WorkflowId = 'a' OR", "column 20 of the list filter: the filter ends too soon"),
        (
            "(WorkflowId = 'a'",
            "column 18 of the list filter: the filter ends too soon: expected ')'",
        ),
        (
            "WorkflowId LIKE 'a%'",
            "column 12 of the list filter: expected BETWEEN, IN, IS, NOT, STARTS_WITH or an operator",
        ),
        ("a = 'x", "column 5 of the list filter: the string that starts here has no closing '"),
        ("a IN ()", "column 7 of the list filter: expected a value after '('"),
        ("a = 'x' b = 'y'", "column 9 of the list filter: expected"),
        (
            "Region = 'eu' AND OR",
            "column 19 of the list filter: expected an attribute name, not the keyword OR",
        ),
        # What may follow exactly there, not the lookahead LALR merged from other places.
        ("a IN ('x' 'y')", "column 11 of the list filter: expected ')' or ',' after \"('x'\""),
        (
            "a = 'x' 'y'",
            "column 9 of the list filter: expected AND, GROUP BY, OR, ORDER BY or the end of "
            "the filter after \"'x'\", not \"'y'\"",
        ),
    ],
)
def test_syntax_errors_point_at_the_column(query: str, said: str) -> None:
    with pytest.raises(lf.ListFilterError) as err:
        lf.parse(query)
    assert str(err.value).startswith(said), str(err.value)
    assert isinstance(err.value, InvalidArgumentError)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("Foo = 'x'", "column 1 of the list filter: unknown search attribute 'Foo'"),
        ("workflowid = 'a'", "unknown search attribute 'workflowid': names are case sensitive"),
        ("ExecutionStatus = 'running'", "invalid value for search attribute ExecutionStatus"),
        (
            "Amount = '5'",
            "column 10 of the list filter: invalid value for search attribute Amount of type Int: '5'",
        ),
        ("CustomerId = 5", "invalid value for search attribute CustomerId of type Keyword: 5"),
        ("StartTime > '2020-01-01'", "of type Datetime: '2020-01-01' (an RFC 3339 time"),
        (
            "Notes STARTS_WITH 'he'",
            "operator 'STARTS_WITH' is not supported for Notes, of type Text",
        ),
        ("Tags > 'x'", "operator '>' is not supported for Tags, of type KeywordList"),
        (
            "StartTime = StartTime",
            "column 13 of the list filter: 'StartTime' on the right of a comparison",
        ),
        ("ORDER BY Notes", "cannot order by Notes"),
        ("GROUP BY ExecutionStatus", "GROUP BY is for counting"),
        ("ExecutionDuration > 'soon'", "nanoseconds, or a duration"),
    ],
)
def test_type_errors_name_the_attribute(query: str, said: str) -> None:
    with pytest.raises(lf.ListFilterError) as err:
        compile_filter(query, CUSTOM, postgres=False)
    assert said in str(err.value), str(err.value)


def test_counting_groups_by_status_only() -> None:
    assert compile_filter("GROUP BY ExecutionStatus", {}, postgres=False, counting=True).group_by
    with pytest.raises(lf.ListFilterError, match="GROUP BY takes ExecutionStatus only"):
        compile_filter("GROUP BY WorkflowType", {}, postgres=False, counting=True)
    with pytest.raises(lf.ListFilterError, match="a count takes no ORDER BY"):
        compile_filter("ORDER BY StartTime", {}, postgres=False, counting=True)


INJECTIONS = [
    "x' OR '1'='1",
    "x'); DROP TABLE dn_executions; --",
    "%_\\",
    '"; SELECT 1; --',
]


@pytest.mark.parametrize("postgres", [False, True])
@pytest.mark.parametrize("value", INJECTIONS)
def test_values_never_reach_the_sql_text(value: str, postgres: bool) -> None:
    quoted = value.replace("\\", "\\\\").replace("'", "''")
    for query in (
        f"CustomerId = '{quoted}'",
        f"WorkflowId IN ('{quoted}', 'b')",
        f"WorkflowId STARTS_WITH '{quoted}'",
        f"Notes = '{quoted}'",
        f"Tags = '{quoted}'",
        f"CustomerId NOT BETWEEN '{quoted}' AND 'z'",
    ):
        compiled = compile_filter(query, CUSTOM, postgres=postgres)
        assert compiled.where is not None
        # The SQL text is made of catalogue names, fixed words and placeholders only.
        leftover = re.sub(r":q\d+|v\.\w+|'\[\]'|'\\'|COLLATE \"C\"", "", compiled.where)
        assert re.fullmatch(r"[A-Za-z0-9_ ().,=<>!@]*", leftover), compiled.where
    # The value arrives whole, as a parameter.
    assert compile_filter(f"CustomerId = '{quoted}'", CUSTOM, postgres=postgres).params == {
        "q0": value
    }


def test_values_are_typed_for_their_columns() -> None:
    compiled = compile_filter(
        "ExecutionStatus = 'Completed' AND Amount BETWEEN 1 AND 2 AND Paid = true AND "
        "StartTime >= '2026-12-01T00:00:00Z' AND ExecutionDuration > '1m30s'",
        CUSTOM,
        postgres=False,
    )
    assert list(compiled.params.values()) == [2, 1, 2, 1, 1796083200.0, 90.0]


def test_go_durations_datetimes_and_words() -> None:
    assert parse_go_duration("1h30m") == 5400 and parse_go_duration("250ms") == 0.25
    assert parse_go_duration("00:01:30") == 90 and parse_go_duration("1x") is None
    assert parse_datetime("2026-12-01T09:00:00+01:00") == 1796112000.0
    assert parse_datetime("2026-12-01") is None
    assert text_column_value("Hello, big_World!") == " hello big_world "


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("ExecutionDuration = 1" + "0" * 400, "(out of range)"),
        ("StartTime > 1" + "0" * 400, "(out of range)"),
        ("HistoryLength = 1" + "0" * 5000, "the number has 5,001 digits"),
        ("NOT " * 3000 + "WorkflowId = 'a'", "the filter nests too deeply"),
        ("WorkflowId = 'a\\0b'", "contains a NUL character"),
    ],
)
def test_hostile_values_are_refused_as_invalid_arguments(query: str, said: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(said)):
        compile_filter(query, CUSTOM, postgres=False)


def test_an_attribute_no_run_has_is_unknown_under_not() -> None:
    # As a custom attribute a run lacks: NOT of a comparison with it matches nothing.
    for query in ("NOT BatcherUser = 'x'", "NOT StateTransitionCount > 1"):
        where = compile_filter(query, CUSTOM, postgres=False).where
        assert where is not None and "NULL = 1" in where, where
