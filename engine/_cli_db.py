"""``durable db ...``: operations on the database itself (registered by :mod:`engine.cli`)."""

from __future__ import annotations

import argparse
import sys

from ._model.limits import check_text
from ._store.backup import backup_sqlite


def add_db_commands(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]  # argparse's own type
    common: argparse.ArgumentParser,
) -> None:
    """Add ``durable db backup``."""
    db = commands.add_parser("db", parents=[common], help="back up the database")
    db_cmds = db.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    p = db_cmds.add_parser(
        "backup",
        parents=[common],
        help="a consistent copy of a live SQLite database (not a plain cp)",
        description="Copies the SQLite database through SQLite's backup API: a snapshot "
        "of one moment, taken while workers keep running, checked, then renamed into "
        "place. A plain cp of a live database file is not a backup (recent commits may "
        "still be in its -wal file). For PostgreSQL use pg_dump.",
    )
    p.add_argument("destination", metavar="DEST", help="the file to write")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.set_defaults(func=_cmd_backup)


def _cmd_backup(args: argparse.Namespace) -> int:
    check_text(args.destination, "DEST")  # SQLite takes UTF-8 paths without NUL
    done = backup_sqlite(getattr(args, "db", None), args.destination, overwrite=args.force)
    print(
        f"backed up {done.runs} runs to {done.path} ({done.bytes:,} bytes, {done.pages} pages, "
        f"{done.seconds:.2f} s)",
        file=sys.stdout,
    )
    return 0
