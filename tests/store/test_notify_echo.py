"""PostgreSQL wake-ups: a store skips the echo of its own notifications (they were
delivered locally at commit, with their messages) and forwards everybody else's."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Client


async def test_own_echoes_are_skipped_others_forwarded(pg_url: str) -> None:
    client = await Client.connect(pg_url)
    try:
        store = client.store
        notifier = store.notifier
        before = notifier.generation("ch:1")
        store._remote_notify(f"{store._token}:ch:1")  # our own, echoed back
        assert notifier.generation("ch:1") == before
        store._remote_notify("0" * 32 + ":ch:1")  # another process's
        after = notifier.generation("ch:1")
        assert after != before
        store._remote_notify("ch:1")  # a process of an older release: the bare channel
        assert notifier.generation("ch:1") != after
    finally:
        await client.close()


async def test_wake_ups_reach_another_store_after_commit_and_only_then(pg_url: str) -> None:
    """A committed change's wake-ups reach another store (another process's, in effect);
    a change that fails sends none. The server delivers notifications in commit order:
    once the later one has arrived, the failed one would have too."""
    import asyncio

    from engine._store.gateway import Store

    sender, receiver = Store(pg_url), Store(pg_url)
    sender.open()
    receiver.open()
    try:
        listener = receiver._listener
        assert listener is not None
        for _ in range(500):  # LISTEN is issued by the listener's thread, soon after open
            if listener.connections:
                break
            await asyncio.sleep(0.01)
        failed_before = receiver.notifier.generation("ch:failed")
        ok_before = receiver.notifier.generation("ch:ok")

        def fails(tx: Any) -> None:
            tx.wake("ch:failed")
            raise RuntimeError("no")

        with pytest.raises(RuntimeError):
            await sender.transaction(fails)
        await sender.transaction(lambda tx: tx.wake("ch:ok"))
        for _ in range(500):
            if receiver.notifier.generation("ch:ok") != ok_before:
                break
            await asyncio.sleep(0.01)
        assert receiver.notifier.generation("ch:ok") != ok_before, "never woken"
        assert receiver.notifier.generation("ch:failed") == failed_before
    finally:
        sender.close()
        receiver.close()
