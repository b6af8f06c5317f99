"""PostgreSQL group commit (``engine._store.pg_writer``): changes that wait together run in
one transaction with one commit; a batch never waits long for a lock (it runs again change
by change instead); its wake-ups reach other processes once it commits."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter

import psycopg

from engine import Client
from engine._store.gateway import Store
from engine._store.pg_writer import PgWriters
from engine._store.tx import StoreTx

from .batching import one_batch


def _txid(tx: StoreTx) -> int:
    return int(tx._q_many((_TXID, None))[0][0][0])


class _TxidQ:
    pg = "SELECT txid_current()"
    sqlite = pg


_TXID = _TxidQ()


def _plain(url: str) -> str:
    """The libpq form of a test URL (``postgresql+psycopg://`` is SQLAlchemy's)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


async def test_changes_waiting_together_commit_as_one_transaction(pg_url: str) -> None:
    client = await Client.connect(pg_url)
    try:
        names = [f"ns-{uuid.uuid4().hex[:8]}" for _ in range(5)]

        def change(tx: StoreTx, name: str) -> int:
            tx.insert_namespace(name, 60.0, 0.0)
            return _txid(tx)

        txids = await one_batch(client, [client.store.transaction(change, n) for n in names])
        assert len(set(txids)) == 1, txids  # one transaction for all five
        alone = await client.store.transaction(change, f"ns-{uuid.uuid4().hex[:8]}")
        assert alone != txids[0]
        found = await client.store.read(lambda tx: [tx.get_namespace(n) for n in names])
        assert all(row is not None for row in found)
    finally:
        await client.close()


async def test_a_batch_waiting_for_a_lock_runs_again_change_by_change(pg_url: str) -> None:
    """Another connection holds a run's row. The batch that needs it gives up its wait
    (``lock_timeout``) and its changes run alone: the others commit while the lock is still
    held; the one that needs the lock commits once it is released."""
    client = await Client.connect(pg_url)
    try:
        run_id = "locked-" + uuid.uuid4().hex[:8]

        def insert(tx: StoreTx) -> None:
            tx.insert_execution(
                run_id=run_id,
                namespace="default",
                workflow_id="wf",
                workflow_type="T",
                task_queue="q",
                status=1,
                start_time=0.0,
                first_run_id=run_id,
                next_event_id=1,
                history_size_bytes=0,
                workflow_task_timeout=10.0,
            )

        await client.store.transaction(insert)
        holder = await asyncio.to_thread(psycopg.connect, _plain(pg_url))
        try:
            await asyncio.to_thread(
                holder.execute,
                "SELECT 1 FROM dn_executions WHERE run_id = %s FOR UPDATE",
                (run_id,),
            )
            released = threading.Event()
            names = [f"ns-{uuid.uuid4().hex[:8]}" for _ in range(3)]

            def other(tx: StoreTx, name: str) -> bool:
                tx.insert_namespace(name, 60.0, 0.0)
                return released.is_set()

            def needs_the_lock(tx: StoreTx) -> bool:
                assert tx.lock_execution(run_id) is not None
                return released.is_set()

            calls = [
                client.store.transaction(other, names[0]),
                client.store.transaction(needs_the_lock),
                client.store.transaction(other, names[1]),
                client.store.transaction(other, names[2]),
            ]
            batch = asyncio.ensure_future(one_batch(client, calls))
            # The changes that do not need the lock commit while it is held.
            for _ in range(1000):
                found = await client.store.read(lambda tx: [tx.get_namespace(n) for n in names])
                if all(found):
                    break
                await asyncio.sleep(0.01)
            assert all(found), "the changes beside the locked one did not commit on their own"
            assert not batch.done()  # the locked one waits
            released.set()
            await asyncio.to_thread(holder.rollback)
            results = await batch
            assert results == [False, True, False, False]
        finally:
            await asyncio.to_thread(holder.close)
    finally:
        await client.close()


async def test_a_batch_wakes_other_processes_once_it_commits(pg_url: str) -> None:
    sender, receiver = Store(pg_url), Store(pg_url)
    sender.open()
    receiver.open()
    try:
        assert receiver._listener is not None
        for _ in range(500):
            if receiver._listener.connections:
                break
            await asyncio.sleep(0.01)
        channels = [f"ch-{i}" for i in range(4)]
        generations = {c: receiver.notifier.generation(c) for c in channels}

        def wake(tx: StoreTx, channel: str) -> None:
            tx.wake(channel)

        await one_batch(sender, [sender.transaction(wake, c) for c in channels])
        for channel in channels:
            await receiver.notifier.wait(channel, 10.0, since=generations[channel])
            assert receiver.notifier.generation(channel) > generations[channel], channel
    finally:
        sender.close()
        receiver.close()


async def test_more_changes_than_a_batch_holds_each_get_their_own_result(pg_url: str) -> None:
    client = await Client.connect(pg_url)
    try:

        def echo(tx: StoreTx, i: int) -> tuple[int, int]:
            return i, _txid(tx)

        n = PgWriters.MAX_BATCH + 8
        results = await one_batch(client, [client.store.transaction(echo, i) for i in range(n)])
        assert [i for i, _ in results] == list(range(n))
        sizes = sorted(Counter(txid for _, txid in results).values())
        assert sizes == [8, PgWriters.MAX_BATCH], sizes
    finally:
        await client.close()


async def test_a_change_that_raises_before_writing_leaves_its_batch(pg_url: str) -> None:
    """It is taken out (its held-back writes dropped): the others commit in the same
    transaction, its caller gets its exception, and nothing of it is kept."""
    client = await Client.connect(pg_url)
    try:
        names = [f"ns-{uuid.uuid4().hex[:8]}" for _ in range(3)]

        kept, dropped = "kept-" + uuid.uuid4().hex[:8], "dropped-" + uuid.uuid4().hex[:8]
        event = [(1, 1.0, "MarkerRecorded", "{}")]

        def change(tx: StoreTx, name: str) -> int:
            tx.insert_namespace(name, 60.0, 0.0)
            tx.insert_events(f"{kept}-{name}", event)  # history rows written behind
            return _txid(tx)

        def refuses(tx: StoreTx, name: str) -> None:
            tx.update_namespace(name, 1.0, "withdrawn", "", "{}", 0.0)  # held back, unsent
            tx.insert_events(dropped, event)
            raise LookupError("no such thing")

        results = await one_batch(
            client,
            [
                client.store.transaction(change, names[0]),
                client.store.transaction(refuses, names[0]),
                client.store.transaction(change, names[1]),
            ],
        )
        assert isinstance(results[1], LookupError)
        assert results[0] == results[2]  # one transaction, without a second run

        def sends_then_refuses(tx: StoreTx, name: str) -> None:
            tx.insert_namespace(name, 60.0, 0.0)  # its rowcount is read: sent at once
            raise LookupError("too late to take it out")

        results = await one_batch(
            client,
            [
                client.store.transaction(change, names[2]),
                client.store.transaction(sends_then_refuses, "ns-never"),
            ],
        )
        assert isinstance(results[1], LookupError) and isinstance(results[0], int)
        found = await client.store.read(
            lambda tx: [tx.get_namespace(n) for n in [*names, "ns-never"]]
        )
        assert [row is not None for row in found] == [True, True, True, False]
        assert found[0].description == ""  # the withdrawn change's write was dropped

        def events(tx: StoreTx) -> list[int]:
            runs = [dropped, *(f"{kept}-{n}" for n in names)]
            return [len(tx.read_events(r)) for r in runs]

        assert await client.store.read(events) == [0, 1, 1, 1]
    finally:
        await client.close()


async def test_a_change_that_needs_a_snapshot_of_its_own_runs_after_its_batch(
    pg_url: str,
) -> None:
    client = await Client.connect(pg_url)
    try:

        def plain(tx: StoreTx) -> int:
            return _txid(tx)

        def snapshot(tx: StoreTx) -> int:
            tx.consistent_snapshot()
            return _txid(tx)

        calls = [client.store.transaction(f) for f in (plain, snapshot, plain)]
        first, alone, last = await one_batch(client, calls)
        assert first == last and alone != first
    finally:
        await client.close()
