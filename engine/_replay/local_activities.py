"""Local activities (a mixin of the instance): ``workflow.execute_local_activity`` and friends.

A local activity runs in the worker that runs the workflow task, while the task is open:
no activity task, no queue. Its outcome is recorded as Temporal records it, a
``MarkerRecorded`` event named ``core_local_activity`` whose ``data`` payload (plain JSON)
says which activity it was (``seq``, ``activity_id``, ``activity_type``, ``attempt``, times,
``backoff``) and whose ``result`` payloads (or the marker's ``failure``) say how it ended.

Live, the instance asks for the activity (:meth:`LocalActivities.take_local_requests`);
the worker runs its attempts, retrying with the policy, and hands back a
:class:`~engine._replay.jobs.ResolveLocalActivity`, which records the marker and resumes
the code, all in the same workflow task. A retry backoff longer than
``local_retry_threshold`` ends the attempts there: the code waits on a durable timer, then
asks again with the next attempt. On replay the outcome comes from the recorded marker,
resolved after the code has run as far as it can, as the live worker does.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .. import workflow
from .._model import commands as cmd
from .._model.events import HistoryEvent
from ..common import RetryPolicy
from ..converter import DataConverter
from ..exceptions import ActivityError, CancelledError, InvalidArgumentError, RetryState
from . import jobs as j
from .other_runs import until_resolved

JsonDict = dict[str, Any]

#: The marker Temporal's core SDK records a local activity's outcome in.
LOCAL_ACTIVITY_MARKER = "core_local_activity"
#: Backoffs up to this long are waited for inside the workflow task (Temporal's default).
DEFAULT_LOCAL_RETRY_THRESHOLD = 60.0


@dataclass
class _PendingLocal:
    seq: int
    activity_id: str
    activity_type: str
    input: list[JsonDict]
    options: dict[str, Any]
    result_type: Any
    result: asyncio.Future[Any]
    attempt: int = 1
    original_schedule_time: float = 0.0


@dataclass
class LocalActivityMarker(cmd.RecordMarker):
    """The ``core_local_activity`` marker of local activity ``seq``: it matches a recorded
    marker of the same activity (seq and type), so swapping a local activity for another
    one, or for a regular activity, is a non-determinism error on replay."""

    seq: int = 0
    activity_type: str = ""

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same marker, for the same activity."""
        if not super().matches(event_type, attrs):
            return False
        data = marker_data(attrs)
        return data.get("seq") == self.seq and data.get("activity_type") == self.activity_type

    def describe(self) -> str:
        """Description."""
        return f"RecordMarker({LOCAL_ACTIVITY_MARKER}, local activity {self.activity_type})"


#: The failure of a cancelled local activity's marker, as sdk-core records it.
_CANCELLED_FAILURE: JsonDict = {"message": "Activity cancelled", "canceledFailureInfo": {}}


def _timestamp(epoch: float) -> JsonDict:
    seconds = int(epoch)
    return {"seconds": seconds, "nanos": min(round((epoch - seconds) * 1e9), 999_999_999)}


def _epoch(value: Any) -> float:
    if isinstance(value, dict):
        return float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9
    return 0.0


def _json_payload(value: Any) -> JsonDict:
    data = json.dumps(value, separators=(",", ":")).encode()
    return {
        "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
        "data": base64.b64encode(data).decode(),
    }


def marker_data(attrs: JsonDict) -> JsonDict:
    """The decoded ``data`` payload of a ``core_local_activity`` marker (``{}`` if none)."""
    payloads = ((attrs.get("details") or {}).get("data") or {}).get("payloads") or []
    if not payloads:
        return {}
    try:
        value = json.loads(base64.b64decode(payloads[0].get("data", "")))
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def resolution_of(event: HistoryEvent) -> j.ResolveLocalActivity | None:
    """The outcome a recorded ``core_local_activity`` marker holds, or None for other events."""
    attrs = event.attributes
    if event.event_type != "MarkerRecorded" or attrs.get("markerName") != LOCAL_ACTIVITY_MARKER:
        return None
    data = marker_data(attrs)
    if "seq" not in data:
        return None
    backoff = data.get("backoff")
    return j.ResolveLocalActivity(
        seq=int(data["seq"]),
        attempt=int(data.get("attempt") or 1),
        result=((attrs.get("details") or {}).get("result") or {}).get("payloads"),
        failure=attrs.get("failure"),
        backoff=_epoch(backoff) if backoff else None,
        complete_time=_epoch(data.get("complete_time")),
        original_schedule_time=_epoch(data.get("original_schedule_time")),
        activation_index=int(data.get("activation_index") or 1),
    )


class LocalActivities:
    """Local activities of :class:`~engine._replay.instance.WorkflowInstance`."""

    workflow_id: str
    run_id: str
    namespace: str
    task_queue: str
    converter: DataConverter
    defn: Any
    _activity_seq: int
    _commands: list[cmd.Command]
    _replaying: bool
    _now: float
    _locals: dict[int, _PendingLocal]
    _local_requests: list[j.LocalActivityRequest]
    _local_markers: dict[int, j.ResolveLocalActivity]
    _replayed_locals: list[j.ResolveLocalActivity]
    _local_cancels: list[int]

    create_future: Callable[[], asyncio.Future[Any]]  # the event loop's
    create_task: Callable[..., asyncio.Task[Any]]
    _user_metadata: Callable[..., JsonDict | None]

    def start_local_activity(
        self, activity: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> workflow.ActivityHandle[Any]:
        """Ask for a local activity; a handle resolving with its result."""
        name = workflow.activity_name(activity)
        if not options.get("start_to_close") and not options.get("schedule_to_close"):
            raise InvalidArgumentError(
                f"local activity {name!r} needs start_to_close_timeout or "
                "schedule_to_close_timeout (as in Temporal)"
            )
        result_type = options.get("result_type")
        if result_type is None and not isinstance(activity, str):
            from .._model.definitions import ActivityDefinition

            result_type = ActivityDefinition.of(activity).return_type
        self._activity_seq += 1  # one sequence with regular activities, as Temporal's
        seq = self._activity_seq
        pending = _PendingLocal(
            seq=seq,
            activity_id=options.get("activity_id") or str(seq),
            activity_type=name,
            input=self.converter.to_payloads_json(list(args)),
            options=options,
            result_type=result_type,
            result=self.create_future(),
            original_schedule_time=self._now,
        )
        self._locals[seq] = pending
        self._ask(pending)
        return workflow.ActivityHandle(self._await_local(pending), loop=self)  # type: ignore[arg-type]  # the instance is the loop

    async def _await_local(self, pending: _PendingLocal) -> Any:
        return await until_resolved(pending.result, lambda: self._cancel_local(pending))

    def _cancel_local(self, pending: _PendingLocal) -> None:
        """The handle was cancelled: as Temporal's core SDK does, the local activity ends
        at once as cancelled (a marker with a canceled failure; the code gets an
        ``ActivityError`` caused by ``CancelledError``), whatever its cancellation type;
        an attempt still running in the worker is cancelled there (its outcome is
        dropped)."""
        if pending.result.done() or self._locals.get(pending.seq) is not pending:
            return
        del self._locals[pending.seq]
        started = True
        waiting = [r for r in self._local_requests if r.seq != pending.seq]
        if len(waiting) != len(self._local_requests):
            self._local_requests, started = waiting, False  # never handed to the worker
        recorded = next((m for m in self._replayed_locals if m.seq == pending.seq), None)
        if recorded is not None:
            self._replayed_locals.remove(recorded)  # replay: the marker this makes
            started = recorded.attempt > 0
        elif started:
            self._local_cancels.append(pending.seq)
        job = j.ResolveLocalActivity(
            pending.seq,
            pending.attempt if started else 0,
            failure=dict(_CANCELLED_FAILURE),
            complete_time=self._now if started else 0.0,
            original_schedule_time=pending.original_schedule_time,
        )
        self._commands.append(self._marker(pending, job))
        pending.result.set_exception(self._local_cancelled_error(pending))

    def _local_cancelled_error(self, pending: _PendingLocal) -> ActivityError:
        err = ActivityError(
            "Local Activity cancelled",
            scheduled_event_id=0,
            started_event_id=0,
            identity="",
            activity_type=pending.activity_type,
            activity_id=pending.activity_id,
            retry_state=RetryState.CANCEL_REQUESTED,
        )
        err.__cause__ = CancelledError("Activity cancelled")
        return err

    def take_local_cancels(self) -> list[int]:
        """Seqs of local activities cancelled while their attempt runs in the worker."""
        cancels, self._local_cancels = self._local_cancels, []
        return cancels

    def _ask(self, pending: _PendingLocal) -> None:
        recorded = self._local_markers.pop(pending.seq, None) if self._replaying else None
        if recorded is not None:
            self._replayed_locals.append(recorded)
            return
        policy: RetryPolicy = pending.options.get("retry_policy") or RetryPolicy()
        threshold = pending.options.get("local_retry_threshold")
        self._local_requests.append(
            j.LocalActivityRequest(
                seq=pending.seq,
                activity_id=pending.activity_id,
                activity_type=pending.activity_type,
                input=pending.input,
                attempt=pending.attempt,
                original_schedule_time=pending.original_schedule_time,
                schedule_to_close=pending.options.get("schedule_to_close"),
                start_to_close=pending.options.get("start_to_close"),
                retry_policy=policy.to_json(),
                local_retry_threshold=(
                    DEFAULT_LOCAL_RETRY_THRESHOLD if threshold is None else float(threshold)
                ),
                workflow_id=self.workflow_id,
                run_id=self.run_id,
                workflow_type=self.defn.name,
                namespace=self.namespace,
                task_queue=self.task_queue,
            )
        )

    def take_local_requests(self) -> list[j.LocalActivityRequest]:
        """Local activities to run now (live)."""
        requests, self._local_requests = self._local_requests, []
        return requests

    def note_local_markers(self, markers: Sequence[j.ResolveLocalActivity]) -> None:
        """Replay: the outcomes recorded in the task being replayed."""
        for marker in markers:
            self._local_markers[marker.seq] = marker
        # Asked for in an earlier task whose completion was a heartbeat (the local
        # activity outlasted it): its outcome is recorded in this one.
        if self._local_requests:
            waiting = []
            for request in self._local_requests:
                recorded = self._local_markers.pop(request.seq, None)
                if recorded is None:
                    waiting.append(request)
                else:
                    self._replayed_locals.append(recorded)
            self._local_requests = waiting

    def take_replayed_locals(self) -> list[j.ResolveLocalActivity]:
        """Replay: recorded outcomes of local activities the code has asked for."""
        found, self._replayed_locals = self._replayed_locals, []
        return found

    def _apply_resolve_local_activity(self, job: j.ResolveLocalActivity) -> None:
        pending = self._locals.get(job.seq)
        if pending is None:
            return
        self._commands.append(self._marker(pending, job))
        if job.backoff is not None and job.failure is not None:
            pending.attempt = job.attempt + 1
            # Its recorded original schedule time stays (schedule-to-close counts from it).
            pending.original_schedule_time = (
                job.original_schedule_time or pending.original_schedule_time
            )
            self.create_task(self._retry_after(pending, job.backoff), name="local-backoff")
            return
        del self._locals[job.seq]
        if pending.result.done():
            return
        if job.failure is not None and "canceledFailureInfo" in job.failure:
            pending.result.set_exception(self._local_cancelled_error(pending))
            return
        if job.failure is not None:
            # Raised as the activity's own error, not wrapped in an ActivityError: what
            # temporalio raises for a local activity (checked on Temporal's dev server).
            pending.result.set_exception(self.converter.from_failure(job.failure))
            return
        values = self.converter.from_payloads_json(job.result or [], [pending.result_type])
        pending.result.set_result(values[0] if values else None)

    async def _retry_after(self, pending: _PendingLocal, backoff: float) -> None:
        await workflow.sleep(timedelta(seconds=backoff))
        # The next attempt is a new request, with a seq (and default id) of its own, as
        # temporalio schedules it after the timer.
        self._locals.pop(pending.seq, None)
        self._activity_seq += 1
        pending.seq = self._activity_seq
        pending.activity_id = pending.options.get("activity_id") or str(pending.seq)
        self._locals[pending.seq] = pending
        self._ask(pending)

    def _marker(self, pending: _PendingLocal, job: j.ResolveLocalActivity) -> LocalActivityMarker:
        data = {
            "seq": pending.seq,
            "attempt": job.attempt,
            "activity_id": pending.activity_id,
            "activity_type": pending.activity_type,
            "complete_time": (
                None
                if job.attempt == 0  # cancelled before it started (as core writes it)
                else _timestamp(job.complete_time or self._now)
            ),
            "backoff": _timestamp(job.backoff) if job.backoff is not None else None,
            "original_schedule_time": _timestamp(
                job.original_schedule_time or pending.original_schedule_time
            ),
            "activation_index": job.activation_index,
        }
        details: dict[str, JsonDict] = {"data": {"payloads": [_json_payload(data)]}}
        if job.failure is None:
            details["result"] = {"payloads": list(job.result or [])}
        return LocalActivityMarker(
            marker_name=LOCAL_ACTIVITY_MARKER,
            details=details,
            failure=job.failure,
            seq=pending.seq,
            activity_type=pending.activity_type,
            user_metadata=self._user_metadata(pending.options.get("summary")),
        )
