"""The timer loop's alarm (``engine._service.alarm``): callbacks run on their event loop, in
deadline order, never early, and not at all once cancelled or after ``close``."""

from __future__ import annotations

import asyncio
import threading
import time

from engine._service.alarm import Alarm
from engine._store.notify import Notifier


async def test_callbacks_run_on_their_loop_in_deadline_order_and_never_early() -> None:
    alarm = Alarm()
    loop = asyncio.get_running_loop()
    ran: list[tuple[str, float, bool]] = []
    done = loop.create_future()

    def note(name: str) -> None:
        on_loop = threading.current_thread() is threading.main_thread()
        ran.append((name, time.monotonic(), on_loop))
        if len(ran) == 3:
            done.set_result(None)

    try:
        start = time.monotonic()
        alarm.call_later(0.06, lambda: note("late"))
        alarm.call_later(0.02, lambda: note("early"))  # earlier than what the thread waits for
        alarm.call_later(0.04, lambda: note("middle"))
        await asyncio.wait_for(done, 5)
    finally:
        alarm.close()
    assert [name for name, _, _ in ran] == ["early", "middle", "late"]
    assert all(on_loop for _, _, on_loop in ran)
    for (_, at, _), delay in zip(ran, (0.02, 0.04, 0.06), strict=True):
        assert at - start >= delay


async def test_a_cancelled_callback_never_runs() -> None:
    alarm = Alarm()
    ran: list[str] = []
    try:
        handle = alarm.call_later(0.01, lambda: ran.append("cancelled"))
        alarm.call_later(0.03, lambda: ran.append("kept"))
        handle.cancel()
        await asyncio.sleep(0.15)
    finally:
        alarm.close()
    assert ran == ["kept"]


async def test_close_drops_what_is_pending_and_a_later_callback_starts_it_again() -> None:
    alarm = Alarm()
    ran: list[str] = []
    alarm.call_later(0.02, lambda: ran.append("dropped"))
    alarm.close()
    await asyncio.sleep(0.08)
    assert ran == []
    done = asyncio.get_running_loop().create_future()
    alarm.call_later(0.0, lambda: done.set_result("again"))
    try:
        assert await asyncio.wait_for(done, 5) == "again"
    finally:
        alarm.close()
    assert not [t for t in threading.enumerate() if t.name == "durable-alarm"]


async def test_a_notifier_wait_times_out_through_the_alarm_and_a_notification_cancels_it() -> None:
    notifier = Notifier()
    alarm = Alarm()
    asked: list[float] = []
    handles = []

    def call_later(delay: float, callback):  # type: ignore[no-untyped-def]
        asked.append(delay)
        handles.append(alarm.call_later(delay, callback))
        return handles[-1]

    try:
        assert await notifier.wait("c", 0.02, call_later=call_later) is False
        assert asked == [0.02]
        waiting = asyncio.ensure_future(notifier.wait("c", 30.0, call_later=call_later))
        await asyncio.sleep(0.01)
        notifier.notify("c")
        assert await asyncio.wait_for(waiting, 5) is True
        assert handles[-1].cancelled  # the wait's timeout was taken back
    finally:
        alarm.close()
