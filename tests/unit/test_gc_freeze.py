"""gc.freeze is opt-in: the first worker that asks (``Worker(freeze_gc=True)``, or
``DURABLE_GC_FREEZE=1`` when the argument is not given) freezes the objects alive at its
start, once; by default, or with ``freeze_gc=False``, the host's collector is left alone,
and in a Jupyter kernel the variable does not count, only the argument. Run in fresh
processes: the freeze is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, gc, os, sys, types
if os.environ.get("FAKE_KERNEL"):
    sys.modules["ipykernel"] = types.ModuleType("ipykernel")  # as in a Jupyter kernel
from engine import Client, Worker, activity

OPTION = {"none": None, "true": True, "false": False}

@activity.defn
async def noop(x: int) -> int:
    return x

async def main():
    client = await Client.connect(sys.argv[1])
    first_asks, second_asks = OPTION[sys.argv[2]], OPTION[sys.argv[3]]
    before = gc.get_freeze_count()
    async with Worker(client, task_queue="q", activities=[noop], freeze_gc=first_asks):
        first = gc.get_freeze_count()
        async with Worker(client, task_queue="q2", activities=[noop], freeze_gc=second_asks):
            second = gc.get_freeze_count()
    await client.close()
    print(before, first, second)

asyncio.run(main())
"""


def _counts(tmp_path: Path, first: str, second: str, **env: str) -> list[int]:
    """Objects frozen before the first worker, with it, and with a second one inside it."""
    base = {k: v for k, v in os.environ.items() if k not in ("DURABLE_GC_FREEZE", "FAKE_KERNEL")}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'gc.db'}", first, second],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    return [int(x) for x in out]


def _frozen_once(counts: list[int]) -> bool:
    before, first, second = counts
    # The modules loaded so far, at least; a second worker freezes nothing more (a few
    # objects frozen while the first worker started may have been freed since).
    return before == 0 and first > 1000 and second <= first


def test_off_by_default(tmp_path: Path) -> None:
    assert _counts(tmp_path, "none", "none") == [0, 0, 0]


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_off_unless_the_variable_asks(tmp_path: Path, value: str) -> None:
    assert _counts(tmp_path, "none", "none", DURABLE_GC_FREEZE=value) == [0, 0, 0]


def test_freeze_gc_true_freezes_once(tmp_path: Path) -> None:
    assert _frozen_once(_counts(tmp_path, "true", "true"))


def test_durable_gc_freeze_1_freezes_once(tmp_path: Path) -> None:
    assert _frozen_once(_counts(tmp_path, "none", "none", DURABLE_GC_FREEZE="1"))


def test_freeze_gc_false_wins_over_the_variable(tmp_path: Path) -> None:
    assert _counts(tmp_path, "false", "false", DURABLE_GC_FREEZE="1") == [0, 0, 0]


def test_the_first_worker_that_asks_freezes(tmp_path: Path) -> None:
    before, first, second = _counts(tmp_path, "none", "true")
    assert (before, first) == (0, 0) and second > 1000


def test_in_a_jupyter_kernel_only_the_argument_freezes(tmp_path: Path) -> None:
    # A user's session lives in the kernel, and the kernel inherits its server's
    # environment: the variable does not reach it, an explicit freeze_gc=True does.
    assert _counts(tmp_path, "none", "none", DURABLE_GC_FREEZE="1", FAKE_KERNEL="1") == [0, 0, 0]
    assert _frozen_once(_counts(tmp_path, "true", "true", FAKE_KERNEL="1"))
