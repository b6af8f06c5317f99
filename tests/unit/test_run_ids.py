"""Run ids are UUID version 7: valid UUIDs, unique, and ordered by creation time; request
ids are random UUIDs (version 4)."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

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


def test_random_bytes_are_read_in_bulk_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.urandom lets the interpreter lock go: called once per 256 ids, not per id, and
    each thread draws from bytes of its own."""
    from engine import _ids

    calls: list[int] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", counted)
    made: dict[str, list[str]] = {"a": [], "b": []}

    def draw(name: str) -> None:
        made[name] = [_ids.random_uuid() for _ in range(512)]

    threads = [threading.Thread(target=draw, args=(name,)) for name in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [_ids._BULK] * 4  # two refills of 256 ids on each thread
    assert len(set(made["a"]) | set(made["b"])) == 1024


def test_a_forked_child_never_repeats_the_parents_ids() -> None:
    from engine._ids import random_uuid, time_ordered_uuid

    random_uuid()  # the parent's buffer holds bytes it has not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, f"{random_uuid()} {time_ordered_uuid()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [random_uuid(), time_ordered_uuid()]
    assert child[0] != parent[0]
    assert child[1][14:] != parent[1][14:]  # (the random part: after the time and version)
