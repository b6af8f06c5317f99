"""The worker: polls a task queue and runs the workflow and activity code registered on it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from types import TracebackType
from typing import Any

from ._model.definitions import ActivityDefinition, WorkflowDefinition, check_one_dynamic
from ._model.limits import check_id
from ._replay.handlers import WorkflowTaskError
from ._replay.replayer import replay_events
from ._replay.stepper import ReplaySession, Snapshot
from ._worker.activities import ActivityRunner
from ._worker.metrics import WorkerMetrics
from ._worker.workflows import WorkflowRunner
from .client import Client
from .converter import DataConverter
from .exceptions import InvalidArgumentError, NamespaceNotFoundError, StoreUnavailableError
from .history import WorkflowHistory

__all__ = [
    "ReplaySession",
    "Replayer",
    "SandboxedWorkflowRunner",
    "Snapshot",
    "UnsandboxedWorkflowRunner",
    "Worker",
    "WorkflowReplayResult",
    "WorkflowReplayResults",
]

log = logging.getLogger("engine.worker")

_gc_frozen = False
#: Values of ``DURABLE_GC_FREEZE`` that ask for the freeze (any other leaves it off).
_YES = frozenset({"1", "true", "yes", "on"})


def _freeze_startup_objects(asked: bool | None) -> None:
    """Once per process, when the first worker that asks for it starts: collect, then move
    the objects alive now (mostly the modules loaded so far: SQLAlchemy alone brings tens of
    thousands) out of the cyclic garbage collector's sight with :func:`gc.freeze`.

    A busy worker keeps many objects alive for a short while, so the collector's full passes
    come often, and each walked every object in the process: about a tenth of a busy
    worker's time went there. Frozen objects are still freed when their last reference
    goes; only a reference cycle among them would stay.

    The collector is the host's, not the engine's, so this is opt-in: ``asked`` is
    ``Worker(freeze_gc=...)``; when that is None, ``DURABLE_GC_FREEZE=1`` asks, except in a
    Jupyter kernel (``ipykernel`` loaded), which inherits its server's environment and whose
    live objects are the user's session: there only ``freeze_gc=True`` freezes.
    """
    global _gc_frozen
    if _gc_frozen:
        return
    if asked is None:
        asked = (
            os.environ.get("DURABLE_GC_FREEZE", "").strip().lower() in _YES
            and "ipykernel" not in sys.modules
        )
    if not asked:
        return
    _gc_frozen = True
    gc.collect()
    gc.freeze()


class UnsandboxedWorkflowRunner:
    """``temporalio.worker.UnsandboxedWorkflowRunner``, accepted as ``Worker(workflow_runner=
    ...)``: workflows run without an import sandbox, which is what this engine always does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Takes (and ignores) ``temporalio``'s arguments."""


class SandboxedWorkflowRunner(UnsandboxedWorkflowRunner):
    """``temporalio``'s sandboxed runner, accepted so Temporal code runs unchanged: this
    engine has no import sandbox (determinism comes from its event loop, which refuses
    real time, threads and I/O in workflow code, and from replay), so it runs workflows
    as :class:`UnsandboxedWorkflowRunner` does."""


def _check_runners(runners: dict[str, Any], interceptors: Sequence[Any]) -> None:
    """``workflow_runner`` / ``unsandboxed_workflow_runner`` and ``interceptors``, as
    :class:`Worker` and :class:`Replayer` take them."""
    for option, runner in runners.items():
        if runner is not None and not isinstance(runner, UnsandboxedWorkflowRunner):
            raise InvalidArgumentError(
                f"{option} must be engine.worker.UnsandboxedWorkflowRunner() or "
                f"SandboxedWorkflowRunner(), not {type(runner).__name__}: this engine "
                "runs workflow code on its own deterministic event loop"
            )
    if interceptors:
        raise InvalidArgumentError(
            "interceptors are not supported by this engine (Temporal's interceptor "
            "chain has no counterpart here); pass interceptors=() or leave it out"
        )


def _exception_types(types: Sequence[Any], option: str) -> tuple[type[BaseException], ...]:
    for t in types:
        if not (isinstance(t, type) and issubclass(t, BaseException)):
            raise InvalidArgumentError(f"{option} takes exception classes, not {t!r}")
    return tuple(types)


class Worker:
    """Runs workflows and activities for one task queue, polling the shared store.

    Use ``async with Worker(...)`` (runs in the background for the block) or
    ``await worker.run()``. Unless ``run_service=False``, the worker also hosts the
    service's timer loop, so a plain script needs nothing else.

    Workflow code runs on a thread of the worker's own, one activation at a time; one that
    does not yield within ``deadlock_timeout`` fails its workflow task at once with where it
    is (``debug_mode=True`` lifts the limit, for stepping through in a debugger).

    ``freeze_gc=True`` lets the first such worker of the process :func:`gc.freeze` the
    objects alive when it starts (after a collection), which saves a busy worker the
    collector's walks over every loaded module; it changes the whole process's collector,
    so it is off unless asked for (``None`` follows ``DURABLE_GC_FREEZE=1``, outside a
    Jupyter kernel). Worth it in a process that exists to run workers.

    ``temporalio``'s options are taken with its names and defaults where they mean something
    here (``max_concurrent_*``, ``identity``, ``graceful_shutdown_timeout``, ``debug_mode``,
    ``activity_executor``, ``disable_eager_activity_execution``, ``no_remote_activities``
    (its activities run only as its workflows' local activities), ``on_fatal_error``
    (awaited with the error when a poll loop dies, before the worker shuts down),
    ``workflow_failure_exception_types``: exceptions that fail a run instead of its
    workflow task, added to each workflow's own); ``workflow_runner`` and
    ``unsandboxed_workflow_runner`` accept :class:`UnsandboxedWorkflowRunner` or
    :class:`SandboxedWorkflowRunner` (there is no sandbox), ``interceptors`` only empty. An
    option this engine does not know is a ``TypeError`` naming it.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        workflows: Sequence[type] = (),
        activities: Sequence[Callable[..., Any]] = (),
        activity_executor: ThreadPoolExecutor | None = None,
        max_concurrent_workflow_tasks: int = 100,
        max_concurrent_activities: int = 100,
        max_cached_workflows: int = 1000,
        identity: str | None = None,
        graceful_shutdown_timeout: timedelta = timedelta(0),
        debug_mode: bool = False,
        deadlock_timeout: timedelta = timedelta(seconds=2),
        poll_interval: timedelta = timedelta(milliseconds=200),
        run_service: bool = True,
        freeze_gc: bool | None = None,
        workflow_runner: UnsandboxedWorkflowRunner | None = None,
        unsandboxed_workflow_runner: UnsandboxedWorkflowRunner | None = None,
        interceptors: Sequence[Any] = (),
        max_concurrent_local_activities: int = 100,
        disable_eager_activity_execution: bool = False,
        workflow_failure_exception_types: Sequence[type[BaseException]] = (),
        no_remote_activities: bool = False,
        on_fatal_error: Callable[[BaseException], Awaitable[None]] | None = None,
    ) -> None:
        check_id(task_queue, "task_queue")
        if identity is not None:
            check_id(identity, "identity")
        _check_runners(
            {
                "workflow_runner": workflow_runner,
                "unsandboxed_workflow_runner": unsandboxed_workflow_runner,
            },
            interceptors,
        )
        if not workflows and not activities:
            raise InvalidArgumentError(
                "a Worker needs at least one workflow or activity: pass workflows=[...] "
                "and/or activities=[...]"
            )
        for name, value in (
            ("max_concurrent_workflow_tasks", max_concurrent_workflow_tasks),
            ("max_concurrent_activities", max_concurrent_activities),
            ("max_cached_workflows", max_cached_workflows),
            ("max_concurrent_local_activities", max_concurrent_local_activities),
        ):
            if value < 1:
                raise InvalidArgumentError(f"{name} must be at least 1 (got {value})")
        self.client = client
        self.task_queue = task_queue
        self.identity = identity or client.identity
        self.metrics = WorkerMetrics()
        self._workflow_defs: dict[str, WorkflowDefinition] = {}
        for cls in workflows:
            defn = WorkflowDefinition.of(cls)
            if defn.name in self._workflow_defs and self._workflow_defs[defn.name].cls is not cls:
                raise InvalidArgumentError(f"two workflows are named {defn.name!r}")
            check_one_dynamic(self._workflow_defs, defn, "workflow")
            self._workflow_defs[defn.name] = defn
        self._activity_defs: dict[str, ActivityDefinition] = {}
        for fn in activities:
            if isinstance(fn, type):
                raise InvalidArgumentError(
                    f"activities=[{fn.__name__}] passes the class: pass an instance of it "
                    f"(activities=[{fn.__name__}(...)]), which the worker calls"
                )
            adefn = ActivityDefinition.of(fn)
            if adefn.name in self._activity_defs and self._activity_defs[adefn.name].fn != fn:
                raise InvalidArgumentError(f"two activities are named {adefn.name!r}")
            check_one_dynamic(self._activity_defs, adefn, "activity")
            self._activity_defs[adefn.name] = adefn
        self._grace = graceful_shutdown_timeout.total_seconds()
        self._run_service = run_service
        self._freeze_gc = freeze_gc
        poll = poll_interval.total_seconds()
        self._workflows: WorkflowRunner | None = None
        self._activities: ActivityRunner | None = None
        if self._workflow_defs:
            self._workflows = WorkflowRunner(
                client.service,
                namespace=client.namespace,
                task_queue=task_queue,
                definitions=self._workflow_defs,
                converter=client.data_converter,
                identity=self.identity,
                max_concurrent=max_concurrent_workflow_tasks,
                max_cached=max_cached_workflows,
                deadlock_timeout=3600.0 if debug_mode else deadlock_timeout.total_seconds(),
                poll_interval=poll,
                metrics=self.metrics,
                eager_activities=not (disable_eager_activity_execution or no_remote_activities),
                local_activities=self._activity_defs,
                client=client,
                failure_exception_types=_exception_types(
                    workflow_failure_exception_types, "workflow_failure_exception_types"
                ),
                local_executor=activity_executor,
                max_concurrent_local=max_concurrent_local_activities,
            )
        self._activity_args = {
            "max_concurrent": max_concurrent_activities,
            "poll_interval": poll,
            "executor": activity_executor,
        }
        #: Worker(no_remote_activities=True): its activities run only as local activities
        #: of its workflows; it never polls the task queue's activity tasks.
        self._no_remote_activities = bool(no_remote_activities)
        #: Awaited with the error when a poll loop dies (before the worker shuts down).
        self._on_fatal_error = on_fatal_error
        self._fatal: BaseException | None = None
        self._fatal_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._validated = False

    @property
    def workflow_types(self) -> list[str]:
        """Names of the registered workflow types."""
        return sorted(self._workflow_defs)

    @property
    def activity_types(self) -> list[str]:
        """Names of the registered activity types."""
        return sorted(self._activity_defs)

    @property
    def is_running(self) -> bool:
        """Whether the worker is polling."""
        return self._running

    def register_workflow(self, cls: type) -> None:
        """Add or replace a workflow definition while running (re-run notebook cells).

        Cached runs of that type are evicted, so they replay against the new code.
        """
        defn = WorkflowDefinition.of(cls)
        if self._workflows is None:
            raise InvalidArgumentError("this worker was created without workflows")
        check_one_dynamic(self._workflow_defs, defn, "workflow")
        self._workflows.replace_definition(defn)
        if self._running:
            self._expedite(defn.name)

    def register_activity(self, fn: Callable[..., Any]) -> None:
        """Add or replace an activity while running (re-run notebook cells).

        Attempts already running keep the old function; the next ones use the new one.
        """
        defn = ActivityDefinition.of(fn)
        check_one_dynamic(self._activity_defs, defn, "activity")
        self._activity_defs[defn.name] = defn  # shared with the activity runner

    def _expedite(self, workflow_type: str) -> None:
        async def go() -> None:
            try:
                await self.client.service.retry_workflow_tasks_now(
                    self.client.namespace, workflow_type
                )
            except Exception as err:  # best effort: the normal backoff still applies
                log.debug("could not expedite retries of %s: %s", workflow_type, err)

        self._tasks.append(asyncio.get_running_loop().create_task(go()))

    def start(self) -> None:
        """Start polling in the background of the running event loop."""
        if self._running:
            return
        loop = asyncio.get_running_loop()
        self._running = True
        if not self._validated:  # run() and ``async with`` have checked already
            self._poll_loop(loop.create_task(self._validate(), name="durable-validate"))
        _freeze_startup_objects(self._freeze_gc)
        if self._run_service:
            self.client._acquire_host()
        if self._workflows is not None:
            self._poll_loop(loop.create_task(self._workflows.run(), name="durable-wft-poll"))
            # Runs whose tasks kept failing may be fixed by this worker's code: retry now.
            for name in self._workflow_defs:
                self._expedite(name)
        if self._activity_defs and not self._no_remote_activities:
            self._activities = ActivityRunner(
                self.client.service,
                namespace=self.client.namespace,
                task_queue=self.task_queue,
                definitions=self._activity_defs,
                converter=self.client.data_converter,
                identity=self.identity,
                metrics=self.metrics,
                client=self.client,
                **self._activity_args,  # type: ignore[arg-type]
            )
            self._poll_loop(loop.create_task(self._activities.run(), name="durable-activity-poll"))

    async def _validate(self) -> None:
        """Check that the client's namespace exists (as ``temporalio``'s worker does
        before it polls): a worker of a namespace no one can start runs in would wait
        forever."""
        namespace = self.client.namespace
        try:
            await self.client.service.describe_namespace(namespace)
        except StoreUnavailableError as err:
            # The database is down: the poll loops ride the outage out, and a namespace
            # that is not there shows as soon as anything is started in it.
            log.warning("worker validation skipped: %s", err)
            return
        except NamespaceNotFoundError as err:
            raise RuntimeError(
                f"Worker validation failed: Namespace {namespace} was not found or otherwise "
                f"could not be described: {err}"
            ) from err
        self._validated = True

    def _poll_loop(self, task: asyncio.Task[None]) -> None:
        """Keep a poll loop; one that dies (not cancelled) is the worker's fatal error."""
        self._tasks.append(task)

        def ended(done: asyncio.Task[None]) -> None:
            err = None if done.cancelled() else done.exception()
            if err is not None:
                self._fatal_error(err)

        task.add_done_callback(ended)

    async def run(self) -> None:
        """Poll until cancelled or :meth:`shutdown`. A poll loop that dies is the
        worker's fatal error: ``on_fatal_error`` is awaited with it, the worker shuts
        down, and this raises it."""
        await self._validate()
        self.start()
        try:
            await asyncio.gather(*self._tasks)
        except Exception as err:
            await self._fatal_error(err)
            raise
        finally:
            await self.shutdown()

    def _fatal_error(self, err: BaseException) -> asyncio.Task[None]:
        """Report the worker's fatal error once (``on_fatal_error``); the task doing it."""
        if self._fatal_task is None:
            self._fatal = err
            log.error("the worker of task queue %r failed: %r", self.task_queue, err)
            self._fatal_task = asyncio.ensure_future(self._call_fatal_handler(err))
        return self._fatal_task

    async def _call_fatal_handler(self, err: BaseException) -> None:
        if self._on_fatal_error is not None:
            try:
                await self._on_fatal_error(err)
            except Exception:  # as temporalio: logged, and the shutdown goes on
                log.warning("the worker's on_fatal_error handler failed", exc_info=True)

    async def shutdown(self) -> None:
        """Stop polling, finish or cancel work in flight, and release the timer loop."""
        if not self._running:
            return
        self._running = False
        if self._fatal_task is not None:  # the handler runs before the shutdown
            await self._fatal_task
        # Let the poll loops end by themselves: a poll already in flight has claimed
        # tasks in the database, and cancelling it would strand them until they time out.
        if self._workflows is not None:
            self._workflows.begin_stop()
        if self._activities is not None:
            self._activities.begin_stop()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        if self._workflows is not None:
            await self._workflows.stop()
        if self._activities is not None:
            await self._activities.stop(self._grace)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            # A loop that died is the fatal error, reported already (run() and
            # __aexit__ raise it once the worker is down).
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._run_service:
            await self.client._release_host()

    async def __aenter__(self) -> Worker:
        await self._validate()
        self.start()
        # One turn of the loop: the runners register for hand-offs as their tasks begin,
        # so a start right after this is handed to them (a change may not yield: on
        # SQLite a lone one commits on this thread).
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
        if exc is None and self._fatal is not None:
            raise self._fatal


@dataclass
class WorkflowReplayResult:
    """The result of replaying one history (``replay_failure`` is None when it replayed)."""

    history: WorkflowHistory
    replay_failure: Exception | None


@dataclass
class WorkflowReplayResults:
    """Results of replaying several histories, keyed by run id."""

    replay_failures: dict[str, Exception] = field(default_factory=dict)
    results: list[WorkflowReplayResult] = field(default_factory=list)


class Replayer:
    """Replays recorded histories against workflow code: the deploy-safety check.

    A history written by an older version of a workflow must replay without a
    non-determinism error against the new code before that code is deployed. Histories
    may come from this engine or from a Temporal cluster (``WorkflowHistory.from_json``).

    ``workflow_runner``, ``unsandboxed_workflow_runner`` and ``interceptors`` are taken as
    :class:`Worker` takes them. ``namespace`` is what replayed code sees as
    ``workflow.info().namespace`` (``"ReplayNamespace"`` by default, as in ``temporalio``);
    ``identity`` is kept (as :attr:`identity`) for code that passes it.
    ``debug_mode`` is accepted: replay has no deadlock limit to lift. An option this
    engine does not know is a ``TypeError`` naming it.
    """

    def __init__(
        self,
        *,
        workflows: Sequence[type],
        workflow_runner: UnsandboxedWorkflowRunner | None = None,
        unsandboxed_workflow_runner: UnsandboxedWorkflowRunner | None = None,
        namespace: str = "ReplayNamespace",
        data_converter: DataConverter | None = None,
        interceptors: Sequence[Any] = (),
        identity: str | None = None,
        workflow_failure_exception_types: Sequence[type[BaseException]] = (),
        debug_mode: bool = False,
    ) -> None:
        if not workflows:
            raise InvalidArgumentError("a Replayer needs the workflow classes to replay")
        _check_runners(
            {
                "workflow_runner": workflow_runner,
                "unsandboxed_workflow_runner": unsandboxed_workflow_runner,
            },
            interceptors,
        )
        self.namespace = namespace
        self.identity = identity
        self.debug_mode = debug_mode
        self._definitions: dict[str, WorkflowDefinition] = {}
        for cls in workflows:
            defn = WorkflowDefinition.of(cls)
            check_one_dynamic(self._definitions, defn, "workflow")
            self._definitions[defn.name] = defn
        self._converter = data_converter or DataConverter.default
        self._failure_types = _exception_types(
            workflow_failure_exception_types, "workflow_failure_exception_types"
        )

    async def replay_workflow(
        self, history: WorkflowHistory, *, raise_on_replay_failure: bool = True
    ) -> WorkflowReplayResult:
        """Replay one history. A non-determinism error (or an exception in workflow code
        during replay) is raised, or returned in the result when
        ``raise_on_replay_failure=False``."""
        try:
            outcome = replay_events(
                history.events,
                self._definitions,
                self._converter,
                workflow_id=history.workflow_id,
                failure_types=self._failure_types,
                namespace=self.namespace,
            )
        except InvalidArgumentError as err:  # not a history of a workflow we were given
            if raise_on_replay_failure:
                raise
            return WorkflowReplayResult(history, err)
        failure = _public_failure(outcome.failure)
        if failure is not None and raise_on_replay_failure:
            raise failure
        return WorkflowReplayResult(history, failure)

    def debug(self, history: WorkflowHistory) -> ReplaySession:
        """A step-through session over ``history`` (step, step back, run to a breakpoint,
        and at each point the source line, locals, attributes and pending work)."""
        return ReplaySession(
            history.events, self._definitions, self._converter, workflow_id=history.workflow_id
        )

    async def replay_workflows(
        self,
        histories: Iterable[WorkflowHistory] | AsyncIterable[WorkflowHistory],
        *,
        raise_on_replay_failure: bool = True,
    ) -> WorkflowReplayResults:
        """Replay many histories; failures are collected per run id (or raised at once)."""
        results = WorkflowReplayResults()

        async for history in _each(histories):
            result = await self.replay_workflow(
                history, raise_on_replay_failure=raise_on_replay_failure
            )
            results.results.append(result)
            if result.replay_failure is not None:
                results.replay_failures[history.run_id or history.workflow_id] = (
                    result.replay_failure
                )
        return results

    @contextlib.asynccontextmanager
    async def workflow_replay_iterator(
        self, histories: Iterable[WorkflowHistory] | AsyncIterable[WorkflowHistory]
    ) -> AsyncIterator[AsyncIterator[WorkflowReplayResult]]:
        """As ``temporalio``'s: ``async with replayer.workflow_replay_iterator(histories) as
        results: async for result in results: ...``, one :class:`WorkflowReplayResult` per
        history as it is replayed (a failure is in the result, never raised), so a large
        listing (``client.list_workflows(q).map_histories()``) is checked without holding
        every history."""

        async def replayed() -> AsyncGenerator[WorkflowReplayResult, None]:
            async for history in _each(histories):
                yield await self.replay_workflow(history, raise_on_replay_failure=False)

        iterator = replayed()
        try:
            yield iterator
        finally:
            await iterator.aclose()


async def _each(
    histories: Iterable[WorkflowHistory] | AsyncIterable[WorkflowHistory],
) -> AsyncIterator[WorkflowHistory]:
    if isinstance(histories, AsyncIterable):
        async for history in histories:
            yield history
    else:
        for history in histories:
            yield history


def _public_failure(failure: Exception | None) -> Exception | None:
    """Workflow-task errors surface as the exception the workflow code raised."""
    if isinstance(failure, WorkflowTaskError):
        cause = failure.cause
        return cause if isinstance(cause, Exception) else failure
    return failure
