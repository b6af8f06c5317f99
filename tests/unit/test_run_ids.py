"""Run ids are UUID version 7: valid UUIDs, unique, and ordered by creation time; request
ids are random UUIDs (version 4)."""

from __future__ import annotations

import time
import uuid

from engine._service.state import new_run_id


def test_run_ids_are_uuid7_with_the_creation_time_first() -> None:
    before = time.time_ns() // 1_000_000
    run_id = new_run_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(run_id)
    assert str(parsed) == run_id  # canonical lower-case text, as Temporal prints run ids
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert before <= parsed.int >> 80 <= after


def test_run_ids_are_unique_and_sort_by_creation_time() -> None:
    first = [new_run_id() for _ in range(2000)]
    time.sleep(0.002)  # a later millisecond
    later = new_run_id()
    assert len(set(first)) == len(first)
    assert later > max(first)


def test_request_ids_are_random_uuid4_texts() -> None:
    from engine._ids import random_uuid

    ids = [random_uuid() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:50]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
