"""How the machine behaves today, for reading a benchmark's figures beside another day's.

    python bench/machine.py

The benchmarks run on a virtual machine whose speed changes from day to day, and timer
lateness depends above all on how fast a thread that slept wakes up. This prints:

- ``python_loop_ms``: a fixed pure-Python loop (CPU speed; lower is faster);
- ``handoff_after_10ms_ms`` and ``handoff_after_1s_ms``: the time from one thread setting
  an event to another thread, asleep on it for 10 ms or for 1 s, running again (the
  median of 3). Bare metal gives tens of microseconds for both; some virtual machines give
  milliseconds after a second asleep, which every hand-off on a lone timer's path pays;
- ``sleep_1s_late_ms``: how late a thread's one-second ``time.sleep`` ends (median of 3).

``timer_stages.py`` and ``beside_dbos.py`` print the same line before their figures. It
takes about 8 seconds.
"""

from __future__ import annotations

import statistics
import threading
import time


def _python_loop_ms() -> float:
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        total = 0
        for i in range(200_000):
            total += i * i
        best = min(best, time.perf_counter() - began)
    return best * 1000


def _handoff_ms(asleep: float) -> float:
    """Set an event another thread has waited on for ``asleep`` seconds; how long until
    that thread runs."""
    event = threading.Event()
    woke: list[float] = []

    def waiter() -> None:
        event.wait()
        woke.append(time.perf_counter())

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(asleep)
    began = time.perf_counter()
    event.set()
    thread.join()
    return (woke[0] - began) * 1000


def _sleep_late_ms() -> float:
    began = time.perf_counter()
    time.sleep(1.0)
    return (time.perf_counter() - began - 1.0) * 1000


def probe() -> dict[str, float]:
    """The figures the module docstring lists."""
    return {
        "python_loop_ms": round(_python_loop_ms(), 2),
        "handoff_after_10ms_ms": round(statistics.median(_handoff_ms(0.01) for _ in range(3)), 3),
        "handoff_after_1s_ms": round(statistics.median(_handoff_ms(1.0) for _ in range(3)), 3),
        "sleep_1s_late_ms": round(statistics.median(_sleep_late_ms() for _ in range(3)), 3),
    }


def line() -> str:
    """``# machine: key=value ...`` for the start of a benchmark's output."""
    return "# machine: " + " ".join(f"{k}={v}" for k, v in probe().items())


if __name__ == "__main__":
    print(line())
