"""A schedule's action log as a pandas DataFrame (re-exported by :mod:`engine.dataframes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._model.schedules import OUTCOMES, SOURCES, ScheduleOverlapPolicy
from .common import WorkflowExecutionStatus

if TYPE_CHECKING:
    from .client import Client

SCHEDULE_ACTION_COLUMNS = (
    "nominal_time",
    "scheduled_time",
    "decided_time",
    "outcome",
    "source",
    "overlap",
    "workflow_id",
    "run_id",
    "detail",
    "status",
)
"""The columns of :func:`schedule_actions_dataframe`, in order."""

_PAGE = 1000


async def schedule_actions_dataframe(client: Client, schedule_id: str) -> Any:
    """Every action time of schedule ``schedule_id`` and what became of it, one row per
    entry of its action log (``ScheduleHandle.actions()``; the newest 2,000 entries of a
    schedule are kept), oldest first: the skipped and missed actions that Temporal only
    counts are rows here too, with their reason.

    Columns (the same dtypes for every schedule, even one with no actions yet):

    - ``nominal_time`` (datetime64[ns, UTC]): the time the spec gave (or the trigger's or
      backfill's); ``scheduled_time``: that time with its jitter; ``decided_time``: when
      the service decided the action's fate (a buffered start decides when it starts);
    - ``outcome`` (category): ``started``, ``skipped_overlap``, ``missed_catchup_window``,
      ``superseded``, ``not_taken``, ``start_failed``, ``cancelled_other`` or
      ``terminated_other`` (for these two the run named is the one cancelled or
      terminated);
    - ``source`` (category): ``spec``, ``trigger`` or ``backfill``;
    - ``overlap`` (category): the overlap policy that applied, by name (``SKIP``, ...);
    - ``workflow_id``, ``run_id``, ``detail`` (string): the run the action concerns (if
      any) and why it was not taken (``detail`` of a skipped or missed action);
    - ``status`` (category of :class:`~engine.WorkflowExecutionStatus` names): the
      current status of the row's run (``describe()`` of it), missing for rows with no
      run (or whose run is gone).

    Example::

        df = await schedule_actions_dataframe(client, "nightly-report")
        df.outcome.value_counts()                       # how many ran, were skipped, ...
        df[df.outcome == "skipped_overlap"][["nominal_time", "detail"]]
        df[df.status == "FAILED"].workflow_id           # the scheduled runs that failed

    Needs pandas (``pip install durable-notebook[data]``).
    """
    from .dataframes import _epoch, _pandas, _utc_times

    pd = _pandas()
    handle = client.get_schedule_handle(schedule_id)
    log = []
    after = 0
    while True:
        page = await handle.actions(after=after, limit=_PAGE)
        log.extend(page)
        if len(page) < _PAGE:
            break
        after = page[-1].id
    statuses: dict[tuple[str, str], str | None] = {}
    for e in log:
        if e.workflow_id and e.run_id and (e.workflow_id, e.run_id) not in statuses:
            try:
                d = await client.get_workflow_handle(e.workflow_id, run_id=e.run_id).describe()
                statuses[(e.workflow_id, e.run_id)] = WorkflowExecutionStatus(d.status).name
            except Exception:  # the run is gone (retention) or cannot be read
                statuses[(e.workflow_id, e.run_id)] = None
    string = pd.StringDtype()

    def times(attr: str) -> Any:
        return _utc_times(pd, [_epoch(getattr(e, attr)) for e in log])

    def category(values: list[Any], categories: list[str]) -> Any:
        return pd.Series(pd.Categorical(values, categories=categories))

    return pd.DataFrame(
        {
            "nominal_time": times("nominal_time"),
            "scheduled_time": times("scheduled_time"),
            "decided_time": times("decided_time"),
            "outcome": category([e.outcome for e in log], list(OUTCOMES)),
            "source": category([e.source for e in log], list(SOURCES)),
            "overlap": category(
                [ScheduleOverlapPolicy(e.overlap).name for e in log],
                [p.name for p in ScheduleOverlapPolicy],
            ),
            "workflow_id": pd.Series([e.workflow_id for e in log], dtype=string),
            "run_id": pd.Series([e.run_id for e in log], dtype=string),
            "detail": pd.Series([e.detail for e in log], dtype=string),
            "status": category(
                [
                    statuses.get((e.workflow_id, e.run_id)) if e.workflow_id and e.run_id else None
                    for e in log
                ],
                [s.name for s in WorkflowExecutionStatus],
            ),
        },
        columns=list(SCHEDULE_ACTION_COLUMNS),
    )
