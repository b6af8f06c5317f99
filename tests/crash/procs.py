"""Worker processes for the crash tests, and what the tests check with them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """A worker in a child process (started with `python -m tests.crash.worker_proc`)."""

    def __init__(self, url: str, queue: str, markers: Path, *, log_level: str = "") -> None:
        self.log = markers / f"worker-{uuid.uuid4().hex[:8]}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if log_level:
            env["DN_WORKER_LOG"] = log_level
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.crash.worker_proc", url, queue, str(markers)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + 30
        while b"ready" not in self.log.read_bytes():
            assert self.proc.poll() is None, f"worker exited: {self.log.read_text()}"
            assert time.monotonic() < deadline, "worker did not start in 30 s"
            time.sleep(0.02)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP: the process stops where it is, connections and locks held."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: it goes on as if nothing had happened."""
        self.proc.send_signal(signal.SIGCONT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.thaw()  # a frozen process does not act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


async def until(predicate, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


def assert_no_gaps(events: list) -> None:
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
