"""A throwaway PostgreSQL server of the test's own, to stop and restart at will.

Outage tests restart PostgreSQL in the middle of a run. Doing that to the machine's shared
server (127.0.0.1:5432) would break every other connection to it, so each such test makes
its own cluster with ``initdb`` in a temporary directory, on a free loopback port, and
stops it at the end. The binaries are the ones of the PostgreSQL installed on the machine
(``/usr/lib/postgresql/<version>/bin``, the Debian layout `.ci/run` installs). As root
(the CI machine), the server runs as the ``postgres`` user, which ``initdb`` requires.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def _bin_dir() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise RuntimeError(
            "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (apt-get install "
            "postgresql; .ci/run does this)"
        )
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    """A PostgreSQL server in a temporary directory, on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="durable-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it takes connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: sessions are ended, as a restart does)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_for: float) -> tuple[float, float]:
        """Stop, stay down ``down_for`` seconds, start; the monotonic times it went down
        and came back (took connections again)."""
        self.stop()
        went = time.monotonic()
        time.sleep(down_for)
        self.start()
        return went, time.monotonic()

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    """A started private cluster, removed afterwards."""
    cluster = PgCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
