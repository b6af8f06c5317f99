"""The interop cases written for ``temporalio`` (the Temporal Python SDK).

``engine_code.py`` beside this file is the same code with ``engine`` imports: the two
files differ only in their import lines (a test checks it). Workflow and activity type
names match the ones of the peers' ``temporal_wf.py`` where a case has a recorded
Temporal sample in ``tests/data/temporal``, so those samples replay against these classes too.

Importing this module has no side effects: temporalio's sandbox re-imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

TIMEOUT = timedelta(seconds=30)
FAST_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=2.0,
    maximum_attempts=5,
)


# -- activities -------------------------------------------------------------------------


@activity.defn
async def say_hello(name: str) -> str:
    return f"Hello, {name}!"


@activity.defn
async def noop(x: int) -> int:
    return x


@activity.defn
async def flaky(name: str) -> str:
    """Fails on attempts 1 and 2, succeeds on attempt 3."""
    attempt = activity.info().attempt
    if attempt < 3:
        raise ApplicationError(f"flaky failure on attempt {attempt}", type="FlakyError")
    return f"ok after {attempt} attempts: {name}"


@activity.defn
async def always_fails(name: str) -> str:
    """Fails for good: a non-retryable application error with details."""
    raise ApplicationError(
        f"permanent failure for {name}",
        {"detail": "some detail", "code": 42},
        type="PermanentError",
        non_retryable=True,
    )


@activity.defn
async def release(resource: str) -> str:
    """The cleanup step of a cancelled workflow."""
    return f"released {resource}"


@activity.defn
async def resumable(steps: int) -> str:
    """Heartbeats its progress; attempt 1 fails half way, attempt 2 resumes from it."""
    info = activity.info()
    done = int(info.heartbeat_details[0]) if info.heartbeat_details else 0
    if info.attempt == 1:
        done = steps // 2
        activity.heartbeat(done)
        await asyncio.sleep(0.3)  # give the heartbeat time to reach the service
        raise ApplicationError("connection lost half way", type="ConnectionLost")
    return f"resumed at step {done} of {steps} on attempt {info.attempt}"


class Greeter:
    """Activities as methods of an object with state (registered bound: greeter.greet)."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    @activity.defn
    async def greet(self, name: str) -> str:
        return f"{self.greeting}, {name}!"


@activity.defn
class Shout:
    """An activity that is a callable class (registered as an instance: Shout())."""

    async def __call__(self, text: str) -> str:
        return text.upper()


greeter = Greeter("Howdy")


@activity.defn
async def flaky_local(name: str) -> str:
    """A local activity that fails twice, then reports where it ran."""
    info = activity.info()
    if info.attempt < 3:
        raise ApplicationError(f"attempt {info.attempt} fails", type="FlakyError")
    return f"{name} on attempt {info.attempt}, local: {info.is_local}"


@activity.defn
async def slow_local(seconds: float) -> str:
    """Longer than most of its workflow task's timeout."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


ALL_ACTIVITIES = [
    slow_local,
    say_hello,
    noop,
    flaky,
    flaky_local,
    always_fails,
    release,
    resumable,
    greeter.greet,
    Shout(),
]


# -- workflows --------------------------------------------------------------------------


@workflow.defn
class HelloWF:
    """One activity."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(say_hello, name, start_to_close_timeout=TIMEOUT)


@workflow.defn
class SeqActivitiesWF:
    """``n`` activities one after the other."""

    @workflow.run
    async def run(self, n: int) -> int:
        total = 0
        for i in range(n):
            total += await workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
        return total


@workflow.defn
class TimerWF:
    """A durable timer."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(seconds)
        return "timer done"


@workflow.defn
class SignalWF:
    """Waits until ``expected`` signals have arrived, then returns them in order."""

    def __init__(self) -> None:
        self._messages: list[str] = []

    @workflow.signal
    async def add_message(self, message: str) -> None:
        self._messages.append(message)

    @workflow.run
    async def run(self, expected: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self._messages) >= expected)
        return self._messages


@workflow.defn
class RetryWF:
    """An activity that fails twice, then succeeds (retries 100 ms apart, doubling)."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            flaky, name, start_to_close_timeout=TIMEOUT, retry_policy=FAST_RETRY
        )


@workflow.defn
class FailedActivityWF:
    """The activity fails non-retryably and the workflow does not catch it: it fails."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            always_fails,
            name,
            start_to_close_timeout=TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=3),
        )


@workflow.defn
class CaughtFailureWF:
    """The activity fails non-retryably; the workflow catches the error and completes."""

    @workflow.run
    async def run(self, name: str) -> str:
        try:
            return await workflow.execute_activity(
                always_fails,
                name,
                start_to_close_timeout=TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as err:
            return f"caught: {type(err).__name__}: {err.cause}"


@workflow.defn
class PatchedWF:
    """A change guarded by ``workflow.patched``: new runs greet through an activity."""

    @workflow.run
    async def run(self, name: str) -> str:
        if workflow.patched("greet-with-activity"):
            greeting = await workflow.execute_activity(
                say_hello, name, start_to_close_timeout=TIMEOUT
            )
        else:
            greeting = f"Hi, {name}."
        await workflow.sleep(1)
        return greeting


@workflow.defn
class PatchesWF:
    """Two changes and a deprecated one: each patch is recorded with the list of the
    patches the run has used (Temporal's TemporalChangeVersion)."""

    @workflow.run
    async def run(self, name: str) -> str:
        parts = []
        if workflow.patched("first-change"):
            parts.append(
                await workflow.execute_activity(say_hello, name, start_to_close_timeout=TIMEOUT)
            )
        if workflow.patched("second-change"):
            await workflow.sleep(0.1)
            parts.append("then slept")
        workflow.deprecate_patch("old-change")
        return " ".join(parts)


@workflow.defn
class MethodActivitiesWF:
    """An activity method of an object, then an activity class."""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity_method(
            Greeter.greet, name, start_to_close_timeout=TIMEOUT
        )
        return await workflow.execute_activity_class(
            Shout, greeting, start_to_close_timeout=TIMEOUT
        )


async def _labelled_sleep(seconds: float, label: str) -> str:
    await workflow.sleep(seconds)
    return label


@workflow.defn
class WaitManyWF:
    """workflow.as_completed over three timers (a second apart, so that each fires in a
    workflow task of its own on Temporal's server too), then workflow.wait for the first of
    an activity and a long timer."""

    @workflow.run
    async def run(self, name: str) -> list[str]:
        sleeps = [
            asyncio.create_task(_labelled_sleep(3.0, "slow")),
            asyncio.create_task(_labelled_sleep(1.0, "fast")),
            asyncio.create_task(_labelled_sleep(2.0, "middle")),
        ]
        order = [await next_done for next_done in workflow.as_completed(sleeps)]
        greeting = workflow.start_activity(say_hello, name, start_to_close_timeout=TIMEOUT)
        long_sleep = asyncio.create_task(workflow.sleep(3600))
        done, pending = await workflow.wait(
            [greeting, long_sleep], return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        order.append(done[0].result())
        return order


@workflow.defn
class CancelCleanupWF:
    """Waits 30 days; when cancelled, releases what it holds, then reports the cancel."""

    @workflow.run
    async def run(self, resource: str) -> str:
        try:
            await workflow.sleep(timedelta(days=30))
        except asyncio.CancelledError:
            await workflow.execute_activity(release, resource, start_to_close_timeout=TIMEOUT)
            raise
        return "held for 30 days"


@workflow.defn
class CountdownWF:
    """One activity per run, then continues as new with ``n - 1`` until ``n`` is 0."""

    @workflow.run
    async def run(self, n: int) -> str:
        await workflow.execute_activity(say_hello, f"round {n}", start_to_close_timeout=TIMEOUT)
        if n > 0:
            workflow.continue_as_new(n - 1)
        return "liftoff"


@workflow.defn
class HeartbeatWF:
    """An activity whose heartbeat details carry its progress over to the next attempt."""

    @workflow.run
    async def run(self, steps: int) -> str:
        return await workflow.execute_activity(
            resumable,
            steps,
            start_to_close_timeout=TIMEOUT,
            heartbeat_timeout=timedelta(seconds=10),
            retry_policy=FAST_RETRY,
        )


@workflow.defn
class ParentWF:
    """A child workflow (``HelloWF``) whose result the parent uses."""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_child_workflow(
            HelloWF.run, name, id=f"{workflow.info().workflow_id}-child"
        )
        return f"child said: {greeting}"


@workflow.defn
class LockedUpdatesWF:
    """Two updates under one lock: ``hold`` keeps it until the ``release`` signal, ``book``
    waits for it and then runs an activity. When ``hold`` returns, Temporal records its
    completion before the activity that its release of the lock lets ``book`` schedule."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.released = False
        self.done: list[str] = []

    @workflow.run
    async def run(self, updates: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self.done) >= updates)
        return self.done

    @workflow.signal
    def release(self) -> None:
        self.released = True

    @workflow.update
    async def hold(self) -> str:
        async with self.lock:
            await workflow.wait_condition(lambda: self.released)
            self.done.append("held")
            return "held"

    @workflow.update
    async def book(self, name: str) -> str:
        async with self.lock:
            receipt = await workflow.execute_activity(
                say_hello, name, start_to_close_timeout=TIMEOUT
            )
            self.done.append(receipt)
            return receipt


@workflow.defn
class UpdateFirstWF:
    """Started by update-with-start: the update runs before the run method's first step,
    so its events come before the activity the run schedules at once."""

    def __init__(self) -> None:
        self.value = ""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(say_hello, name, start_to_close_timeout=TIMEOUT)
        await workflow.wait_condition(lambda: bool(self.value))
        return f"{greeting} {self.value}"

    @workflow.update
    def set_value(self, value: str) -> str:
        self.value = value
        return f"set {value}"


@workflow.defn
class MessengerWF:
    """Signals one run and cancels another by workflow id, then tries both on an id with no
    run: each failure comes back as the error Temporal's SDK raises."""

    @workflow.run
    async def run(self, base_id: str) -> list[str]:
        said: list[str] = []
        receiver = workflow.get_external_workflow_handle(f"{base_id}-receiver")
        await receiver.signal(SignalWF.add_message, "from another run")
        said.append("signalled")
        sleeper = workflow.get_external_workflow_handle_for(
            CancelCleanupWF.run, f"{base_id}-sleeper"
        )
        await sleeper.cancel()
        said.append("cancel requested")
        nobody = workflow.get_external_workflow_handle(f"{base_id}-nobody")
        try:
            await nobody.signal("add_message", "lost")
        except ApplicationError as err:
            said.append(f"signal failed: {err.type}: {err.message}")
        try:
            await nobody.cancel()
        except ApplicationError as err:
            said.append(f"cancel failed: {err.type}: {err.message}")
        return said


@workflow.defn
class LateHandlersWF:
    """Sets its signal handlers only once told to begin: one for "add" and a dynamic one
    for every other name. Signals sent before then wait for the handler that takes them."""

    def __init__(self) -> None:
        self.go = False
        self.got: list[str] = []

    @workflow.run
    async def run(self, count: int) -> list[str]:
        await workflow.wait_condition(lambda: self.go)
        workflow.set_signal_handler("add", self.add)
        workflow.set_dynamic_signal_handler(self.other)
        await workflow.wait_condition(lambda: len(self.got) >= count)
        return self.got

    @workflow.signal
    def begin(self) -> None:
        self.go = True

    def add(self, text: str) -> None:
        self.got.append(f"add {text}")

    def other(self, name: str, args: Sequence[RawValue]) -> None:
        converter = workflow.payload_converter()
        texts = [converter.from_payload(arg.payload, str) for arg in args]
        self.got.append(f"{name} {' '.join(texts)}")


@workflow.defn
class LocalActivitiesWF:
    """Local activities before and after a regular one, the last one retried twice inside
    its workflow task; a local activity that fails for good raises its own error."""

    @workflow.run
    async def run(self, name: str) -> list[str]:
        first = await workflow.execute_local_activity(
            say_hello, name, start_to_close_timeout=TIMEOUT
        )
        second = await workflow.execute_activity(
            say_hello, "regular", start_to_close_timeout=TIMEOUT
        )
        third = await workflow.execute_local_activity(
            flaky_local,
            name,
            start_to_close_timeout=TIMEOUT,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=10)),
        )
        try:
            await workflow.execute_local_activity(
                always_fails, name, start_to_close_timeout=TIMEOUT
            )
            fourth = "no failure"
        except ApplicationError as err:  # not wrapped in an ActivityError, as in temporalio
            fourth = f"{type(err).__name__} {err.type}: {err.message}"
        return [first, second, third, fourth]


@workflow.defn
class CronWF:
    """Each run of a cron schedule says what the run before it returned."""

    @workflow.run
    async def run(self, label: str) -> str:
        previous = "none"
        if workflow.has_last_completion_result():
            previous = workflow.get_last_completion_result(str)
        return f"{label} after [{previous}] on {workflow.info().cron_schedule}"


@workflow.defn
class MemoWF:
    """Changes its memo twice, the second time removing a key, and reports what it sees."""

    @workflow.run
    async def run(self, name: str) -> dict[str, str]:
        workflow.upsert_memo({"greeting": f"Hello, {name}!", "stage": "started"})
        await workflow.sleep(0.1)
        workflow.upsert_memo({"stage": None})
        return {key: str(value) for key, value in sorted(workflow.memo().items())}


@workflow.defn
class SummariesWF:
    """Summaries on what it starts (an activity, a local activity, a timer, a timed wait, a
    child with a summary and details): Temporal's user metadata on those events."""

    @workflow.run
    async def run(self, name: str) -> str:
        hello = await workflow.execute_activity(
            say_hello, name, start_to_close_timeout=TIMEOUT, summary="greet **them**"
        )
        local = await workflow.execute_local_activity(
            say_hello, "local", start_to_close_timeout=TIMEOUT, summary="greet locally"
        )
        await workflow.sleep(0.1, summary="a short nap")
        try:
            await workflow.wait_condition(lambda: False, timeout=0.1, timeout_summary="give up")
        except TimeoutError:
            pass
        child = await workflow.execute_child_workflow(
            HelloWF.run,
            "child",
            id=f"{workflow.info().workflow_id}-child",
            static_summary="the child",
            static_details="It says hello.\n\nTwice if asked.",
            memo={"from": "parent"},
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        return f"{hello} / {local} / {child}"


@workflow.defn
class LongLocalWF:
    """A local activity that outlasts its workflow task's timeout (2 s, set by the start):
    the worker keeps the task alive by completing it and taking the next one."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        first = await workflow.execute_local_activity(
            slow_local, seconds, start_to_close_timeout=TIMEOUT
        )
        second = await workflow.execute_local_activity(
            say_hello, "after", start_to_close_timeout=TIMEOUT
        )
        return f"{first}, {second}"


@workflow.defn
class CancelledLocalWF:
    """A local activity cancelled as soon as it is asked for ends as cancelled (a marker
    with a canceled failure), whatever its cancellation type."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        handle = workflow.start_local_activity(slow_local, seconds, start_to_close_timeout=TIMEOUT)
        await asyncio.sleep(0)
        handle.cancel()
        try:
            await handle
        except ActivityError as err:
            return f"{type(err.cause).__name__}: {err.message}"
        return "completed"


@workflow.defn
class CancelRulesWF:
    """Asks a run that has closed to cancel (delivered, no error), then waits. Asked to
    cancel twice itself, it hears it once, and it returns once told to finish."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.finish = False

    @workflow.signal
    def finish_now(self) -> None:
        self.finish = True

    @workflow.run
    async def run(self, closed_id: str) -> list[str]:
        await workflow.get_external_workflow_handle(closed_id).cancel()
        self.said.append("closed run: cancel delivered")
        try:
            await workflow.wait_condition(lambda: self.finish)
        except asyncio.CancelledError:
            self.said.append("cancelled")
            await workflow.wait_condition(lambda: self.finish)
        return self.said


#: Custom search attributes of the search_attributes case (registered by its start).
CUSTOMER_ID = SearchAttributeKey.for_keyword("CustomerId")
ORDER_TAGS = SearchAttributeKey.for_keyword_list("OrderTags")


@workflow.defn
class SearchAttrsWF:
    """Starts with a customer id, upserts another and a list of tags, then unsets the tags;
    says what ``workflow.info()`` showed along the way."""

    @workflow.run
    async def run(self) -> list[str]:
        said = [f"started for {workflow.info().typed_search_attributes.get(CUSTOMER_ID)}"]
        workflow.upsert_search_attributes(
            [CUSTOMER_ID.value_set("c-2"), ORDER_TAGS.value_set(["gift", "urgent"])]
        )
        said.append(f"tags {list(workflow.info().typed_search_attributes.get(ORDER_TAGS))}")
        await workflow.sleep(timedelta(milliseconds=100))
        workflow.upsert_search_attributes([ORDER_TAGS.value_unset()])
        said.append(f"now for {workflow.info().typed_search_attributes.get(CUSTOMER_ID)}")
        said.append(f"tags {workflow.info().typed_search_attributes.get(ORDER_TAGS)}")
        return said


ALL_WORKFLOWS = [
    HelloWF,
    SeqActivitiesWF,
    TimerWF,
    SignalWF,
    RetryWF,
    FailedActivityWF,
    CaughtFailureWF,
    PatchedWF,
    PatchesWF,
    MethodActivitiesWF,
    WaitManyWF,
    CancelCleanupWF,
    CountdownWF,
    HeartbeatWF,
    ParentWF,
    LockedUpdatesWF,
    UpdateFirstWF,
    MessengerWF,
    LocalActivitiesWF,
    CronWF,
    MemoWF,
    LateHandlersWF,
    SummariesWF,
    LongLocalWF,
    CancelledLocalWF,
    CancelRulesWF,
    SearchAttrsWF,
]
