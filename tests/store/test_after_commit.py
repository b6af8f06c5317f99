"""Transaction functions are pure: what they change outside the database happens after
commit (``tx.after_commit``), once, even when a SQLite batch runs them again."""

from __future__ import annotations

import uuid

import pytest

from engine import Client, SkippingClock
from engine._store.tx import StoreTx
from engine.exceptions import StoreError

from .batching import one_batch


def _fail(tx: StoreTx) -> None:
    raise ValueError("this change fails, so its batch runs again change by change")


async def test_an_effect_runs_once_after_commit_and_never_for_a_failed_change(
    db_url: str,
) -> None:
    client = await Client.connect(db_url)
    try:
        seen: list[str] = []

        def change(tx: StoreTx, name: str) -> str:
            tx.insert_namespace("ns-" + uuid.uuid4().hex[:8], 60.0, 0.0)
            tx.after_commit(lambda: seen.append(name))
            assert seen == []  # not before the commit
            return name

        assert await client.store.transaction(change, "alone") == "alone"
        assert seen == ["alone"]

        def change_then_fail(tx: StoreTx) -> None:
            tx.after_commit(lambda: seen.append("failed"))
            raise ValueError("no commit")

        with pytest.raises(ValueError):
            await client.store.transaction(change_then_fail)
        assert seen == ["alone"]

        def read(tx: StoreTx) -> None:
            tx.after_commit(lambda: seen.append("read"))

        with pytest.raises(StoreError, match="read-only"):
            await client.store.read(read)
        assert seen == ["alone"]
    finally:
        await client.close()


async def test_an_effect_runs_once_when_its_batch_is_run_again(db_url: str) -> None:
    client = await Client.connect(db_url)
    try:
        runs: list[int] = []
        effects: list[int] = []

        def change(tx: StoreTx) -> None:
            runs.append(1)
            tx.after_commit(lambda: effects.append(1))

        results = await one_batch(
            client, [client.store.transaction(change), client.store.transaction(_fail)]
        )
        assert results[0] is None and isinstance(results[1], ValueError)
        # SQLite runs the batch again change by change (the change ran in the batch and
        # again on its own); PostgreSQL takes the change that raised out of the batch.
        assert len(runs) == (1 if client.store.postgres else 2)
        assert effects == [1]
    finally:
        await client.close()


async def test_time_skipping_jumps_to_the_next_timer_once_in_a_batch_run_again(
    db_url: str,
) -> None:
    """``skip_to_next_timer`` in a batch that fails and is run again: the clock jumps once,
    to the next timer, and the call says so. (When it jumped inside the transaction, the
    rolled-back run had already moved the clock, so the second run found the first timer
    due and answered that nothing was skipped.)"""
    clock = SkippingClock()
    client = await Client.connect(db_url, clock=clock)
    try:
        start = clock.now()
        first, second = start + 1000.0, start + 2000.0

        def timers(tx: StoreTx) -> None:
            tx.insert_timer("run-a", "user", 1, 1, first, None)
            tx.insert_timer("run-b", "user", 1, 1, second, None)

        await client.store.transaction(timers)
        with clock.waiting_for_result():  # time may skip only while a result is awaited
            results = await one_batch(
                client,
                [client.service.skip_to_next_timer(), client.store.transaction(_fail)],
            )
        assert results[0] is True and isinstance(results[1], ValueError)
        assert first <= clock.now() < second, clock.now() - start
    finally:
        await client.close()
