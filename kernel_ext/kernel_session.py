"""The kernel's durable session: a client and workers on a background event loop."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from engine import Client, Worker, WorkflowExecution, WorkflowExecutionDescription
from engine.exceptions import InvalidArgumentError
from engine.history import WorkflowHistory
from engine.worker import Replayer
from engine.workflow import activity_name, definition_name

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "LOOP_THREAD_NAME",
    "DefinitionKind",
    "ReplayReport",
    "Session",
    "WorkerStatus",
    "definition_kind",
]

#: The task queue used when none is named.
DEFAULT_TASK_QUEUE = "notebook"
#: The name of the thread that runs the session's event loop (and its workers).
LOOP_THREAD_NAME = "durable-kernel-loop"
#: How many open run ids a redefinition note names before it shortens the list.
NOTE_MAX_IDS = 10

T = TypeVar("T")
DefinitionKind = Literal["workflow", "activity"]


def definition_kind(obj: object) -> tuple[DefinitionKind, str] | None:
    """``("workflow", type name)`` for a ``@workflow.defn`` class, ``("activity", name)``
    for an ``@activity.defn`` function, ``None`` for anything else."""
    if isinstance(obj, type):
        try:
            return "workflow", definition_name(obj)
        except InvalidArgumentError:
            return None
    if callable(obj):
        try:
            return "activity", activity_name(obj)
        except InvalidArgumentError:
            return None
    return None


@dataclass
class _Queue:
    """What is registered for one task queue, by type name."""

    workflows: dict[str, type] = field(default_factory=dict)
    activities: dict[str, Any] = field(default_factory=dict)

    def table(self, kind: DefinitionKind) -> dict[str, Any]:
        return self.workflows if kind == "workflow" else self.activities


@dataclass
class WorkerStatus:
    """One task queue of the session: what is registered, and its worker if running."""

    task_queue: str
    running: bool
    workflow_types: list[str]
    activity_types: list[str]
    metrics: dict[str, Any] | None


@dataclass
class ReplayReport:
    """The outcome of replaying a recorded run against the kernel's current definitions."""

    workflow_id: str
    run_id: str
    workflow_type: str
    events: int
    failure: Exception | None
    #: Set when the run could not be replayed at all (e.g. its type is not registered).
    problem: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the history replayed without a failure."""
        return self.failure is None and self.problem is None


class Session:
    """One per kernel: a Client and the kernel's Workers on a dedicated event loop thread.

    The loop thread keeps workers polling between cells and while a cell blocks. Every
    engine call goes through :meth:`call`, which runs a coroutine on that loop and waits.
    """

    def __init__(self, url: str | None = None, *, default_task_queue: str = DEFAULT_TASK_QUEUE):
        self.default_task_queue = default_task_queue
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=LOOP_THREAD_NAME, daemon=True)
        self._thread.start()
        self._queues: dict[str, _Queue] = {}
        self._workers: dict[str, Worker] = {}
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.RLock()
        self._closed = False
        try:
            self.client: Client = self.call(Client.connect(url), timeout=60)
        except BaseException:
            self._stop_loop()
            raise

    # -- the background loop ------------------------------------------------------------

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    def _stop_loop(self) -> None:
        if self._loop.is_running() or self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The background event loop that runs the session's client and workers."""
        return self._loop

    @property
    def thread(self) -> threading.Thread:
        """The thread that runs :attr:`loop`."""
        return self._thread

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the background loop and wait for its result (from another thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Session.call() was used from the session's own loop thread")
        if self._closed and not self._thread.is_alive():
            coro.close()
            raise RuntimeError("this durable session is closed: run %load_ext kernel_ext again")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @property
    def database_url(self) -> str:
        """The database URL the session uses (password hidden)."""
        return self.client.database_url

    # -- registering definitions --------------------------------------------------------

    def register(self, objs: Iterable[object], *, task_queue: str | None = None) -> list[str]:
        """Register workflow classes and activity functions for ``task_queue`` (default:
        the session's default queue), replacing definitions with the same type name.

        A running worker of that queue picks them up at once. Returns notes to show the
        user (one per replaced workflow type, naming its open runs).
        """
        queue = task_queue or self.default_task_queue
        items: list[tuple[object, DefinitionKind, str]] = []
        for obj in objs:
            kind = definition_kind(obj)
            if kind is None:
                raise InvalidArgumentError(
                    f"{getattr(obj, '__qualname__', obj)!r} is neither a @workflow.defn class "
                    "nor an @activity.defn function, so it cannot be registered"
                )
            items.append((obj, *kind))
        notes: list[str] = []
        for obj, what, name in items:
            note = self._register_one(obj, what, name, [queue])
            if note:
                notes.append(note)
        return notes

    def pick_up(self, namespace: Mapping[str, object]) -> list[str]:
        """Register definitions that appeared in ``namespace`` since the last call.

        A type name already registered on some queues is replaced there; a new one goes to
        the default queue. Returns the notes to show (see :meth:`register`).
        """
        notes: list[str] = []
        for obj in list(namespace.values()):
            kind = definition_kind(obj)
            if kind is None or self._is_seen(obj):
                continue
            queues = [q for q, reg in self._queues.items() if kind[1] in reg.table(kind[0])]
            note = self._register_one(obj, kind[0], kind[1], queues or [self.default_task_queue])
            if note:
                notes.append(note)
        return notes

    def _is_seen(self, obj: object) -> bool:
        try:
            return obj in self._seen
        except TypeError:  # not weak-referenceable: never auto-registered
            return True

    def _register_one(
        self, obj: object, kind: DefinitionKind, name: str, queues: list[str]
    ) -> str | None:
        replaced = False
        with self._lock:
            for queue in queues:
                table = self._queues.setdefault(queue, _Queue()).table(kind)
                previous = table.get(name)
                replaced = replaced or (previous is not None and previous is not obj)
                table[name] = obj
                if queue in self._workers:
                    self.call(self._apply(queue, kind, obj), timeout=60)
            try:
                self._seen.add(obj)
            except TypeError:
                pass
        if not replaced:
            return None
        if kind == "activity":
            return f"{name}: new activity definition registered; its next attempts use it"
        return self._redefinition_note(name)

    def _redefinition_note(self, name: str) -> str:
        run_ids = self.open_runs(name)
        head = f"{name}: new definition registered; "
        if not run_ids:
            return head + f"no open runs of {name}"
        shown = ", ".join(run_ids[:NOTE_MAX_IDS])
        if len(run_ids) > NOTE_MAX_IDS:
            shown += f", ... ({len(run_ids) - NOTE_MAX_IDS} more)"
        runs = "1 open run" if len(run_ids) == 1 else f"{len(run_ids)} open runs"
        return head + f"{runs} of {name} will replay against it: {shown}"

    def open_runs(self, workflow_type: str) -> list[str]:
        """Workflow ids of the open runs of ``workflow_type``, oldest first."""

        async def collect() -> list[str]:
            query = f"WorkflowType = '{workflow_type}' AND ExecutionStatus = 'Running'"
            return [run.id async for run in self.client.list_workflows(query)]

        return list(reversed(self.call(collect(), timeout=30)))

    async def _apply(self, queue: str, kind: DefinitionKind, obj: Any) -> None:
        worker = self._workers[queue]
        if kind == "workflow" and worker.workflow_types:
            worker.register_workflow(obj)
        elif kind == "activity" and worker.activity_types:
            worker.register_activity(obj)
        else:  # a worker built without that kind of code cannot grow it: build it again
            await worker.shutdown()
            self._workers[queue] = self._new_worker(queue)
            self._workers[queue].start()

    def definitions(self, task_queue: str) -> tuple[list[type], list[Any]]:
        """The workflow classes and activity functions registered for ``task_queue``."""
        reg = self._queues.get(task_queue, _Queue())
        return list(reg.workflows.values()), list(reg.activities.values())

    def workflow_classes(self) -> list[type]:
        """The newest registered class of each workflow type, across all queues."""
        latest: dict[str, type] = {}
        for reg in self._queues.values():
            latest.update(reg.workflows)
        return list(latest.values())

    # -- workers ------------------------------------------------------------------------

    def _new_worker(self, queue: str) -> Worker:
        workflows, activities = self.definitions(queue)
        if not workflows and not activities:
            raise InvalidArgumentError(
                f"nothing is registered for task queue {queue!r}: define a @workflow.defn "
                f"class or @activity.defn function in a cell, or call "
                f"kernel_ext.register(..., task_queue={queue!r})"
            )
        return Worker(self.client, task_queue=queue, workflows=workflows, activities=activities)

    def start_worker(self, task_queue: str | None = None) -> str:
        """Start a worker for ``task_queue`` with everything registered for it; returns a
        one-line message."""
        queue = task_queue or self.default_task_queue
        with self._lock:
            if queue in self._workers:
                return f"a worker is already polling task queue {queue!r}"
            worker = self._new_worker(queue)

            async def start() -> None:
                worker.start()

            self.call(start(), timeout=30)
            self._workers[queue] = worker
        types = ", ".join(worker.workflow_types + worker.activity_types)
        return f"worker started on task queue {queue!r} ({types})"

    def stop_worker(self, task_queue: str | None = None) -> str:
        """Stop the worker of ``task_queue``; returns a one-line message."""
        queue = task_queue or self.default_task_queue
        with self._lock:
            worker = self._workers.pop(queue, None)
            if worker is None:
                return f"no worker is running on task queue {queue!r}"
            self.call(worker.shutdown(), timeout=60)
        return f"worker stopped on task queue {queue!r}"

    def worker(self, task_queue: str | None = None) -> Worker:
        """The running worker of ``task_queue`` (default: the session's default queue), e.g.
        for ``widgets.WorkerMonitor``."""
        queue = task_queue or self.default_task_queue
        worker = self._workers.get(queue)
        if worker is None:
            raise InvalidArgumentError(
                f"no worker is running on task queue {queue!r}: start one with "
                f"%durable worker start --task-queue {queue}"
            )
        return worker

    def workers(self) -> list[WorkerStatus]:
        """Every task queue with registrations or a worker, sorted by name."""
        out: list[WorkerStatus] = []
        for queue in sorted(set(self._queues) | set(self._workers)):
            worker = self._workers.get(queue)
            workflows, activities = self.definitions(queue)
            out.append(
                WorkerStatus(
                    task_queue=queue,
                    running=worker is not None and worker.is_running,
                    workflow_types=sorted(definition_name(w) for w in workflows),
                    activity_types=sorted(activity_name(a) for a in activities),
                    metrics=worker.metrics.snapshot() if worker is not None else None,
                )
            )
        return out

    # -- inspecting runs ----------------------------------------------------------------

    def list_runs(self, query: str | None = None, *, limit: int = 100) -> list[WorkflowExecution]:
        """Runs matching the list filter ``query``, newest first."""

        async def collect() -> list[WorkflowExecution]:
            return [run async for run in self.client.list_workflows(query or None, limit=limit)]

        return self.call(collect(), timeout=30)

    def history(self, workflow_id: str, run_id: str | None = None) -> WorkflowHistory:
        """The history of a run (the latest of ``workflow_id`` unless ``run_id`` is given)."""
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        return self.call(handle.fetch_history(), timeout=30)

    def describe(self, workflow_id: str, run_id: str | None = None) -> WorkflowExecutionDescription:
        """``describe()`` of a run, through the session's own client."""
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        return self.call(handle.describe(), timeout=5)

    def replay(self, workflow_id: str, run_id: str | None = None) -> ReplayReport:
        """Replay a recorded run against the workflow classes registered in this kernel."""
        history = self.history(workflow_id, run_id)
        report = ReplayReport(
            workflow_id=workflow_id,
            run_id=history.run_id,
            workflow_type=history.workflow_type,
            events=len(history),
            failure=None,
        )
        classes = [c for c in self.workflow_classes() if definition_name(c) == report.workflow_type]
        if not classes:
            report.problem = (
                f"workflow type {report.workflow_type!r} is not registered in this kernel: "
                "define it in a cell (or kernel_ext.register it) and replay again"
            )
            return report
        replayer = Replayer(workflows=classes, data_converter=self.client.data_converter)
        result = self.call(
            replayer.replay_workflow(history, raise_on_replay_failure=False), timeout=60
        )
        report.failure = result.replay_failure
        return report

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker, close the client and end the loop thread."""
        if self._closed:
            return
        self._closed = True
        try:
            with self._lock:
                workers, self._workers = list(self._workers.values()), {}

                async def shutdown() -> None:
                    await asyncio.gather(*(w.shutdown() for w in workers))
                    await self.client.close()

                if self._thread.is_alive():
                    asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(60)
        finally:
            self._stop_loop()
