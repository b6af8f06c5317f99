"""Listing runs page by page, and reading a history as a stream of events (both backends)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from engine import Client, Worker
from engine.exceptions import InvalidArgumentError

from ..interop.engine_code import HelloWF, SignalWF, say_hello


async def _start_waiting(client: Client, task_queue: str, n: int, prefix: str) -> list[str]:
    ids = []
    for i in range(n):
        handle = await client.start_workflow(
            SignalWF.run, 1, id=f"{prefix}-{i}", task_queue=task_queue
        )
        ids.append(handle.id)
    return ids


async def test_pages_follow_each_other_without_gaps_or_repeats(
    client: Client, task_queue: str
) -> None:
    prefix = "page-" + uuid.uuid4().hex[:8]
    ids = await _start_waiting(client, task_queue, 7, prefix)
    query = f"TaskQueue = '{task_queue}'"

    listing = client.list_workflows(query, page_size=3)
    await listing.fetch_next_page()
    first = [r.id for r in listing.current_page or []]
    assert len(first) == 3 and listing.next_page_token is not None

    # A later request resumes from the token alone, as a REST client would.
    seen = list(first)
    token = listing.next_page_token
    pages = 1
    while token is not None:
        more = client.list_workflows(query, page_size=3, next_page_token=token)
        await more.fetch_next_page()
        seen += [r.id for r in more.current_page or []]
        token = more.next_page_token
        pages += 1
    assert pages == 3
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))

    # Iterating reads every page; the order is newest first.
    streamed = [r async for r in client.list_workflows(query, page_size=2)]
    assert [r.id for r in streamed] == seen
    starts = [r.start_time for r in streamed]
    assert starts == sorted(starts, reverse=True)

    # A run started while paging does not shift the later pages.
    listing = client.list_workflows(query, page_size=4)
    await listing.fetch_next_page()
    head = [r.id for r in listing.current_page or []]
    await _start_waiting(client, task_queue, 1, prefix + "-late")
    await listing.fetch_next_page()
    tail = [r.id for r in listing.current_page or []]
    assert head + tail == seen and listing.next_page_token is None

    newest = [prefix + "-late-0", *seen]
    assert [r.id async for r in client.list_workflows(query, limit=5, page_size=2)] == newest[:5]
    assert [r async for r in client.list_workflows(query, limit=0)] == []
    for wid in [*ids, prefix + "-late-0"]:
        await client.get_workflow_handle(wid).terminate()


async def test_bad_paging_arguments_are_refused(client: Client) -> None:
    import base64
    import json

    crafted = [
        json.dumps({"v": 1, "start": 10**400, "run": "x"}),
        json.dumps({"v": 1, "start": "NaN", "run": "x"}),
        json.dumps({"v": 1, "start": 1.0, "run": 5}),
        json.dumps({"v": 1, "start": 1.0}),
    ]
    for bad in [b"not a token", *(base64.urlsafe_b64encode(c.encode()) for c in crafted)]:
        with pytest.raises(InvalidArgumentError, match="next_page_token"):
            client.list_workflows(next_page_token=bad)
    with pytest.raises(InvalidArgumentError, match="page_size"):
        client.list_workflows(page_size=0)
    with pytest.raises(InvalidArgumentError, match="limit"):
        client.list_workflows(limit=-1)
    listing = client.list_workflows(next_page_token=None)
    assert [r async for r in listing] == []


async def test_history_events_in_pages_and_live(client: Client, task_queue: str) -> None:
    async with Worker(
        client, task_queue=task_queue, workflows=[HelloWF, SignalWF], activities=[say_hello]
    ):
        handle = await client.start_workflow(
            HelloWF.run, "pages", id="ev-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.result()
        whole = (await handle.fetch_history()).events
        paged = [e async for e in handle.fetch_history_events(page_size=2)]
        assert [e.event_id for e in paged] == [e.event_id for e in whole]
        assert [e.attributes for e in paged] == [e.attributes for e in whole]
        tail = [e.event_id async for e in handle.fetch_history_events(after_event_id=5)]
        assert tail == [e.event_id for e in whole[5:]]

        # Live: the iteration yields events as the run records them and ends when it closes.
        waiting = await client.start_workflow(
            SignalWF.run, 2, id="live-" + uuid.uuid4().hex, task_queue=task_queue
        )
        seen: list[str] = []

        async def follow() -> None:
            async for event in waiting.fetch_history_events(
                wait_new_event=True, poll_interval=timedelta(milliseconds=20)
            ):
                seen.append(event.event_type)

        follower = asyncio.create_task(follow())
        await waiting.signal(SignalWF.add_message, "one")
        for _ in range(500):
            if seen.count("WorkflowExecutionSignaled") == 1:
                break
            await asyncio.sleep(0.01)
        assert not follower.done()
        await waiting.signal(SignalWF.add_message, "two")
        await asyncio.wait_for(follower, 20)
        assert seen[0] == "WorkflowExecutionStarted"
        assert seen[-1] == "WorkflowExecutionCompleted"
        assert seen.count("WorkflowExecutionSignaled") == 2
        recorded = [e.event_type for e in (await waiting.fetch_history()).events]
        assert seen == recorded

    with pytest.raises(InvalidArgumentError, match="page_size"):
        [e async for e in handle.fetch_history_events(page_size=0)]
