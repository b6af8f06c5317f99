"""Schedules' shared vocabulary: the overlap policies, the defaults, the errors.

The numbers and defaults are Temporal's (``temporalio.client.ScheduleOverlapPolicy``, the
server's scheduler); the service (``engine._service.schedules``) applies them and the
client (``engine._schedule_api``) shows them.
"""

from __future__ import annotations

from enum import IntEnum

from ..exceptions import ScheduleAlreadyRunningError, ScheduleNotFoundError


class ScheduleOverlapPolicy(IntEnum):
    """What a schedule does with an action that comes while an action's run is open
    (``temporalio.client.ScheduleOverlapPolicy``; the numbers are Temporal's)."""

    #: Do not start it: it is counted as skipped (the default).
    SKIP = 1
    #: Start it when the open run closes; at most one waits, later ones are skipped.
    BUFFER_ONE = 2
    #: Start every one of them, one after the other, as the runs before close.
    BUFFER_ALL = 3
    #: Ask the open run to cancel; start the new one once it has closed.
    CANCEL_OTHER = 4
    #: Terminate the open run and start the new one at once.
    TERMINATE_OTHER = 5
    #: Start it beside the open run(s).
    ALLOW_ALL = 6


#: ``SchedulePolicy.catchup_window`` when not given: a year (Temporal's server default).
DEFAULT_CATCHUP_WINDOW = 365 * 86400.0
#: The shortest catch-up window: a shorter one is taken as this (as Temporal's server).
MIN_CATCHUP_WINDOW = 10.0
#: How many upcoming action times and recent actions ``describe()`` shows (Temporal's).
FUTURE_ACTION_COUNT = 10
RECENT_ACTION_COUNT = 10
#: How many upcoming action times a listed schedule shows (the dev server's).
LISTED_FUTURE_ACTION_COUNT = 5
#: How many recent actions a listed schedule shows, at most (the dev server's).
LISTED_RECENT_ACTION_COUNT = 5

#: The action log's outcomes (``dn_schedule_actions.outcome``).
STARTED = "started"
SKIPPED_OVERLAP = "skipped_overlap"
MISSED_CATCHUP = "missed_catchup_window"
#: Replaced, before it started, by a later action (CANCEL_OTHER, TERMINATE_OTHER).
SUPERSEDED = "superseded"
#: Buffered, then not taken: the schedule was paused or had no actions left by then.
NOT_TAKEN = "not_taken"
START_FAILED = "start_failed"
#: What an action did to the runs open before it (their ids are logged).
CANCELLED_OTHER = "cancelled_other"
TERMINATED_OTHER = "terminated_other"
OUTCOMES = (
    STARTED,
    SKIPPED_OVERLAP,
    MISSED_CATCHUP,
    SUPERSEDED,
    NOT_TAKEN,
    START_FAILED,
    CANCELLED_OTHER,
    TERMINATED_OTHER,
)
__all__ = ["ScheduleAlreadyRunningError", "ScheduleNotFoundError", "ScheduleOverlapPolicy"]

#: Where an action time came from (``dn_schedule_actions.source``).
SOURCES = ("spec", "trigger", "backfill")
