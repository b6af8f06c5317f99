"""PostgreSQL wake-ups: a store skips the echo of its own notifications (they were
delivered locally at commit, with their messages) and forwards everybody else's."""

from __future__ import annotations

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
