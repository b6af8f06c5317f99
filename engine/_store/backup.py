"""A consistent copy of a live SQLite database, through SQLite's online backup API.

A plain ``cp`` of the database file while workers run is not a backup: in WAL mode the
latest commits live in ``durable.db-wal`` until a checkpoint moves them, and a copy taken
between the two files' writes can be torn. SQLite's backup API copies the pages of one
read transaction, a snapshot of a single moment, while writers go on (WAL lets readers and
one writer work at once). The copy is written beside the destination and renamed into
place only once it is complete and has passed SQLite's integrity check, so an interrupted
backup never leaves a half-written file under the destination's name.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import InvalidArgumentError
from .dialects import parse_url


@dataclass(frozen=True)
class BackupResult:
    """What :func:`backup_sqlite` wrote."""

    path: Path
    bytes: int
    pages: int
    runs: int
    seconds: float


def backup_sqlite(
    url: str | None, destination: str | Path, *, overwrite: bool = False
) -> BackupResult:
    """Copy the SQLite database of ``url`` (None: the default database) to ``destination``.

    Raises :class:`InvalidArgumentError` for a PostgreSQL URL (use ``pg_dump``, which
    copies a live PostgreSQL database consistently), a missing source, or an existing
    destination without ``overwrite``."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise InvalidArgumentError(
            "durable db backup copies SQLite databases; for PostgreSQL use pg_dump "
            f"(e.g. pg_dump --format=custom --file=backup.dump {parsed.database}), which "
            "copies a live database consistently"
        )
    source = Path(str(parsed.database))
    if not source.is_file():
        raise InvalidArgumentError(f"no SQLite database at {source}: nothing to back up")
    target = Path(destination)
    if target.resolve() == source.resolve():
        raise InvalidArgumentError(f"the backup must go elsewhere than {source} itself")
    if target.exists() and not overwrite:
        raise InvalidArgumentError(
            f"{target} exists: give another destination, or --force to replace it"
        )
    if not target.parent.is_dir():
        raise InvalidArgumentError(f"directory {target.parent} does not exist")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    began = time.perf_counter()
    src = sqlite3.connect(source, timeout=60.0)
    try:
        dst = sqlite3.connect(partial)
        try:
            # One step (pages=-1): all pages from one read transaction, so the copy is a
            # snapshot even while workers commit (a stepped copy restarts on every write).
            src.backup(dst, pages=-1)
            check = dst.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                raise InvalidArgumentError(f"the copy failed SQLite's integrity check: {check}")
            pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
            runs = int(dst.execute("SELECT COUNT(*) FROM dn_executions").fetchone()[0])
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
        os.replace(partial, target)
    except sqlite3.Error as err:
        partial.unlink(missing_ok=True)
        raise InvalidArgumentError(f"could not back up {source}: {err}") from err
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    return BackupResult(target, target.stat().st_size, pages, runs, time.perf_counter() - began)
