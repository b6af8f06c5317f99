"""The kernel's durable session: a client and workers on a background event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from engine import Client, Worker, WorkflowExecution, WorkflowExecutionDescription
from engine.exceptions import DurableError, InvalidArgumentError, NondeterminismError
from engine.history import WorkflowHistory
from engine.worker import Replayer
from engine.workflow import activity_name, definition_name

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "LOOP_THREAD_NAME",
    "DefinitionKind",
    "RedefinitionCheck",
    "ReplayReport",
    "RunCheck",
    "Session",
    "SessionMoveError",
    "WorkerStatus",
    "database_key",
    "definition_kind",
]

#: The task queue used when none is named.
DEFAULT_TASK_QUEUE = "notebook"
#: The name of the thread that runs the session's event loop (and its workers).
LOOP_THREAD_NAME = "durable-kernel-loop"
#: How many open run ids a redefinition note names before it shortens the list.
NOTE_MAX_IDS = 10
#: How many breaking runs a redefinition note gives a line of its own.
NOTE_MAX_BREAKING = 5
#: A redefined workflow is replayed against at most this many open runs (newest first)...
REDEFINITION_CHECK_LIMIT = 20
#: ... within this many seconds overall (listing, reading histories and replaying).
REDEFINITION_CHECK_TIMEOUT = 10.0
#: The name of the threads that replay open runs against a new definition.
CHECK_THREAD_NAME = "durable-redefinition-check"

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


def database_key(url: str | None) -> str:
    """The database ``Client.connect(url)`` opens, as a string to compare (password
    included: never show it). ``url=None``: the one it opens now (``DURABLE_DATABASE_URL``,
    else the embedded default)."""
    return Client.resolve_database_url(url, hide_password=False)


def _shown_url(url: str | None) -> str:
    """``url`` (or the default) as it may be shown: password hidden."""
    try:
        return Client.resolve_database_url(url)
    except DurableError:
        return "an unparseable URL"


def _sentence(err: BaseException) -> str:
    """An error's text ending in one full stop, to go on with another sentence."""
    return str(err).rstrip().rstrip(".") + "."


class SessionMoveError(RuntimeError):
    """The kernel's session could not move to the database ``DURABLE_DATABASE_URL`` now
    names; the message says what to do. The session stays on its database."""

    #: Set once the error was shown to the user (so a hook does not show it again).
    reported: bool = False


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


@dataclass
class RunCheck:
    """One open run replayed against a new definition of its workflow type."""

    workflow_id: str
    run_id: str
    #: What replaying raised (a NondeterminismError, or the workflow code's exception);
    #: None when the run replays cleanly on the new code.
    failure: Exception | None = None
    #: The type of the event replay diverged at, when the failure names an event.
    event_type: str | None = None
    #: Set when the run could not be checked (e.g. its history could not be read).
    problem: str | None = None

    @property
    def breaks(self) -> bool:
        """Whether the new definition fails this run's next workflow task."""
        return self.failure is not None


@dataclass
class RedefinitionCheck:
    """What replaying the open runs of a redefined workflow type found."""

    workflow_type: str
    task_queues: list[str]
    limit: int = REDEFINITION_CHECK_LIMIT
    timeout: float = REDEFINITION_CHECK_TIMEOUT
    #: Open runs of the type on those task queues (None until listed).
    open_runs: int | None = None
    checked: list[RunCheck] = field(default_factory=list)
    #: Workflow ids of open runs that were not replayed (over the limit, or out of time).
    unchecked: list[str] = field(default_factory=list)
    timed_out: bool = False
    #: Set when the check could not run at all.
    problem: str | None = None

    @property
    def breaking(self) -> list[RunCheck]:
        """The runs the new definition breaks."""
        return [c for c in self.checked if c.breaks]

    @property
    def safe(self) -> list[RunCheck]:
        """The runs that replay cleanly on the new definition."""
        return [c for c in self.checked if not c.breaks and c.problem is None]

    def note(self) -> str:
        """The few lines a notebook shows when the definition is registered."""
        name = self.workflow_type
        head = f"{name}: new definition registered"
        if self.problem is not None and self.open_runs is None:
            return f"{head}; its open runs could not be checked: {self.problem}"
        if not self.open_runs:
            return f"{head}; no open runs of {name}"
        n = len(self.checked)
        which = f"its {_runs(n)}" if n == self.open_runs else f"{n} of its {_runs(self.open_runs)}"
        lines = [f"{head}; replayed {which} against it before the worker uses it:"]
        breaking = self.breaking
        for check in breaking[:NOTE_MAX_BREAKING]:
            lines.append("  " + _breaking_line(check))
        if len(breaking) > NOTE_MAX_BREAKING:
            more = breaking[NOTE_MAX_BREAKING:]
            lines.append(f"  ... {len(more)} more break: {_ids([c.workflow_id for c in more])}")
        safe = self.safe
        if safe:
            lines.append(f"  safe (replays on the new code): {_ids([c.workflow_id for c in safe])}")
        for check in self.checked:
            if check.problem is not None:
                lines.append(f"  not checked: {check.workflow_id}: {check.problem}")
        if self.unchecked:
            if self.timed_out:
                why = f"the check ran out of its {self.timeout:g} s"
            else:
                why = f"at most the newest {self.limit} are replayed"
            lines.append(
                f"  not checked: {_runs(len(self.unchecked))} ({why}): {_ids(self.unchecked)}"
                " - check them with %durable replay WORKFLOW_ID"
            )
        if breaking:
            lines.append(
                "  to keep them going: restore the previous code (run its old cell again), or "
                'guard the change with `if workflow.patched("some-id"):` (open runs keep the '
                "old path)"
            )
            lines.append(
                "  or let them fail: their next workflow tasks fail (they stay open), or "
                f'terminate them: await client.get_workflow_handle("{breaking[0].workflow_id}")'
                ".terminate()"
            )
        return "\n".join(lines)


def _runs(n: int) -> str:
    return "1 open run" if n == 1 else f"{n} open runs"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:NOTE_MAX_IDS])
    if len(ids) > NOTE_MAX_IDS:
        shown += f", ... ({len(ids) - NOTE_MAX_IDS} more)"
    return shown


def _breaking_line(check: RunCheck) -> str:
    err = check.failure
    if isinstance(err, NondeterminismError):
        where = f"event {err.event_id}" if err.event_id is not None else "an event"
        if check.event_type:
            where += f" ({check.event_type})"
        recorded = err.recorded or "?"
        produced = err.produced or "?"
        return (
            f"BREAKS {check.workflow_id} at {where}: history recorded {recorded}, "
            f"the new code produces {produced}"
        )
    return (
        f"BREAKS {check.workflow_id}: replaying it on the new code raised "
        f"{type(err).__name__}: {err}"
    )


def _in_thread(fn: Callable[[], T]) -> concurrent.futures.Future[T]:
    """Run ``fn`` on a daemon thread of its own (one that hangs is left behind, not joined)."""
    fut: concurrent.futures.Future[T] = concurrent.futures.Future()

    def target() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn())
        except BaseException as err:  # handed to the waiting coroutine
            fut.set_exception(err)

    threading.Thread(target=target, name=CHECK_THREAD_NAME, daemon=True).start()
    return fut


def _replay_failure(replayer: Replayer, history: WorkflowHistory) -> Exception | None:
    # Replaying is pure CPU work that never awaits: a private loop on this thread.
    result = asyncio.run(replayer.replay_workflow(history, raise_on_replay_failure=False))
    return result.replay_failure


class Session:
    """One per kernel: a Client and the kernel's Workers on a dedicated event loop thread.

    The loop thread keeps workers polling between cells and while a cell blocks. Every
    engine call goes through :meth:`call`, which runs a coroutine on that loop and waits.
    """

    #: A redefined workflow type is replayed against at most this many open runs...
    redefinition_check_limit: int = REDEFINITION_CHECK_LIMIT
    #: ... within this many seconds.
    redefinition_check_timeout: float = REDEFINITION_CHECK_TIMEOUT

    def __init__(self, url: str | None = None, *, default_task_queue: str = DEFAULT_TASK_QUEUE):
        self.default_task_queue = default_task_queue
        #: The last move that failed: (DURABLE_DATABASE_URL then, the error); see follow_env.
        self._failed_move: tuple[str, SessionMoveError] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=LOOP_THREAD_NAME, daemon=True)
        self._thread.start()
        self._queues: dict[str, _Queue] = {}
        self._workers: dict[str, Worker] = {}
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.RLock()
        self._closed = False
        try:
            self._key = database_key(url)
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

    # -- following DURABLE_DATABASE_URL -------------------------------------------------

    def _database_key(self) -> str:
        return self._key

    def follow_env(self, *, retry: bool = True) -> str | None:
        """Move the session to the database ``Client.connect()`` opens now, when
        ``DURABLE_DATABASE_URL`` names another one (a notebook re-run from its setup cell).

        Returns the line to show after a move, ``None`` when the session is already there.
        Raises :class:`SessionMoveError` when it cannot move; with ``retry=False`` a move to
        the same database that failed before is not tried again (the same error is raised).
        """
        if threading.current_thread() is self._thread:
            return None  # from the loop itself (an activity, a widget): never block it
        raw = os.environ.get("DURABLE_DATABASE_URL", "")
        with self._lock:
            if self._closed:
                return None
            if not retry and self._failed_move is not None and self._failed_move[0] == raw:
                raise self._failed_move[1]
            try:
                try:
                    wanted = database_key(None)
                except DurableError as err:
                    raise SessionMoveError(
                        "DURABLE_DATABASE_URL is not a database the kernel's durable session "
                        f"can use: {_sentence(err)} The session stays on "
                        f"{self.database_url}: fix DURABLE_DATABASE_URL (or unset it for "
                        "./.durable/durable.db) and run the cell again"
                    ) from err
                line = None if wanted == self._database_key() else self.move_to(None)
            except SessionMoveError as err:
                self._failed_move = (raw, err)
                raise
            self._failed_move = None
            return line

    def move_to(self, url: str | None) -> str:
        """Move the session to the database at ``url`` (``None``: as ``Client.connect()``):
        stop its workers, connect the client there, and start the workers that were
        running again there with the same registrations. Returns a one-line message.

        The new database is opened first: if that fails, :class:`SessionMoveError` is
        raised and the session stays where it was, untouched.
        """
        with self._lock:
            old = self.database_url
            try:
                key = database_key(url)
                new_client = self.call(Client.connect(url), timeout=60)
            except Exception as err:
                raise SessionMoveError(
                    f"DURABLE_DATABASE_URL changed, but the kernel's durable session cannot "
                    f"move from {old} to {_shown_url(url)}: {_sentence(err)} It stays on "
                    f"{old}; fix DURABLE_DATABASE_URL and run the cell again (or set it back, "
                    "or restart the kernel)"
                ) from err
            queues = sorted(self._workers)

            async def move() -> dict[str, BaseException]:
                workers, self._workers = list(self._workers.values()), {}
                await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
                previous, self.client, self._key = self.client, new_client, key
                try:
                    await previous.close()
                except Exception:  # the old database's trouble is not the new one's
                    pass
                failed: dict[str, BaseException] = {}
                for queue in queues:
                    try:
                        worker = self._new_worker(queue)
                        worker.start()
                    except Exception as err:
                        failed[queue] = err
                    else:
                        self._workers[queue] = worker
                return failed

            try:
                failed = self.call(move(), timeout=90)
            except Exception as err:
                raise SessionMoveError(
                    f"the kernel's durable session could not finish moving from {old} to "
                    f"{new_client.database_url}: {_sentence(err)} Restart the kernel and run the "
                    "notebook again"
                ) from err
        line = (
            "kernel_ext: DURABLE_DATABASE_URL changed, so the kernel's durable session "
            f"moved from {old} to {self.database_url}"
        )
        started = [q for q in queues if q not in failed]
        if started:
            word = "worker" if len(started) == 1 else "workers"
            line += f"; {word} restarted there on " + ", ".join(repr(q) for q in started)
        if failed:
            line += "; could not restart " + "; ".join(
                f"the worker on {q!r}: {err}" for q, err in failed.items()
            )
        return line

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
        note: str | None = None
        with self._lock:
            replaced = [
                q
                for q in queues
                if (previous := self._queues.get(q, _Queue()).table(kind).get(name)) is not None
                and previous is not obj
            ]
            if replaced and kind == "workflow":
                # Before any worker runs the new code: which open runs would it break?
                note = self.check_redefinition(obj, replaced).note()
            for queue in queues:
                self._queues.setdefault(queue, _Queue()).table(kind)[name] = obj
                if queue in self._workers:
                    self.call(self._apply(queue, kind, obj), timeout=60)
            try:
                self._seen.add(obj)
            except TypeError:
                pass
        if replaced and kind == "activity":
            note = f"{name}: new activity definition registered; its next attempts use it"
        return note

    def check_redefinition(self, cls: Any, task_queues: list[str]) -> RedefinitionCheck:
        """Replay the open runs of ``cls``'s workflow type on ``task_queues`` against
        ``cls`` (newest first, at most :attr:`redefinition_check_limit` of them, within
        :attr:`redefinition_check_timeout` seconds): which runs would the new definition
        break, and where. Replays run on threads of their own, not on the kernel's thread
        nor the session's loop; nothing is written."""
        name = definition_name(cls)
        check = RedefinitionCheck(
            workflow_type=name,
            task_queues=list(task_queues),
            limit=self.redefinition_check_limit,
            timeout=self.redefinition_check_timeout,
        )
        try:
            replayer = Replayer(workflows=[cls], data_converter=self.client.data_converter)
        except Exception as err:
            check.problem = f"{type(err).__name__}: {err}"
            return check
        try:
            self.call(
                asyncio.wait_for(self._check_runs(replayer, check), check.timeout),
                timeout=check.timeout + 5,
            )
        except TimeoutError:
            check.timed_out = True
            if check.open_runs is None:
                check.problem = f"listing them took over {check.timeout:g} s"
        except Exception as err:
            check.problem = f"{type(err).__name__}: {err}"
        return check

    async def _check_runs(self, replayer: Replayer, check: RedefinitionCheck) -> None:
        runs: list[WorkflowExecution] = []
        for queue in check.task_queues:
            query = (
                f"WorkflowType = '{check.workflow_type}' AND ExecutionStatus = 'Running' "
                f"AND TaskQueue = '{queue}'"
            )
            runs.extend([run async for run in self.client.list_workflows(query)])
        runs.sort(key=lambda r: (r.start_time, r.run_id), reverse=True)  # newest first
        check.open_runs = len(runs)
        check.unchecked = [r.id for r in runs]
        for run in runs[: check.limit]:
            item = RunCheck(workflow_id=run.id, run_id=run.run_id)
            handle = self.client.get_workflow_handle(run.id, run_id=run.run_id)
            try:
                history = await handle.fetch_history()
            except DurableError as err:  # it closed meanwhile, ...
                item.problem = f"its history could not be read: {err}"
            else:
                try:
                    item.failure = await asyncio.wrap_future(
                        _in_thread(functools.partial(_replay_failure, replayer, history))
                    )
                except Exception as err:  # the replayer itself failed: say so, go on
                    item.problem = f"replaying it failed: {type(err).__name__}: {err}"
                event_id = getattr(item.failure, "event_id", None)
                if isinstance(event_id, int) and 0 < event_id <= len(history.events):
                    item.event_type = history.events[event_id - 1].event_type
            check.checked.append(item)
            check.unchecked.remove(run.id)

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
                running = self._workers[queue]
                types = ", ".join(running.workflow_types + running.activity_types)
                return (
                    f"a worker is already polling task queue {queue!r} on {self.database_url}"
                    f" ({types}); nothing to do"
                )
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
