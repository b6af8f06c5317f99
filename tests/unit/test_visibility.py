"""The list filter subset: terms joined with AND, clear errors for anything else."""

from __future__ import annotations

import pytest

from engine._service.visibility import parse_filter
from engine.exceptions import InvalidArgumentError


def test_terms_joined_with_and() -> None:
    assert parse_filter("WorkflowType = 'Order' AND ExecutionStatus = 'Running'") == {
        "workflow_type": "Order",
        "status": 1,
    }
    assert parse_filter("WorkflowId = \"o-1\" and TaskQueue = 'q'") == {
        "workflow_id": "o-1",
        "task_queue": "q",
    }
    assert parse_filter(None) == {} and parse_filter("  ") == {}


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("Foo = 'x'", "unknown attribute 'Foo'"),
        ("ExecutionStatus = 'Sleeping'", "unknown ExecutionStatus"),
        ("WorkflowId > 'a'", "cannot read"),
        ("WorkflowId = 'a' OR WorkflowId = 'b'", "cannot read"),
    ],
)
def test_bad_filters_say_what_is_understood(query: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        parse_filter(query)
