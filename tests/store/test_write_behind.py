"""History rows are written behind (one insert per commit), yet every change sees what was
written before it, and a failing change leaves nothing, alone or in a group commit
(SQLite's writer, PostgreSQL's writer threads)."""

from __future__ import annotations

import uuid

import pytest

from engine import Client
from engine._store.tx import StoreTx
from engine.exceptions import StoreError

from .batching import one_batch


def _events(n: int, first: int = 1) -> list[tuple[int, float, str, str]]:
    return [(i, float(i), "MarkerRecorded", f'{{"n": {i}}}') for i in range(first, first + n)]


async def test_a_change_reads_the_events_it_just_wrote(client: Client) -> None:
    run = "wb-" + uuid.uuid4().hex

    def write_then_read(tx: StoreTx) -> tuple[list[int], int, int]:
        tx.insert_events(run, _events(3))
        ids = [r.event_id for r in tx.read_events(run)]
        tx.insert_events(run, _events(2, first=4))
        last = tx.last_event(run)
        first = tx.first_event(run)
        return ids, int(last.event_id), int(first.event_id)

    assert await client.store.transaction(write_then_read) == ([1, 2, 3], 5, 1)

    def read(tx: StoreTx) -> list[int]:
        return [r.event_id for r in tx.read_events(run)]

    assert await client.store.transaction(read) == [1, 2, 3, 4, 5]


async def test_a_failing_change_writes_none_of_its_events(client: Client) -> None:
    run = "wb-" + uuid.uuid4().hex

    def write_then_fail(tx: StoreTx) -> None:
        tx.insert_events(run, _events(2))
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        await client.store.transaction(write_then_fail)

    def read(tx: StoreTx) -> list[int]:
        return [r.event_id for r in tx.read_events(run)]

    assert await client.store.transaction(read) == []


async def _one_batch(client: Client, fns: list) -> list:
    """Run ``fns`` as one group commit: queued while the writers are held busy."""
    return await one_batch(client, [client.store.transaction(fn) for fn in fns])


async def test_one_group_commit_writes_behind_and_isolates_a_failure(db_url: str) -> None:
    client = await Client.connect(db_url)
    try:
        run = "wb-" + uuid.uuid4().hex

        def write(tx: StoreTx) -> str:
            tx.insert_events(run, _events(2))
            return "written"

        def read(tx: StoreTx) -> list[int]:
            return [r.event_id for r in tx.read_events(run)]

        def write_more(tx: StoreTx) -> str:
            tx.insert_events(run, _events(1, first=3))
            return "more"

        def conflict(tx: StoreTx) -> None:  # event ids written already: a UNIQUE violation
            tx.insert_events(run, _events(1))

        # A change sees the rows written behind by the ones before it in the same commit.
        assert await _one_batch(client, [write, read, write_more]) == ["written", [1, 2], "more"]
        assert await client.store.transaction(read) == [1, 2, 3]

        # A failing change fails alone; the others of its commit are kept.
        run = "wb-" + uuid.uuid4().hex
        results = await _one_batch(client, [write, conflict, write_more])
        assert results[0] == "written" and results[2] == "more"
        assert isinstance(results[1], StoreError)
        assert await client.store.transaction(read) == [1, 2, 3]
    finally:
        await client.close()
