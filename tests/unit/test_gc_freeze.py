"""The first worker of a process freezes the objects alive at its start (gc.freeze), once;
DURABLE_GC_FREEZE=0 turns it off. Run in fresh processes: the freeze is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import asyncio, gc, os, sys, types
if os.environ.get("FAKE_KERNEL"):
    sys.modules["ipykernel"] = types.ModuleType("ipykernel")  # as in a Jupyter kernel
from engine import Client, Worker, activity

@activity.defn
async def noop(x: int) -> int:
    return x

async def main():
    client = await Client.connect(sys.argv[1])
    before = gc.get_freeze_count()
    async with Worker(client, task_queue="q", activities=[noop]):
        first = gc.get_freeze_count()
        async with Worker(client, task_queue="q2", activities=[noop]):
            second = gc.get_freeze_count()
    await client.close()
    print(before, first, second)

asyncio.run(main())
"""


def _counts(tmp_path: Path, **env: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'gc.db'}"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    return [int(x) for x in out]


def test_the_first_worker_freezes_the_objects_alive_once(tmp_path: Path) -> None:
    before, first, second = _counts(tmp_path, DURABLE_GC_FREEZE="1")
    assert before == 0
    assert first > 1000  # the modules loaded so far, at least
    assert second == first  # a second worker freezes nothing more


def test_durable_gc_freeze_0_turns_it_off(tmp_path: Path) -> None:
    assert _counts(tmp_path, DURABLE_GC_FREEZE="0") == [0, 0, 0]


def test_not_in_a_jupyter_kernel(tmp_path: Path) -> None:
    # A user's session lives in the kernel: its objects must stay collectable.
    assert _counts(tmp_path, DURABLE_GC_FREEZE="1", FAKE_KERNEL="1") == [0, 0, 0]
