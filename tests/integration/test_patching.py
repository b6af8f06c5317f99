"""``workflow.patched()`` as Temporal's SDKs record it: a ``core_patch`` marker in plain JSON
(never through the payload codec), then an upsert of ``TemporalChangeVersion`` listing the
run's patches, with core SDK flag 2 in the first workflow task that did so; histories
written before (marker through the codec, no upsert) still replay. On both backends."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from engine import Client, Worker, WorkflowHistory
from engine.converter import DataConverter, Payload
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer
from tests.interop import engine_code as code
from tests.unit.test_converter import ZlibCodec

CODEC = DataConverter(payload_codec=ZlibCodec())


def _decoded(payload: dict[str, Any]) -> tuple[str, Any]:
    encoding = base64.b64decode(payload["metadata"]["encoding"]).decode()
    return encoding, json.loads(base64.b64decode(payload["data"]))


async def _run_patches(client: Client, task_queue: str) -> WorkflowHistory:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=code.ALL_WORKFLOWS,
        activities=code.ALL_ACTIVITIES,
    ):
        handle = await client.start_workflow(
            code.PatchesWF.run, "codec", id="patches-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == "Hello, codec! then slept"
        return await handle.fetch_history()


async def test_under_a_codec_the_patch_records_are_plain_json_and_replay(
    db_url: str, task_queue: str
) -> None:
    env = await WorkflowEnvironment.start_time_skipping(data_converter=CODEC, database_url=db_url)
    try:
        history = await _run_patches(env.client, task_queue)
    finally:
        await env.shutdown()
    events = history.events
    markers = [e for e in events if e.event_type == "MarkerRecorded"]
    assert [_decoded(m.attributes["details"]["patch-data"]["payloads"][0]) for m in markers] == [
        ("json/plain", {"id": "first-change", "deprecated": False}),
        ("json/plain", {"id": "second-change", "deprecated": False}),
        ("json/plain", {"id": "old-change", "deprecated": True}),
    ]
    upserts = [e for e in events if e.event_type == "UpsertWorkflowSearchAttributes"]
    versions = [
        e.attributes["searchAttributes"]["indexedFields"]["TemporalChangeVersion"] for e in upserts
    ]
    assert [_decoded(v) for v in versions] == [
        ("json/plain", ["first-change"]),
        ("json/plain", ["first-change", "second-change"]),
        ("json/plain", ["first-change", "second-change", "old-change"]),
    ]
    assert all(base64.b64decode(v["metadata"]["type"]) == b"KeywordList" for v in versions)
    # Each upsert follows its marker; flags 1-3 are recorded once, in the first completion.
    for marker, upsert in zip(markers, upserts, strict=True):
        assert upsert.event_id == marker.event_id + 1
    completions = [e for e in events if e.event_type == "WorkflowTaskCompleted"]
    assert [c.attributes["sdkMetadata"] for c in completions] == [
        {"coreUsedFlags": [1, 2, 3]},
        {},
        {},
    ]
    # The activity's input went through the codec; the replay decodes it the same way.
    scheduled = next(e for e in events if e.event_type == "ActivityTaskScheduled")
    assert base64.b64decode(
        scheduled.attributes["input"]["payloads"][0]["metadata"]["encoding"]
    ) == (b"binary/zlib")
    replayer = Replayer(workflows=code.ALL_WORKFLOWS, data_converter=CODEC)
    assert (await replayer.replay_workflow(history)).replay_failure is None


async def test_a_history_written_before_the_upsert_still_replays(
    db_url: str, task_queue: str
) -> None:
    env = await WorkflowEnvironment.start_time_skipping(data_converter=CODEC, database_url=db_url)
    try:
        history = await _run_patches(env.client, task_queue)
    finally:
        await env.shutdown()
    # As this engine wrote it before: the marker through the codec, no upsert, no flag.
    data = json.loads(history.to_json())
    kept = []
    for event in data["events"]:
        if "upsertWorkflowSearchAttributesEventAttributes" in event:
            continue
        marker = event.get("markerRecordedEventAttributes")
        if marker:
            raw = Payload.from_json(marker["details"]["patch-data"]["payloads"][0])
            encoded = ZlibCodec().encode([raw])[0]
            marker["details"]["patch-data"]["payloads"] = [encoded.to_json()]
        done = event.get("workflowTaskCompletedEventAttributes")
        if done:
            done["sdkMetadata"] = {}
        kept.append(event)
    renumber = {e["eventId"]: str(i) for i, e in enumerate(kept, 1)}
    for event in kept:
        event["eventId"] = renumber[event["eventId"]]
        for attrs in event.values():
            if isinstance(attrs, dict):
                for key in ("scheduledEventId", "startedEventId", "workflowTaskCompletedEventId"):
                    if key in attrs:
                        attrs[key] = renumber[attrs[key]]
    old = WorkflowHistory.from_json(history.workflow_id, json.dumps({"events": kept}))
    assert "UpsertWorkflowSearchAttributes" not in {e.event_type for e in old.events}
    replayer = Replayer(workflows=code.ALL_WORKFLOWS, data_converter=CODEC)
    assert (await replayer.replay_workflow(old)).replay_failure is None


async def test_past_temporals_size_limit_patches_are_no_longer_upserted(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    from engine import workflow

    @workflow.defn(name="ManyPatches")
    class ManyPatches:
        @workflow.run
        async def run(self, n: int) -> int:
            return sum(
                workflow.patched(f"patch-number-{i:04d}-with-a-longish-id") for i in range(n)
            )

    async with Worker(env.client, task_queue=task_queue, workflows=[ManyPatches]):
        handle = await env.client.start_workflow(
            ManyPatches.run, 120, id="many-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == 120
        history = await handle.fetch_history()
    types = [e.event_type for e in history.events]
    # As Temporal's dev server recorded the same program (temporalio 1.35): 120 markers,
    # and upserts only while the list stays within 2048 bytes of JSON (53 of these ids).
    assert types.count("MarkerRecorded") == 120
    assert types.count("UpsertWorkflowSearchAttributes") == 53
    replayer = Replayer(workflows=[ManyPatches])
    assert (await replayer.replay_workflow(history)).replay_failure is None
