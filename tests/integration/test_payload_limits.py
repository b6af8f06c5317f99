"""The payload limits on what workflow code sends (both backends), as temporalio's worker
enforces them: a command whose payloads are over 2 MB, or a workflow task whose commands
carry over 4 MB, fails its workflow task without recording anything else, and the run stays
open; and every payload the engine writes goes through the data converter's codec."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from engine import ApplicationError, Client, DataConverter, Worker, activity, workflow
from engine._model import commands as cmd
from engine._worker.command_sizes import check_command_sizes
from engine.common import RetryPolicy, WorkflowExecutionStatus
from engine.converter import Payload, PayloadCodec
from engine.exceptions import ActivityError, PayloadSizeError
from engine.worker import Replayer

MB = 1024 * 1024
BIG = "x" * (3 * MB)
TOO_LARGE = "WORKFLOW_TASK_FAILED_CAUSE_PAYLOADS_TOO_LARGE"
TASK_TOO_LARGE = "WORKFLOW_TASK_FAILED_CAUSE_GRPC_MESSAGE_TOO_LARGE"
FIVE_SECONDS = timedelta(seconds=5)


@activity.defn
async def take(text: str) -> int:
    return len(text)


@workflow.defn(name="Kid")
class Kid:
    @workflow.run
    async def run(self, text: str) -> str:
        return f"kid {text[:20]}"


SEND_BIG = {"on": True}


@workflow.defn(name="BigChild")
class BigChild:
    @workflow.run
    async def run(self, child_id: str) -> str:
        text = BIG if SEND_BIG["on"] else "small"
        return await workflow.execute_child_workflow(Kid.run, text, id=child_id)


@workflow.defn(name="BigResult")
class BigResult:
    @workflow.run
    async def run(self) -> str:
        return BIG


@workflow.defn(name="BigFailure")
class BigFailure:
    @workflow.run
    async def run(self) -> str:
        raise ApplicationError("it went wrong", BIG, non_retryable=True)


@workflow.defn(name="BigContinue")
class BigContinue:
    @workflow.run
    async def run(self, text: str) -> str:
        if not text:
            workflow.continue_as_new(BIG)
        return text[:5]


@workflow.defn(name="BigSignalOut")
class BigSignalOut:
    @workflow.run
    async def run(self, target: str) -> None:
        await workflow.get_external_workflow_handle(target).signal("poke", BIG)


@workflow.defn(name="BigUpdate")
class BigUpdate:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update
    async def add(self, fail: bool) -> str:
        if fail:
            raise ApplicationError("refused", BIG)
        return BIG


@workflow.defn(name="ManySmall")
class ManySmall:
    @workflow.run
    async def run(self) -> list[int]:
        part = "y" * (MB + MB // 2)  # three of them: 4.5 MB in one workflow task
        return list(
            await asyncio.gather(
                *(
                    workflow.execute_activity(take, part, start_to_close_timeout=FIVE_SECONDS)
                    for _ in range(3)
                )
            )
        )


async def _task_failure(handle: Any, *, timeout: float = 20.0) -> dict[str, Any]:
    """The attributes of the run's first WorkflowTaskFailed event, once there is one."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = (await handle.fetch_history()).events
        failed = [e for e in events if e.event_type == "WorkflowTaskFailed"]
        if failed:
            return dict(failed[0].attributes)
        assert asyncio.get_running_loop().time() < deadline, [e.event_type for e in events]
        await asyncio.sleep(0.05)


async def _refused(handle: Any, cause: str, named: str, size: str) -> dict[str, Any]:
    """Check a refused workflow task: its cause and failure, a message naming the command
    and the size, and a run that is still open."""
    attrs = await _task_failure(handle)
    assert attrs["cause"] == cause
    failure = attrs["failure"]
    assert named in failure["message"], failure["message"]
    assert f"is {size};" in failure["message"], failure["message"]
    info = failure["applicationFailureInfo"]
    if cause == TOO_LARGE:
        assert info == {"type": "PayloadSizeLimitExceeded"}
    else:
        assert info == {"type": "GrpcMessageTooLarge", "nonRetryable": True}
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    return attrs


FIRST_TASK_FAILED = [
    "WorkflowExecutionStarted",
    "WorkflowTaskScheduled",
    "WorkflowTaskStarted",
    "WorkflowTaskFailed",
]


async def _types(handle: Any) -> list[str]:
    return [e.event_type for e in (await handle.fetch_history()).events]


async def test_a_3mb_child_input_fails_the_task_and_the_run_recovers(
    client: Client, task_queue: str
) -> None:
    SEND_BIG["on"] = True
    child_id = "kid-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[BigChild, Kid]):
        handle = await client.start_workflow(
            BigChild.run, child_id, id="bc-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TOO_LARGE, f"input of child workflow Kid (id {child_id!r})", "3 MB")
        assert await _types(handle) == FIRST_TASK_FAILED  # no child was started
        assert [w async for w in client.list_workflows(f"WorkflowId = '{child_id}'")] == []
        SEND_BIG["on"] = False  # the fix is deployed: the retried task goes through
        assert await handle.result() == "kid small"
    types = await _types(handle)
    assert types.count("WorkflowTaskFailed") == 1  # the retries were not recorded
    assert "StartChildWorkflowExecutionInitiated" in types


async def test_a_3mb_activity_input_is_refused(client: Client, task_queue: str) -> None:
    @workflow.defn(name="BigActivity")
    class BigActivity:
        @workflow.run
        async def run(self) -> int:
            return await workflow.execute_activity(take, BIG, start_to_close_timeout=FIVE_SECONDS)

    async with Worker(client, task_queue=task_queue, workflows=[BigActivity], activities=[take]):
        handle = await client.start_workflow(
            BigActivity.run, id="ba-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TOO_LARGE, "input of activity take", "3 MB")
        assert await _types(handle) == FIRST_TASK_FAILED
        await handle.terminate()


@pytest.mark.parametrize(
    ("workflow_cls", "named"),
    [
        (BigResult, "workflow result"),
        (BigFailure, "failure details of the workflow"),
    ],
)
async def test_a_3mb_closing_command_is_refused_and_the_run_stays_open(
    client: Client, task_queue: str, workflow_cls: Any, named: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[workflow_cls]):
        handle = await client.start_workflow(
            workflow_cls.run, id="close-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TOO_LARGE, named, "3 MB")
        assert await _types(handle) == FIRST_TASK_FAILED
        await handle.terminate()


async def test_a_3mb_continue_as_new_input_is_refused(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[BigContinue]):
        handle = await client.start_workflow(
            BigContinue.run, "", id="can-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TOO_LARGE, "continue-as-new input of workflow BigContinue", "3 MB")
        assert await _types(handle) == FIRST_TASK_FAILED
        desc = await handle.describe()
        assert desc.run_id == handle.first_execution_run_id  # no new run
        assert desc.continued_as_new_run_id is None
        await handle.terminate()


async def test_a_3mb_signal_to_another_run_is_refused(client: Client, task_queue: str) -> None:
    target = "target-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[BigSignalOut]):
        handle = await client.start_workflow(
            BigSignalOut.run, target, id="so-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TOO_LARGE, f"input of signal 'poke' to workflow {target!r}", "3 MB")
        assert await _types(handle) == FIRST_TASK_FAILED
        await handle.terminate()


@pytest.mark.parametrize(
    ("fail", "named"),
    [(False, "result of update 'add'"), (True, "failure details of update 'add'")],
)
async def test_a_3mb_update_outcome_is_refused(
    client: Client, task_queue: str, fail: bool, named: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[BigUpdate]):
        handle = await client.start_workflow(
            BigUpdate.run, id="bu-" + uuid.uuid4().hex, task_queue=task_queue
        )
        # The update goes to a later task than the run's first (sent sooner, it could be
        # delivered with the first one, whose completion would then be refused).
        for _ in range(1000):
            if "WorkflowTaskCompleted" in await _types(handle):
                break
            await asyncio.sleep(0.01)
        caller = asyncio.ensure_future(handle.execute_update(BigUpdate.add, fail))
        try:
            await _refused(handle, TOO_LARGE, named, "3 MB")
            types = await _types(handle)
            # The run's first task completed; the one with the update failed and recorded
            # neither the update's acceptance nor its completion.
            assert types[-1] == "WorkflowTaskFailed"
            assert "WorkflowTaskCompleted" in types
            assert not [t for t in types if t.startswith("WorkflowExecutionUpdate")]
            assert not caller.done()
        finally:
            caller.cancel()
            await asyncio.gather(caller, return_exceptions=True)
        await handle.terminate()


async def test_commands_over_4mb_together_fail_the_task(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[ManySmall], activities=[take]):
        handle = await client.start_workflow(
            ManySmall.run, id="many-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _refused(handle, TASK_TOO_LARGE, "the commands of one workflow task", "4.5 MB")
        assert await _types(handle) == FIRST_TASK_FAILED  # none of the three was scheduled
        await handle.terminate()


async def test_a_3mb_memo_field_is_refused_by_the_client(client: Client, task_queue: str) -> None:
    wid = "memo-" + uuid.uuid4().hex
    with pytest.raises(PayloadSizeError, match=r"memo field 'k' is 3 MB; .* at most 2 MB"):
        await client.start_workflow(
            BigResult.run, id=wid, task_queue=task_queue, memo={"small": 1, "k": BIG}
        )
    half = "z" * (MB + MB // 4)
    with pytest.raises(PayloadSizeError, match=r"memo is 2.5 MB"):
        await client.start_workflow(
            BigResult.run, id=wid, task_queue=task_queue, memo={"a": half, "b": half}
        )
    assert [w async for w in client.list_workflows(f"WorkflowId = '{wid}'")] == []


def test_markers_and_search_attributes_are_checked_too() -> None:
    dc = DataConverter.default
    big = dc.to_payloads_json([BIG])
    marker = cmd.RecordMarker("core_patch", {"patch-data": {"payloads": big}})
    with pytest.raises(PayloadSizeError, match="details of marker 'core_patch' is 3 MB"):
        check_command_sizes([marker])
    upsert = cmd.UpsertWorkflowSearchAttributes({"Notes": big[0]})
    with pytest.raises(PayloadSizeError, match="values of search attributes 'Notes' is 3 MB"):
        check_command_sizes([upsert])
    cancel = cmd.CancelWorkflowExecution(details=big)
    with pytest.raises(PayloadSizeError, match="cancellation details of the workflow"):
        check_command_sizes([cancel])
    nested = {"message": "outer", "cause": dc.to_failure(ApplicationError("inner", BIG))}
    with pytest.raises(PayloadSizeError, match="failure details of the workflow is 3 MB"):
        check_command_sizes([cmd.FailWorkflowExecution(nested)])
    check_command_sizes([cmd.FailWorkflowExecution({"message": "m" * (3 * MB)})])


# --------------------------------------------------------------------------------------
# the codec
# --------------------------------------------------------------------------------------
MARKED = b"test/marked"


class MarkingCodec(PayloadCodec):
    """Wraps each payload whole (its metadata too) in an encoding of its own, and refuses
    to decode a payload it did not write: a payload that skipped the codec on the way in
    cannot slip through on the way out."""

    def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(
                metadata={"encoding": MARKED},
                data=b"MARK" + base64.b64encode(json.dumps(p.to_json()).encode()),
            )
            for p in payloads
        ]

    def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != MARKED or not p.data.startswith(b"MARK"):
                raise ValueError(f"payload did not go through the codec: {p.metadata}")
            out.append(Payload.from_json(json.loads(base64.b64decode(p.data[4:]))))
        return out


CODEC = DataConverter(payload_codec=MarkingCodec())


@dataclass
class Item:
    sku: str


@activity.defn
async def beat_then_echo(text: str) -> str:
    """Heartbeats and fails on its first attempt; the second reads the heartbeat back."""
    info = activity.info()
    if info.attempt == 1:
        activity.heartbeat(f"beat {text}")
        raise ApplicationError("try again")
    return f"echo {text} after {info.heartbeat_details[0]}"


@activity.defn
async def refuse(text: str) -> str:
    raise ApplicationError("refused", f"detail {text}", non_retryable=True)


@workflow.defn(name="CodecKid")
class CodecKid:
    @workflow.run
    async def run(self, item: Item) -> Item:
        return Item(f"kid {item.sku}")


@workflow.defn(name="CodecAll")
class CodecAll:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.poked = False
        self.added = False

    @workflow.run
    async def run(self, item: Item, memo_seen: str) -> list[str]:
        if not memo_seen:
            workflow.continue_as_new(args=[item, workflow.memo_value("m", type_hint=str)])
        seen = [item.sku, memo_seen]
        seen.append(
            await workflow.execute_activity(
                beat_then_echo,
                "act",
                start_to_close_timeout=FIVE_SECONDS,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=10), maximum_attempts=2
                ),
            )
        )
        kid = await workflow.execute_child_workflow(
            CodecKid.run, Item("ward"), id=f"{workflow.info().workflow_id}-kid"
        )
        seen.append(kid.sku)
        try:
            await workflow.execute_activity(refuse, "no", start_to_close_timeout=FIVE_SECONDS)
        except ActivityError as err:
            assert isinstance(err.cause, ApplicationError)
            seen.append(str(err.cause.details[0]))
        await workflow.wait_condition(lambda: self.poked and self.added)
        return seen + self.seen

    @workflow.signal
    def poke(self, text: str) -> None:
        self.seen.append(text)
        self.poked = True

    @workflow.update
    def add(self, item: Item) -> Item:
        self.seen.append(item.sku)
        self.added = True
        return Item(f"added {item.sku}")

    @workflow.query
    def state(self) -> list[str]:
        return list(self.seen)


def _payloads_in(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every payload object in an event's attributes, with where it is."""
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if isinstance(metadata, dict) and "encoding" in metadata:
            yield path, value
            return
        for key, item in value.items():
            yield from _payloads_in(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _payloads_in(item, f"{path}[{index}]")


async def test_every_payload_goes_through_the_codec_and_back(db_url: str, task_queue: str) -> None:
    client = await Client.connect(db_url, data_converter=CODEC)
    try:
        wid = "codec-" + uuid.uuid4().hex
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[CodecAll, CodecKid],
            activities=[beat_then_echo, refuse],
        ):
            first = await client.start_workflow(
                CodecAll.run,
                args=[Item("sku-1"), ""],
                id=wid,
                task_queue=task_queue,
                memo={"m": "memo-value"},
            )
            latest = client.get_workflow_handle(wid)
            deadline = asyncio.get_running_loop().time() + 20
            first_run = first.first_execution_run_id
            while (await latest.describe()).run_id == first_run:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
            await latest.signal(CodecAll.poke, "signal-value")
            added = await latest.execute_update(CodecAll.add, Item("update-value"))
            assert added == Item("added update-value")
            assert await latest.query(CodecAll.state) == ["signal-value", "update-value"]
            result = await latest.result()
        assert result == [
            "sku-1",
            "memo-value",
            "echo act after beat act",
            "kid ward",
            "detail no",
            "signal-value",
            "update-value",
        ]
        histories = [
            await client.get_workflow_handle(wid, run_id=first_run).fetch_history(),
            await latest.fetch_history(),
            await client.get_workflow_handle(f"{wid}-kid").fetch_history(),
        ]
        seen_kinds: set[str] = set()
        for history in histories:
            for event in history.events:
                for path, payload in _payloads_in(event.attributes):
                    encoding = base64.b64decode(payload["metadata"]["encoding"])
                    assert encoding == MARKED, f"{event.event_type}{path} skipped the codec"
                    seen_kinds.add(event.event_type)
            text = json.dumps([e.attributes for e in history.events])
            for secret in ("sku-1", "memo-value", "signal-value", "update-value", "detail no"):
                assert secret not in text
        assert {
            "WorkflowExecutionStarted",  # input and memo
            "WorkflowExecutionContinuedAsNew",
            "ActivityTaskScheduled",
            "ActivityTaskCompleted",
            "ActivityTaskFailed",  # failure details
            "StartChildWorkflowExecutionInitiated",
            "ChildWorkflowExecutionCompleted",
            "WorkflowExecutionSignaled",
            "WorkflowExecutionUpdateAccepted",
            "WorkflowExecutionUpdateCompleted",
            "WorkflowExecutionCompleted",
        } <= seen_kinds
        replayer = Replayer(workflows=[CodecAll, CodecKid], data_converter=CODEC)
        for history in histories:
            await replayer.replay_workflow(history)
    finally:
        await client.close()


_big_result_attempts: list[int] = []


@activity.defn
async def big_result() -> str:
    _big_result_attempts.append(activity.info().attempt)
    return "x" * (3 * MB)


@activity.defn
async def big_heartbeat() -> str:
    activity.heartbeat("x" * (3 * MB))
    await asyncio.sleep(5)  # told it is cancelled: the attempt has already failed
    return "never"


@workflow.defn
class BigActivityOutcome:
    @workflow.run
    async def run(self, which: str) -> str:
        try:
            await workflow.execute_activity(
                big_result if which == "result" else big_heartbeat,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=10), maximum_attempts=2
                ),
            )
        except ActivityError as err:
            cause = err.cause
            return f"{type(cause).__name__}: {cause}"
        return "completed"


async def test_an_activity_result_over_2mb_fails_the_attempt(
    client: Client, task_queue: str
) -> None:
    # As Temporal's worker does: the completion is refused before it is sent, and the
    # attempt fails with an ApplicationError of type PayloadSizeLimitExceeded (retryable).
    _big_result_attempts.clear()
    async with Worker(
        client, task_queue=task_queue, workflows=[BigActivityOutcome], activities=[big_result]
    ):
        said = await client.execute_workflow(
            BigActivityOutcome.run, "result", id=f"big-{uuid.uuid4().hex}", task_queue=task_queue
        )
    assert said.startswith("ApplicationError: ")
    assert "the result of activity big_result is 3" in said
    assert _big_result_attempts == [1, 2]


async def test_heartbeat_details_over_2mb_fail_the_activity_for_good(
    client: Client, task_queue: str
) -> None:
    # As Temporal's server does: a non-retryable server failure, and the activity is told
    # it is cancelled.
    async with Worker(
        client, task_queue=task_queue, workflows=[BigActivityOutcome], activities=[big_heartbeat]
    ):
        handle = await client.start_workflow(
            BigActivityOutcome.run,
            "heartbeat",
            id=f"big-hb-{uuid.uuid4().hex}",
            task_queue=task_queue,
        )
        said = await asyncio.wait_for(handle.result(), 30)
    assert said == "ServerError: Heartbeat details exceed size limit."
    failed = [
        e for e in (await handle.fetch_history()).events if e.event_type == "ActivityTaskFailed"
    ]
    assert len(failed) == 1  # not retried
    assert failed[0].attributes["failure"]["serverFailureInfo"] == {"nonRetryable": True}


@workflow.defn
class EchoBig:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(
            echo_big, text, start_to_close_timeout=timedelta(seconds=30)
        )


@activity.defn
async def echo_big(text: str) -> str:
    return text + text


async def test_payload_limits_warn_below_the_limit(
    db_url: str, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    from engine.service import PayloadLimitsConfig

    limits = PayloadLimitsConfig(payloads_warn_size=10_000, memo_warn_size=100)
    client = await Client.connect(db_url, payload_limits=limits)
    try:
        with caplog.at_level("WARNING", logger="engine.payloads"):
            async with Worker(
                client, task_queue=task_queue, workflows=[EchoBig], activities=[echo_big]
            ):
                result = await client.execute_workflow(
                    EchoBig.run,
                    "x" * 8_000,  # under the threshold; the activity's result is not
                    id=f"warn-{uuid.uuid4().hex}",
                    task_queue=task_queue,
                    memo={"note": "y" * 200},
                )
        assert len(result) == 16_000
        said = [r.getMessage() for r in caplog.records if r.name == "engine.payloads"]
        assert any(m.startswith("memo is ") for m in said), said
        assert any(m.startswith("the result of activity echo_big is 16,") for m in said), said
        assert any("workflow result" in m for m in said), said
        assert not any("input of workflow" in m for m in said), said
    finally:
        await client.close()
