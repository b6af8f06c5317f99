"""The deterministic event loop that runs one workflow run's code.

A :class:`WorkflowInstance` is an ``asyncio`` event loop of its own: ``call_soon`` appends
to a deque, ``call_later`` becomes a durable timer command, ``time()`` is the time of the
current workflow task. One entry point, :meth:`WorkflowInstance.activate`, applies jobs
(:mod:`.jobs`, derived from history events; one ``_apply_<job>`` method per kind) and runs
the code until it is blocked, returning the commands it produced. No I/O happens here;
:meth:`WorkflowInstance.snapshot` is the view from outside (the stepper's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as _random
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, get_args

from .. import _search_attributes as search_attributes
from .. import workflow
from .._model import commands as cmd
from .._model.definitions import WorkflowDefinition
from ..common import (
    ActivityCancellationType,
    RetryPolicy,
    TypedSearchAttributes,
)
from ..converter import DataConverter, user_metadata_json
from ..exceptions import (
    ActivityError,
    CancelledError,
    FailureError,
    InvalidArgumentError,
    NondeterminismError,
    RetryState,
    is_cancelled_exception,
)
from . import jobs as j
from . import snapshot as snap
from .handlers import MessageHandlers, WorkflowTaskError
from .info import info_from_start
from .jobs import Job
from .local_activities import LocalActivities, _PendingLocal
from .loop import DeterministicLoop
from .other_runs import OtherRuns, _PendingChild, _PendingExternal, until_resolved
from .versioning import Versioning

log = logging.getLogger("engine.workflow")
JsonDict = dict[str, Any]


@dataclass
class _PendingActivity:
    seq: int
    command: cmd.ScheduleActivityTask
    result: asyncio.Future[Any]
    cancellation_type: ActivityCancellationType
    result_type: Any
    scheduled_event_id: int | None = None
    cancel_sent: bool = False


class WorkflowInstance(
    MessageHandlers, OtherRuns, LocalActivities, DeterministicLoop, workflow._Runtime
):
    """One run's workflow object driven by activations. Not thread-safe: one at a time."""

    def __init__(
        self,
        defn: WorkflowDefinition,
        *,
        namespace: str,
        workflow_id: str,
        run_id: str,
        task_queue: str,
        converter: DataConverter,
    ) -> None:
        self.defn = defn
        self.namespace = namespace
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.task_queue = task_queue
        self.converter = converter
        super().__init__()
        self._replaying = False
        self._activity_seq = 0
        self._activities: dict[int, _PendingActivity] = {}
        self._activities_by_event: dict[int, int] = {}
        self._child_seq = 0
        self._external_seq = 0
        self._children: dict[int, _PendingChild] = {}
        self._children_by_event: dict[int, int] = {}
        self._externals: dict[int, _PendingExternal] = {}
        self._locals: dict[int, _PendingLocal] = {}
        self._local_requests: list[j.LocalActivityRequest] = []
        self._local_markers: dict[int, j.ResolveLocalActivity] = {}
        self._replayed_locals: list[j.ResolveLocalActivity] = []
        self._local_cancels: list[int] = []
        self._externals_by_event: dict[int, int] = {}
        self._conditions: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._handlers_running = 0
        self._cancel_requested = False
        self._main: asyncio.Task[Any] | None = None
        self._handler_failure: BaseException | None = None
        self._rejections: list[tuple[str, JsonDict]] = []
        self._running_updates: dict[str, tuple[str, Any]] = {}
        self._running_signals: dict[int, tuple[str, Any]] = {}
        self._signal_seq = 0
        self._object: Any = None
        self._start_args: list[Any] | None = None
        self._start_attrs: JsonDict = {}
        #: Exceptions that fail the run (besides Temporal's failures): the definition's
        #: ``failure_exception_types`` and the worker's ``workflow_failure_exception_types``.
        self.failure_types: tuple[type[BaseException], ...] = tuple(defn.failure_exception_types)
        self._info: workflow.Info | None = None
        self._rng: _random.Random | None = None  # made on first use (most runs never ask)
        self._details = ""
        self.versioning = Versioning(run_id)
        self._history_length = 0
        self._history_size = 0
        self._suggest_can = False
        self.completed = False
        self._closing: cmd.Command | None = None

    # =================================================================================
    # activation
    # =================================================================================

    def activate(
        self,
        jobs: Sequence[Job],
        *,
        now: float,
        replaying: bool,
        history_length: int,
        history_size: int = 0,
        suggest_continue_as_new: bool = False,
        same_task: bool = False,
    ) -> list[cmd.Command]:
        """Apply jobs, run the code until blocked, and return the commands it produced.

        ``same_task``: another activation of the workflow task the last one belonged to
        (the outcomes of its local activities): the commands returned are the whole task's
        so far, so a command the code takes back now (a timer started and cancelled in one
        task) is taken back from the task, as on replay, where one activation does it all.

        Raises :class:`WorkflowTaskError` when workflow code raised a non-failure exception.
        """
        self._now = now
        self._replaying = replaying
        self._history_length = history_length
        self._history_size = history_size
        self._suggest_can = suggest_continue_as_new
        if not same_task:
            self._commands = []
        self.versioning.begin_activation(replaying=replaying)
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        try:
            # Temporal's Python SDK applies an activation's jobs in three batches and runs
            # the code after each: patches, then signals and updates, then the rest (the
            # start, timers, results, cancellation). The order of the commands, and so of
            # the history, follows from it.
            batches: tuple[list[Job], list[Job], list[Job]] = ([], [], [])
            for job in jobs:
                batches[_BATCH.get(type(job), 2)].append(job)
                if isinstance(job, j.InitializeWorkflow):
                    with _task_fails_on_error():  # input that does not fit the run method
                        self._prepare_start(job)
            only_updates = (
                not batches[0]
                and not batches[2]
                and all(isinstance(job, j.DoUpdate) for job in batches[1])
            )
            appliers = _APPLIERS
            for index, batch in enumerate(batches):
                if not batch:
                    continue
                for job in batch:
                    apply = appliers.get(type(job))
                    if apply is None:
                        raise TypeError(f"no _apply_ method for job {job!r}")
                    # A recorded payload the converter cannot decode, or input that does
                    # not fit the code, fails the workflow task (as in temporalio), never
                    # the worker.
                    with _task_fails_on_error():
                        apply(self, job)
                with _task_fails_on_error():
                    self._ensure_object()
                # Conditions are not checked after patches; nor after updates that were
                # all rejected (they leave no trace, so replay could not see them).
                if index == 0:
                    self._run_until_blocked(check=_never)
                elif only_updates:
                    self._run_until_blocked(check=self._accepted_an_update)
                else:
                    self._run_until_blocked()
            # Replay: local activities the code asked for resolve from their recorded
            # markers once it has run as far as it can, as the live worker resolves them.
            replayed = self.take_replayed_locals()
            while replayed:
                for job in replayed:
                    with _task_fails_on_error():
                        self._apply_resolve_local_activity(job)
                self._run_until_blocked()
                replayed = self.take_replayed_locals()
            self._check_main()
        finally:
            asyncio.events._set_running_loop(previous)
        return list(self._commands)

    # -- jobs: one _apply_<job> method per kind (signals and updates: in handlers) -----

    def _apply_notify_has_patch(self, job: j.NotifyHasPatch) -> None:
        self.versioning.history_has_patch(job.patch_id)

    def _prepare_start(self, job: j.InitializeWorkflow) -> None:
        """The run's info and input, before any job runs (a handler may run first)."""
        event = job.event
        attrs = event.attributes
        self._info = info_from_start(self, attrs, event.event_time, self._now)
        self._start_attrs = attrs
        self._start_args = self.start_args((attrs.get("input") or {}).get("payloads"))

    def _ensure_object(self) -> None:
        """Make the workflow object the first time code is about to run."""
        if self._object is None and self._start_args is not None:
            cls = self.defn.cls
            self._object = cls(*self._start_args) if self.defn.init_takes_args else cls()

    def _apply_initialize_workflow(self, job: j.InitializeWorkflow) -> None:
        self._ensure_object()
        run = getattr(self._object, self.defn.run_fn.__name__)
        self._main = self.create_task(
            run(*(self._start_args or [])), name=f"workflow:{self.defn.name}"
        )

    def release(self) -> bool:
        """Let go of the finished main task, for a completed run that is being dropped
        with no handler still running; whether it was one (else its code still waits:
        ``engine._replay.teardown``).

        The task refers to this instance as its event loop, and the instance to the task: a
        cycle that only the garbage collector would free, with the run's coroutine, its
        workflow object and everything they hold (about thirty objects a run). Without it
        reference counting frees the run as soon as the worker drops it, and the
        collector's passes stay short."""
        if self.completed and not self._tasks:  # (a handler still running: not yet)
            self._main = None
            return True
        return False

    def _apply_fire_timer(self, job: j.FireTimer) -> None:
        handle = self._timers.pop(job.seq, None)
        if handle is not None and not handle.cancelled():
            self._ready.append(handle)

    def _apply_cancel_workflow(self, job: j.CancelWorkflow) -> None:
        self._cancel_requested = True
        if self._main is not None and not self._main.done():
            self._main.cancel()

    def _run_until_blocked(self, check: Callable[[], bool] | None = None) -> None:
        """Run ready callbacks until none is left and no condition (checked when ``check``
        says so, after the ready ones ran) lets more code run."""
        while True:
            while self._ready:
                handle = self._ready.popleft()
                if not handle._cancelled:
                    handle._run()
                if self._callback_error is not None:
                    err, self._callback_error = self._callback_error, None
                    raise WorkflowTaskError(err)
            if (check is not None and not check()) or not self._check_conditions():
                return

    def _accepted_an_update(self) -> bool:
        return any(isinstance(c, cmd.AcceptUpdate) for c in self._commands)

    def _check_conditions(self) -> bool:
        progressed = False
        for entry in list(self._conditions):
            fn, fut = entry
            if fut.done():
                self._conditions.remove(entry)
                continue
            try:
                ok = fn()
            except Exception as err:
                raise WorkflowTaskError(err) from err
            if ok:
                self._conditions.remove(entry)
                fut.set_result(None)
                progressed = True
        return progressed

    def _check_main(self) -> None:
        if self._handler_failure is not None and self._closing is None:
            ended = self._handler_failure
            command: cmd.Command = (
                self._continue_as_new_command(ended)
                if isinstance(ended, workflow.ContinueAsNewError)
                else cmd.FailWorkflowExecution(self.converter.to_failure(ended))
            )
            self._closing = command
            self._commands.append(command)
            self.completed = True
            if not self._replaying:
                self.warn_unfinished_handlers()
            return
        main = self._main
        if main is None or not main.done() or self._closing is not None:
            return
        if main.cancelled():
            if not self._cancel_requested:
                raise WorkflowTaskError(RuntimeError("workflow's main task was cancelled"))
            command = cmd.CancelWorkflowExecution()
        else:
            exc = main.exception()
            if exc is None:
                result = main.result()
                command = cmd.CompleteWorkflowExecution(self.converter.to_payloads_json([result]))
            elif isinstance(exc, workflow.ContinueAsNewError):
                command = self._continue_as_new_command(exc)
            elif self._cancel_requested and is_cancelled_exception(exc):
                command = cmd.CancelWorkflowExecution()
            elif self.is_failure_exception(exc):
                command = cmd.FailWorkflowExecution(self.converter.to_failure(exc))
            else:
                raise WorkflowTaskError(exc)
        self._closing = command
        self._commands.append(command)
        self.completed = True
        if not self._replaying:
            self.warn_unfinished_handlers()

    # =================================================================================
    # the view from outside (the stepper's)
    # =================================================================================

    def snapshot(self) -> snap.InstanceSnapshot:
        """Where the code is, its locals, the object's attributes and what is pending."""
        source, local_vars = snap.code_position(self._main)
        state = getattr(self._object, "__dict__", None) or {}
        return snap.InstanceSnapshot(
            workflow_time=self._now or None,
            replaying=self._replaying,
            completed=self.completed,
            source=source,
            locals=local_vars,
            attributes={k: snap.safe_repr(v) for k, v in state.items()},
            pending_timers=tuple(
                snap.PendingTimer(seq, str(seq), handle.when())
                for seq, handle in sorted(self._timers.items())
            ),
            pending_activities=tuple(
                snap.PendingActivity(
                    seq, a.command.activity_type, a.command.activity_id, a.scheduled_event_id
                )
                for seq, a in sorted(self._activities.items())
                if not a.result.done()
            ),
            pending_children=tuple(
                snap.PendingChild(
                    seq,
                    c.command.workflow_id,
                    c.command.workflow_type,
                    c.initiated_event_id,
                    c.started_event_id,
                    c.run_id,
                )
                for seq, c in sorted(self._children.items())
                if not c.result.done()
            ),
            running_handlers=self._handlers_running,
            waiting_conditions=sum(1 for _, fut in self._conditions if not fut.done()),
        )

    # =================================================================================
    # the Runtime API used by engine.workflow
    # =================================================================================

    def info(self) -> workflow.Info:
        """Information about this run."""
        assert self._info is not None
        return self._info

    def now(self) -> datetime:
        """Workflow time."""
        return datetime.fromtimestamp(self._now, UTC)

    def random(self) -> _random.Random:
        """The run's deterministic random generator, seeded from the run id."""
        if self._rng is None:
            self._rng = _random.Random(self.random_seed())
        return self._rng

    def random_seed(self) -> int:
        """The seed of :meth:`random`: from the run id, so the same on every replay."""
        run_id = self.run_id
        return uuid.UUID(run_id).int if _is_uuid(run_id) else zlib.crc32(run_id.encode())

    def instance(self) -> Any:
        """The workflow object."""
        return self._object

    def payload_converter(self) -> Any:
        """The data converter's payload converter."""
        return self.converter.payload_converter

    def current_details(self, new: str | None = None) -> str:
        """The run's current details; set them when ``new`` is given."""
        if new is not None:
            self._details = new
        return self._details

    def memo(self) -> dict[str, Any]:
        """The memo the run started with, decoded."""
        raw = self.info().raw_memo
        return {key: self.converter.from_payloads_json([value])[0] for key, value in raw.items()}

    def _memo_json(self, memo: Mapping[str, Any] | None) -> JsonDict | None:
        """A memo given to a child or a continue-as-new, as Temporal's ``Memo`` JSON."""
        if not memo:
            return None
        fields: dict[str, JsonDict] = {}
        for key, value in memo.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(f"memo keys are strings, not {type(key).__name__}")
            fields[key] = self.converter.to_payloads_json([value])[0]
        return {"fields": fields}

    def upsert_memo(self, updates: Any) -> None:
        """Record memo changes and apply them to ``info().raw_memo`` (None removes a key)."""
        fields: dict[str, JsonDict] = {}
        items = dict(updates).items()
        for key, value in items:  # all converted before anything changes
            if not isinstance(key, str):
                raise InvalidArgumentError(f"memo keys are strings, not {type(key).__name__}")
            fields[key] = self.converter.to_payloads_json([value])[0]
        raw = self.info().raw_memo
        for key, value in items:
            if value is None:
                raw.pop(key, None)  # type: ignore[attr-defined]
            else:
                raw[key] = fields[key]  # type: ignore[index]
        if fields:
            self._commands.append(cmd.ModifyWorkflowProperties(fields))

    def upsert_search_attributes(self, updates: Any) -> None:
        """Record search attribute changes and apply them to ``info()`` (an unset
        removes one), as temporalio does: the untyped dict in place, the typed collection
        replaced on the (frozen) info object."""
        fields = search_attributes.encode_updates(updates)  # all checked before any change
        if not fields:
            return
        info = self.info()
        untyped = info.search_attributes
        typed = info.typed_search_attributes
        for name, values in search_attributes.decode(fields).items():
            untyped[name] = values  # type: ignore[index]
        unset = {n for n, p in fields.items() if search_attributes.is_unset(p)}
        kept = [pair for pair in typed if pair.key.name not in fields]
        new = [p for p in search_attributes.decode_typed(fields) if p.key.name not in unset]
        object.__setattr__(info, "typed_search_attributes", TypedSearchAttributes([*kept, *new]))
        self._commands.append(cmd.UpsertWorkflowSearchAttributes(fields))

    def memo_value(self, key: str, default: Any, type_hint: type | None) -> Any:
        """One memo value, decoded; ``default`` (or KeyError) when absent."""
        raw = self.info().raw_memo
        if key not in raw:
            if default is workflow._NO_DEFAULT:
                raise KeyError(f"the run's memo has no key {key!r} (it has: {sorted(raw)})")
            return default
        return self.converter.from_payloads_json([raw[key]], [type_hint])[0]

    def is_failure_exception(self, err: BaseException) -> bool:
        """Whether ``err`` out of the workflow fails the run (a Temporal failure)."""
        return isinstance(err, (FailureError, *self.failure_types))

    def last_completion_result(self, type_hint: type | None) -> tuple[bool, Any]:
        """(whether there is one, the value): the previous completed cron run's result."""
        payloads = (self._start_attrs.get("lastCompletionResult") or {}).get("payloads")
        if not payloads:
            return False, None
        return True, self.converter.from_payloads_json(payloads, [type_hint])[0]

    def last_failure(self) -> BaseException | None:
        """The previous run's failure (a cron run after a failed one, or a retry)."""
        failure = self._start_attrs.get("continuedFailure")
        return self.converter.from_failure(failure) if failure else None

    def is_replaying(self) -> bool:
        """Whether the current activation replays recorded history."""
        return self._replaying

    def history_length(self) -> int:
        """Events so far."""
        return self._history_length

    def history_size(self) -> int:
        """History bytes so far."""
        return self._history_size

    def continue_as_new_suggested(self) -> bool:
        """Whether the service suggests continuing as new."""
        return self._suggest_can

    def all_handlers_finished(self) -> bool:
        """No async signal/update handler is still running."""
        return self._handlers_running == 0

    async def wait_condition(
        self, fn: Callable[[], bool], timeout: float | None, timeout_summary: str | None = None
    ) -> None:
        """Block until ``fn()`` holds (its timeout timer recorded with ``timeout_summary``)."""
        fut: asyncio.Future[None] = self.create_future()
        self._conditions.append((fn, fut))
        if timeout is None:
            await fut
        else:
            self._summarise_next_timer(timeout_summary)
            await asyncio.wait_for(fut, timeout)

    async def sleep(self, seconds: float, summary: str) -> None:
        """``workflow.sleep(..., summary=)``: a timer whose event carries the summary."""
        self._summarise_next_timer(summary)
        await asyncio.sleep(seconds)

    def _summarise_next_timer(self, summary: str | None) -> None:
        # asyncio.sleep and wait_for call the loop's call_later before they first yield:
        # the timer they create takes the summary (call_later clears it either way).
        self._next_timer_metadata = self._user_metadata(summary)

    def _user_metadata(self, summary: str | None, details: str | None = None) -> JsonDict | None:
        """Temporal's ``UserMetadata`` for a command: payloads through the converter."""
        return user_metadata_json(self.converter, summary, details)

    def patched(self, patch_id: str, deprecated: bool) -> bool:
        """Versioning marker logic (see engine.workflow.patched and versioning.py)."""
        use_new, commands = self.versioning.patched(patch_id, deprecated, replaying=self._replaying)
        self._commands.extend(commands)
        return use_new

    def note_recorded_flags(self, flags: Sequence[int]) -> None:
        """The history recorded these SDK flags (in a ``WorkflowTaskCompleted``)."""
        self.versioning.note_recorded_flags(flags)

    def take_sdk_flags(self) -> list[int]:
        """The SDK flags to record in this activation's workflow task completion."""
        return self.versioning.take_sdk_flags()

    def continue_as_new_error(self, args: Sequence[Any], options: dict[str, Any]) -> BaseException:
        """Build the exception that unwinds the workflow into a continue-as-new."""
        return workflow.ContinueAsNewError(args, options)

    def _continue_as_new_command(
        self, exc: workflow.ContinueAsNewError
    ) -> cmd.ContinueAsNewWorkflowExecution:
        opts = exc.options
        target = opts.get("workflow")
        wf_type = self.info().workflow_type if target is None else workflow.definition_name(target)
        policy = opts.get("retry_policy")
        return cmd.ContinueAsNewWorkflowExecution(
            workflow_type=wf_type,
            task_queue=opts.get("task_queue") or self.task_queue,
            input=self.converter.to_payloads_json(exc.input_args),
            run_timeout=opts.get("run_timeout"),
            task_timeout=opts.get("task_timeout"),
            backoff_start_interval=opts.get("backoff_start_interval"),
            retry_policy=policy.to_json() if policy is not None else None,
            memo=self._memo_json(opts.get("memo")),
            search_attributes=opts.get("search_attributes"),
        )

    # -- activities ---------------------------------------------------------------------

    def start_activity(
        self, activity: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> workflow.ActivityHandle[Any]:
        """Emit ScheduleActivityTask and return a handle resolving with the result."""
        name = workflow.activity_name(activity)
        result_type = options.get("result_type")
        if result_type is None and not isinstance(activity, str):
            from .._model.definitions import ActivityDefinition

            result_type = ActivityDefinition.of(activity).return_type
        self._activity_seq += 1
        seq = self._activity_seq
        policy: RetryPolicy = options.get("retry_policy") or RetryPolicy()
        command = cmd.ScheduleActivityTask(
            seq=seq,
            activity_id=options.get("activity_id") or str(seq),
            activity_type=name,
            task_queue=options.get("task_queue") or self.task_queue,
            input=self.converter.to_payloads_json(args),
            schedule_to_close=options.get("schedule_to_close"),
            schedule_to_start=options.get("schedule_to_start"),
            start_to_close=options.get("start_to_close"),
            heartbeat_timeout=options.get("heartbeat"),
            retry_policy=policy.to_json(),
            user_metadata=self._user_metadata(options.get("summary")),
        )
        self._commands.append(command)
        pending = _PendingActivity(
            seq=seq,
            command=command,
            result=self.create_future(),
            cancellation_type=options.get("cancellation_type")
            or ActivityCancellationType.TRY_CANCEL,
            result_type=result_type,
        )
        self._activities[seq] = pending
        return workflow.ActivityHandle(self._await_activity(pending), loop=self)

    async def _await_activity(self, pending: _PendingActivity) -> Any:
        return await until_resolved(pending.result, lambda: self._cancel_activity(pending))

    def _cancel_activity(self, pending: _PendingActivity) -> None:
        if pending.cancel_sent:
            return
        pending.cancel_sent = True
        if pending.command in self._commands and pending.scheduled_event_id is None:
            # Never sent: take the command back and report a cancelled activity.
            self._commands.remove(pending.command)
            self._activities.pop(pending.seq, None)
            pending.result.set_exception(self._activity_cancelled_error(pending))
            return
        if pending.cancellation_type != ActivityCancellationType.ABANDON:
            self._commands.append(
                cmd.RequestCancelActivityTask(
                    seq=pending.seq, scheduled_event_id=pending.scheduled_event_id or 0
                )
            )
        if pending.cancellation_type != ActivityCancellationType.WAIT_CANCELLATION_COMPLETED:
            pending.result.set_exception(self._activity_cancelled_error(pending))

    def _activity_cancelled_error(self, pending: _PendingActivity) -> ActivityError:
        err = ActivityError(
            "Activity cancelled",
            scheduled_event_id=pending.scheduled_event_id or 0,
            started_event_id=0,
            identity="",
            activity_type=pending.command.activity_type,
            activity_id=pending.command.activity_id,
            retry_state=RetryState.CANCEL_REQUESTED,
        )
        err.__cause__ = CancelledError("Activity cancelled")
        return err

    def activity_scheduled(self, seq: int, scheduled_event_id: int) -> None:
        """The ScheduleActivityTask command with ``seq`` was recorded as this event."""
        pending = self._activities.get(seq)
        if pending is not None:
            pending.scheduled_event_id = scheduled_event_id
        self._activities_by_event[scheduled_event_id] = seq

    def activity_seq(self, scheduled_event_id: int) -> int | None:
        """The activity seq recorded at ``scheduled_event_id``."""
        return self._activities_by_event.get(scheduled_event_id)

    def _apply_resolve_activity(self, job: j.ResolveActivity) -> None:
        pending = self._activities.pop(job.seq, None)
        if pending is None or pending.result.done():
            return
        event = job.event
        attrs = event.attributes
        if event.event_type == "ActivityTaskCompleted":
            payloads = (attrs.get("result") or {}).get("payloads") or []
            values = self.converter.from_payloads_json(payloads, [pending.result_type])
            pending.result.set_result(values[0] if values else None)
            return
        if event.event_type == "ActivityTaskCanceled":
            pending.scheduled_event_id = int(attrs.get("scheduledEventId", 0))
            pending.result.set_exception(self._activity_cancelled_error(pending))
            return
        failure = attrs.get("failure") or {}
        retry_state = attrs.get("retryState")
        wrapper = {
            "message": "Activity task failed"
            if event.event_type == "ActivityTaskFailed"
            else "Activity task timed out",
            "cause": failure,
            "activityFailureInfo": {
                "scheduledEventId": str(attrs.get("scheduledEventId", "0")),
                "startedEventId": str(attrs.get("startedEventId", "0")),
                "identity": attrs.get("identity", ""),
                "activityType": {"name": pending.command.activity_type},
                "activityId": pending.command.activity_id,
                "retryState": retry_state or "RETRY_STATE_UNSPECIFIED",
            },
        }
        pending.result.set_exception(self.converter.from_failure(wrapper))

    def __repr__(self) -> str:
        return f"<WorkflowInstance {self.defn.name} {self.workflow_id}/{self.run_id}>"

    # -- timers -------------------------------------------------------------------------

    def timer_seq(self, timer_id: str) -> int | None:
        """The seq of a timer id, if that timer is pending."""
        try:
            seq = int(timer_id)
        except ValueError:
            return None
        return seq if seq in self._timers else None


#: The method that applies each kind of job. Every kind of :data:`~.jobs.Job` must have
#: one: a kind without one fails the import below, an object of another type the activation.
_APPLIERS: dict[type, Callable[[WorkflowInstance, Any], None]] = {
    j.NotifyHasPatch: WorkflowInstance._apply_notify_has_patch,
    j.InitializeWorkflow: WorkflowInstance._apply_initialize_workflow,
    j.FireTimer: WorkflowInstance._apply_fire_timer,
    j.ResolveActivity: WorkflowInstance._apply_resolve_activity,
    j.ResolveChildWorkflowExecutionStart: (
        WorkflowInstance._apply_resolve_child_workflow_execution_start
    ),
    j.ResolveChildWorkflowExecution: WorkflowInstance._apply_resolve_child_workflow_execution,
    j.ResolveLocalActivity: WorkflowInstance._apply_resolve_local_activity,
    j.ResolveSignalExternalWorkflow: WorkflowInstance._apply_resolve_signal_external_workflow,
    j.ResolveRequestCancelExternalWorkflow: (
        WorkflowInstance._apply_resolve_request_cancel_external_workflow
    ),
    j.SignalWorkflow: WorkflowInstance._apply_signal_workflow,
    j.DoUpdate: WorkflowInstance._apply_do_update,
    j.CancelWorkflow: WorkflowInstance._apply_cancel_workflow,
}


def _never() -> bool:
    return False


#: The batch of an activation a job is applied in (temporalio's order): patches (0), then
#: signals and updates (1), then every other kind (2).
_BATCH: dict[type, int] = {j.NotifyHasPatch: 0, j.SignalWorkflow: 1, j.DoUpdate: 1}
if _APPLIERS.keys() != set(get_args(Job)):
    raise TypeError(
        "WorkflowInstance applies jobs "
        f"{sorted(t.__name__ for t in _APPLIERS)}, the kinds are "
        f"{sorted(t.__name__ for t in get_args(Job))}"
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def _task_fails_on_error() -> Iterator[None]:
    """An exception (not a workflow-task outcome already) becomes a workflow task failure."""
    try:
        yield
    except (WorkflowTaskError, NondeterminismError):
        raise
    except Exception as err:
        raise WorkflowTaskError(err) from err
