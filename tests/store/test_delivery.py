"""Results of store transactions reach their callers once, from any thread, whatever the
caller's loop did meanwhile (``engine._store.delivery``): a writer thread must never die
on delivering."""

from __future__ import annotations

import asyncio
import concurrent.futures

from engine._store.delivery import deliver, deliver_all


def test_a_settled_future_is_left_as_it_is() -> None:
    fut: concurrent.futures.Future[int] = concurrent.futures.Future()
    deliver(None, fut, 1, None)
    deliver(None, fut, None, RuntimeError("too late"))
    deliver_all([(None, fut, 3)])
    assert fut.result() == 1


def test_a_loop_that_closed_gets_nothing_and_raises_nothing() -> None:
    loop = asyncio.new_event_loop()
    fut = loop.create_future()
    loop.close()
    deliver(loop, fut, 1, None)
    deliver(loop, fut, None, ValueError("nobody listens"))
    deliver_all([(loop, fut, 2)])
    assert not fut.done()


async def test_results_reach_the_loop_from_another_thread() -> None:
    loop = asyncio.get_running_loop()
    ok, failed = loop.create_future(), loop.create_future()
    await asyncio.to_thread(deliver_all, [(loop, ok, "done")])
    await asyncio.to_thread(deliver, loop, failed, None, KeyError("missing"))
    assert await ok == "done"
    await asyncio.wait([failed], timeout=5)
    assert isinstance(failed.exception(), KeyError)
