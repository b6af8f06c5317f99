"""Bringing the code of a workflow instance that is being dropped to an end.

An instance is dropped while its code still waits when a query has been answered from a
replay of the run, when a replay of a running workflow's history ends (the ``Replayer``;
not the stepper, which keeps its instance), and when a worker drops a run from its cache
or stops. Left to the garbage collector, its suspended coroutines would be
closed whenever a collection happens to run, on whatever thread runs it: the ``finally``
blocks and context managers of workflow code would run there, outside any activation,
and asyncio would report a pending task destroyed. Until then the instance, its tasks and
everything they hold form reference cycles that every collection has to walk.

Temporal's Python SDK tears an evicted workflow down on its own loop: it cancels every task
and runs the code until all have ended, as replay. :func:`tear_down` does the same. While
it runs, ``workflow.unsafe.is_replaying()`` is true (so the workflow logger stays quiet),
and whatever the code asks for is dropped: a command is never sent, and a wait started
in a ``finally`` block is cancelled in turn. Code that still waits after
:data:`MAX_ROUNDS` cancellations is left as it is.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .handlers import WorkflowTaskError

if TYPE_CHECKING:
    from .instance import WorkflowInstance

log = logging.getLogger("engine.workflow")

#: How many times the pending tasks are cancelled before the teardown gives up on them (a
#: ``finally`` block that waits again is cancelled again; one that loops forever is not
#: waited for).
MAX_ROUNDS = 10


def tear_down(instance: WorkflowInstance) -> bool:
    """Cancel the instance's pending tasks and run its code until every one has ended.

    Errors the code raises meanwhile are ignored (logged at debug level) and the commands it
    makes are dropped. Returns whether every task ended. Run it on the thread that runs the
    instance's activations, never while one runs."""
    left = 0
    if instance._tasks:
        # The instance is the running loop meanwhile, as in an activation (asyncio's own
        # hooks for event loop implementations, which ``activate`` uses too).
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(instance)
        instance._replaying = True
        try:
            for _ in range(MAX_ROUNDS):
                pending = list(instance._tasks)
                if not pending:
                    break
                for task in pending:
                    task.cancel()
                try:
                    instance._run_until_blocked(check=_stop)
                except WorkflowTaskError as err:
                    log.debug("workflow %s raised while torn down: %s", instance.workflow_id, err)
            left = len(instance._tasks)
        finally:
            asyncio.events._set_running_loop(previous)
            instance._commands = []
    if left:
        log.warning(
            "the code of workflow %s (run %s) still waits after being cancelled %d times "
            "while its instance was dropped: it is left to the garbage collector",
            instance.workflow_id,
            instance.run_id,
            MAX_ROUNDS,
        )
        return False
    # What still refers to the ended code's tasks, futures and callbacks, each of which
    # refers back to the instance as its loop: let go, so nothing is left for the collector.
    instance._main = None
    for table in _PENDING:
        getattr(instance, table).clear()
    return True


#: The instance's tables of what its code waits for (futures, handles).
_PENDING = (
    "_ready",
    "_timers",
    "_timer_seq_of",
    "_conditions",
    "_activities",
    "_children",
    "_externals",
    "_locals",
    "_running_updates",
    "_running_signals",
)


def _stop() -> bool:
    return False
