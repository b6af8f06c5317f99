"""``WorkflowEnvironment.sleep`` jumps the clock only when no task is ready or running,
judged from one snapshot *and a time read after it*: a host's transaction that committed
just before (a schedule's action: a run's first workflow task made ready at the host's
"now", the schedule's next timer a day later) must count as work, not as a task due a
moment in the future. Read the other way round, the clock jumped a day over the task
(a daily schedule's test skipped a day, once in a while)."""

from __future__ import annotations

import threading

import sqlalchemy as sa

from engine import Client
from engine._store.tx import StoreTx
from engine.testing import _sleep_state


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


async def test_a_task_committed_just_before_the_snapshot_counts_as_work(db_url: str) -> None:
    client = await Client.connect(db_url)
    store = client.store
    clock = _Clock(1000.0)
    real = StoreTx.next_timer_at

    def host_commits() -> None:
        # The host read its clock a moment after ours: the task is ready from then.
        with store.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dn_workflow_tasks (run_id, namespace, task_queue, state, "
                    "attempt, scheduled_time, visible_at, start_to_close) VALUES "
                    "('r', 'default', 'q', 1, 1, :t, :t, 10)"
                ),
                {"t": clock.t + 0.0005},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO dn_timers (run_id, kind, ref, attempt, fire_at, data) "
                    "VALUES ('s', 'schedule', 0, 1, :t, NULL)"
                ),
                {"t": clock.t + 86400},
            )

    def committed_first(self: StoreTx) -> float | None:
        worker = threading.Thread(target=host_commits)
        worker.start()
        worker.join(timeout=5)
        clock.t += 0.001  # time goes on while the host commits
        return real(self)

    try:
        StoreTx.next_timer_at = committed_first  # type: ignore[method-assign]
        now, busy, next_at = await store.read(_sleep_state, clock)
    finally:
        StoreTx.next_timer_at = real  # type: ignore[method-assign]
        await client.close()
    assert now == 1000.001
    assert next_at == 1000.0 + 86400
    assert busy, "the task made ready before the snapshot must hold the clock"
