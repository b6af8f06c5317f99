"""``python -m engine.demo``: run one durable workflow on the embedded SQLite default.

It starts a worker, runs an order workflow that waits for an approval signal, charges in an
activity that fails once and is retried, and prints the recorded history.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from . import Client, RetryPolicy, Worker, activity, workflow


@activity.defn
async def charge(order_id: str, amount: int) -> str:
    """Pretend to charge a card; the first attempt fails to show a retry."""
    if activity.info().attempt == 1:
        raise RuntimeError("card service timed out (attempt 1 fails on purpose)")
    return f"charged {amount} for {order_id}"


@workflow.defn
class Order:
    """Wait for approval, then charge."""

    def __init__(self) -> None:
        self.approved = False

    @workflow.run
    async def run(self, order_id: str) -> str:
        await workflow.wait_condition(lambda: self.approved, timeout=timedelta(days=1))
        return str(
            await workflow.execute_activity(
                charge,
                args=[order_id, 42],
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
            )
        )

    @workflow.signal
    def approve(self) -> None:
        """Approve the order."""
        self.approved = True


async def main() -> None:
    """Run the demo and print the history."""
    client = await Client.connect()
    print(f"database: {client.database_url}")
    order_id = f"order-{uuid.uuid4().hex[:6]}"
    # This process exists to run the worker: freezing the collector is ours to choose.
    worker = Worker(
        client, task_queue="orders", workflows=[Order], activities=[charge], freeze_gc=True
    )
    async with worker:
        handle = await client.start_workflow(Order.run, order_id, id=order_id, task_queue="orders")
        await handle.signal(Order.approve)
        print(f"result: {await handle.result()}")
    history = await handle.fetch_history()
    print(f"history of {order_id} ({len(history)} events):")
    for event in history:
        print(f"  {event.event_id:>3}  {event.event_type}")
    print("the activity's attempts:")
    for attempt in await handle.fetch_attempts():
        failure = (attempt["failure"] or {}).get("message", "")
        print(f"  attempt {attempt['attempt']}: {attempt['outcome']} {failure}")


if __name__ == "__main__":
    asyncio.run(main())
