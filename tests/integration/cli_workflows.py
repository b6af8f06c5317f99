"""Workflows that tests/integration/test_cli.py runs, and that ``durable replay`` imports
as ``tests.integration.cli_workflows:Class`` (so they live in a module, not in the test)."""

from __future__ import annotations

from datetime import timedelta

from engine import activity, workflow

TIMEOUT = timedelta(seconds=30)


@activity.defn
async def greet(name: str) -> str:
    """Greets by name."""
    return f"Hello, {name}!"


@workflow.defn
class GreetWF:
    """One activity: greet(name)."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(greet, name, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="GreetWF")
class GreetTimerFirstWF:
    """GreetWF changed without a patch: a timer now comes before the activity."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(timedelta(seconds=1))
        return await workflow.execute_activity(greet, name, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="HelloWF")
class HelloTimerFirstWF:
    """Temporal's HelloWF sample (tests/data/temporal) with a timer swapped in first."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(timedelta(seconds=1))
        return await workflow.execute_activity(
            "say_hello", name, start_to_close_timeout=TIMEOUT, result_type=str
        )


@workflow.defn
class WaitForSignalWF:
    """Returns the messages of its ``add`` signals once it has one."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    @workflow.signal
    def add(self, message: str) -> None:
        self.messages.append(message)

    @workflow.query
    def count(self) -> int:
        return len(self.messages)

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self.messages) >= 1)
        return self.messages


@workflow.defn
class SleepyWF:
    """Sleeps a day: something to cancel or terminate."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(days=1))
        return "woke up"


NOT_A_WORKFLOW = 42
