"""The previous run of a cron schedule, from workflow code (``temporalio.workflow``'s
names, re-exported by :mod:`engine.workflow`): its result or its failure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .workflow import _Runtime


def _runtime() -> _Runtime:
    from .workflow import _runtime as runtime

    return runtime()


def has_last_completion_result() -> bool:
    """Whether this cron run follows one that completed (its result is at hand)."""
    return _runtime().last_completion_result(None)[0]


def get_last_completion_result(type_hint: type | None = None) -> Any:
    """The result of the last completed run of this cron schedule (None if none yet)."""
    return _runtime().last_completion_result(type_hint)[1]


def get_last_failure() -> BaseException | None:
    """The failure of the previous run, when this run follows one that failed (a cron run
    after a failed one, or a retry)."""
    return _runtime().last_failure()
