"""``durable db backup DEST`` (issue 14, item 8): a consistent copy of a live SQLite
database while workers write to it, through SQLite's backup API; PostgreSQL is pointed to
pg_dump."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from engine import Client, Worker, activity, workflow
from engine.cli import main
from engine.exceptions import InvalidArgumentError
from engine.history import WorkflowHistory


@activity.defn
async def step(n: int) -> int:
    return n + 1


@workflow.defn
class Steps:
    @workflow.run
    async def run(self, count: int) -> int:
        value = 0
        for _ in range(count):
            value = await workflow.execute_activity(
                step, value, start_to_close_timeout=timedelta(seconds=10)
            )
        return value


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


async def test_a_backup_taken_while_workers_write_is_consistent(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "copy.db"
    if not db_url.startswith("sqlite"):
        assert main(["--db", db_url, "db", "backup", str(dest)]) == 2
        assert "pg_dump" in capsys.readouterr().err
        assert not dest.exists()
        return
    client = await Client.connect(db_url)
    queue = "backup-" + uuid.uuid4().hex[:8]
    try:
        async with Worker(client, task_queue=queue, workflows=[Steps], activities=[step]):
            handles = [
                await client.start_workflow(Steps.run, 30, id=f"steps-{i}", task_queue=queue)
                for i in range(20)
            ]
            await asyncio.sleep(0.2)  # in the middle of it: workers commit all along
            code = await asyncio.to_thread(main, ["--db", db_url, "db", "backup", str(dest)])
            assert code == 0
            assert "backed up" in capsys.readouterr().out
            assert [await h.result() for h in handles] == [30] * 20
    finally:
        await client.close()
    # The copy is one self-contained file that passes SQLite's check...
    assert not Path(f"{dest}-wal").exists()
    with sqlite3.connect(dest) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # ...and a snapshot of one moment: every run's history is whole up to its row's count.
    copy = await Client.connect(f"sqlite:///{dest}")
    try:
        runs = [e async for e in copy.list_workflows()]
        assert len(runs) == 20
        for run in runs:
            history: WorkflowHistory = await copy.get_workflow_handle(
                run.id, run_id=run.run_id
            ).fetch_history()
            assert [e.event_id for e in history.events] == list(range(1, run.history_length + 1))
    finally:
        await copy.close()


def test_bad_backups_are_refused(tmp_path: Path) -> None:
    from engine._store.backup import backup_sqlite

    source = tmp_path / "live.db"
    with pytest.raises(InvalidArgumentError, match="no SQLite database"):
        backup_sqlite(f"sqlite:///{source}", tmp_path / "out.db")
    sqlite3.connect(source).execute("CREATE TABLE dn_executions (run_id TEXT)").connection.commit()
    taken = tmp_path / "taken.db"
    taken.write_text("keep me")
    with pytest.raises(InvalidArgumentError, match="--force"):
        backup_sqlite(f"sqlite:///{source}", taken)
    assert taken.read_text() == "keep me"
    with pytest.raises(InvalidArgumentError, match="elsewhere"):
        backup_sqlite(f"sqlite:///{source}", source)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        backup_sqlite(f"sqlite:///{source}", tmp_path / "missing" / "out.db")
    done = backup_sqlite(f"sqlite:///{source}", taken, overwrite=True)
    assert done.runs == 0 and done.path == taken
    assert not list(tmp_path.glob(".*partial*"))
