"""Listing runs: ``WorkflowExecution`` rows, ``describe()``'s description, and the paged
iterator that ``Client.list_workflows()`` returns (re-exported by ``engine.client``)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .common import TypedSearchAttributes, WorkflowExecutionStatus
from .exceptions import InvalidArgumentError
from .history import WorkflowHistory, WorkflowHistoryEventFilterType
from .service import within_rpc_timeout

if TYPE_CHECKING:
    from .client import Client
    from .converter import DataConverter

__all__ = [
    "WorkflowExecution",
    "WorkflowExecutionAsyncIterator",
    "WorkflowExecutionCount",
    "WorkflowExecutionCountAggregationGroup",
    "WorkflowExecutionDescription",
]


class WorkflowExecutionAsyncIterator:
    """What ``Client.list_workflows()`` returns: runs in the filter's order (open runs
    first, then closed ones newest first, unless it says ``ORDER BY``), a page at a time.

    Pages follow one another by position (the last row's order values), so runs started
    while a listing is paged through do not shift the later pages.
    """

    def __init__(
        self,
        client: Client,
        query: str | None,
        limit: int | None,
        page_size: int,
        next_page_token: bytes | None,
        *,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        if limit is not None and limit < 0:
            raise InvalidArgumentError(f"limit must be 0 or more (None: no limit), not {limit}")
        if page_size < 1:
            raise InvalidArgumentError(f"page_size must be at least 1, not {page_size}")
        self._client = client
        self._query = query
        self._limit = limit
        self._page_size = page_size
        self._rpc_timeout = rpc_timeout
        self._position = _decode_page_token(next_page_token)
        self._fetched = 0
        self._started = False
        #: The runs of the page fetched last (``None`` before the first fetch).
        self.current_page: list[WorkflowExecution] | None = None
        #: The index of the next item of :attr:`current_page` that iteration yields.
        self.current_page_index = 0
        #: Where the next page starts; ``None`` once the last page has been fetched.
        self.next_page_token: bytes | None = next_page_token

    async def fetch_next_page(self, *, page_size: int | None = None) -> None:
        """Fetch the next page into :attr:`current_page` and move :attr:`next_page_token`."""
        size = min(page_size or self._page_size, _MAX_PAGE_SIZE)
        if self._limit is not None:
            size = min(size, self._limit - self._fetched)
        if (self._started and self.next_page_token is None) or size <= 0:
            self.current_page, self.current_page_index, self.next_page_token = [], 0, None
            return
        self._started = True
        client = self._client
        rows = await within_rpc_timeout(
            client.service.list_runs(client.namespace, size + 1, self._query, after=self._position),
            self._rpc_timeout,
            "listing workflows",
        )
        more = len(rows) > size
        rows = rows[:size]
        converter = client.data_converter
        self.current_page = [WorkflowExecution.from_row(r, converter) for r in rows]
        self.current_page_index = 0
        self._fetched += len(rows)
        if more and rows and (self._limit is None or self._fetched < self._limit):
            last = rows[-1]
            self._position = [getattr(last, f"o{i}") for i in range(_order_width(last))]
            self.next_page_token = _encode_page_token(self._position)
        else:
            self.next_page_token = None

    async def map_histories(
        self,
        *,
        event_filter_type: WorkflowHistoryEventFilterType = WorkflowHistoryEventFilterType.ALL_EVENT,
        skip_archival: bool = False,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> AsyncIterator[WorkflowHistory]:
        """The history of each listed run, fetched as iteration reaches it (as
        ``temporalio``'s): ``Replayer(...).replay_workflows(client.list_workflows(q)
        .map_histories())`` checks every listed run against new code. The options are
        ``WorkflowHandle.fetch_history``'s."""
        async for execution in self:
            handle = self._client.get_workflow_handle(execution.id, run_id=execution.run_id)
            yield await handle.fetch_history(
                event_filter_type=event_filter_type,
                skip_archival=skip_archival,
                rpc_metadata=rpc_metadata,
                rpc_timeout=rpc_timeout,
            )

    def __aiter__(self) -> WorkflowExecutionAsyncIterator:
        return self

    async def __anext__(self) -> WorkflowExecution:
        page = self.current_page
        if page is None or self.current_page_index >= len(page):
            if page is not None and self.next_page_token is None:
                raise StopAsyncIteration
            await self.fetch_next_page()
            page = self.current_page
            if not page:
                raise StopAsyncIteration
        item = page[self.current_page_index]
        self.current_page_index += 1
        return item


#: The largest page read at once (a larger ``page_size`` overflows SQL's LIMIT).
_MAX_PAGE_SIZE = 2**31 - 1


@dataclass
class WorkflowExecutionCountAggregationGroup:
    """One group of a count with ``GROUP BY``: its values (a status name) and count."""

    count: int
    group_values: Sequence[Any]


@dataclass
class WorkflowExecutionCount:
    """What ``Client.count_workflows`` returns: the count, and its groups (empty without
    ``GROUP BY``; their counts then add up to :attr:`count`)."""

    count: int
    groups: Sequence[WorkflowExecutionCountAggregationGroup]

    @staticmethod
    def of(counted: list[tuple[Any, int]]) -> WorkflowExecutionCount:
        """From the store's ``[(group value or None, n), ...]``."""
        from ._service.visibility import STATUS_OF

        if counted and counted[0][0] is None and len(counted) == 1:
            return WorkflowExecutionCount(counted[0][1], [])
        groups = [
            WorkflowExecutionCountAggregationGroup(n, [STATUS_OF.get(int(v), str(v))])
            for v, n in counted
        ]
        return WorkflowExecutionCount(sum(g.count for g in groups), groups)


def _order_width(row: Any) -> int:
    """How many order values (``o0``, ``o1``...) a listed row carries."""
    n = 0
    while hasattr(row, f"o{n}"):
        n += 1
    return n


def _encode_page_token(position: list[Any]) -> bytes:
    text = json.dumps({"v": 2, "after": position})
    return base64.urlsafe_b64encode(text.encode())


def _decode_page_token(token: bytes | None) -> list[Any] | None:
    if token is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token))
        after = data["after"]
        if data.get("v") != 2 or not isinstance(after, list) or not after:
            raise ValueError("not a position")
        for value in after:
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError("not a position")
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError("not a position")
            if isinstance(value, int) and abs(value) >= 2**63:
                raise ValueError("not a position")
            if isinstance(value, str):
                if "\x00" in value:
                    raise ValueError("not a position")
                value.encode("utf-8")  # a lone surrogate: no driver can send it
        return after
    except (ValueError, TypeError, KeyError, OverflowError, AttributeError) as err:
        raise InvalidArgumentError(
            f"next_page_token {token[:40]!r} is not a token this engine handed out: pass "
            "the next_page_token of an earlier page unchanged (or None for the first page)"
        ) from err


def _dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


_NO_DEFAULT: Any = object()


@dataclass
class WorkflowExecution:
    """A run as listed: ids, type, status, times, parent and root runs, and its memo
    (``memo()``). ``root_id`` is the run's own id for a run without a parent;
    ``execution_time`` is when its first workflow task was due (after a start delay)."""

    id: str
    run_id: str
    workflow_type: str
    task_queue: str
    status: WorkflowExecutionStatus
    start_time: datetime
    close_time: datetime | None
    history_length: int
    namespace: str
    parent_id: str | None = None
    parent_run_id: str | None = None
    root_id: str | None = None
    root_run_id: str | None = None
    execution_time: datetime | None = None
    #: Decodes :meth:`memo` (the client's, with its codec).
    data_converter: DataConverter | None = field(default=None, repr=False, compare=False)
    #: The memo as stored: field name -> payload JSON.
    raw_memo: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The search attributes the run holds, as stored (``indexedFields`` JSON).
    raw_search_attributes: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def search_attributes(self) -> dict[str, list[Any]]:
        """The run's search attributes in the deprecated untyped form (name -> values)."""
        from ._search_attributes import decode

        return decode(self.raw_search_attributes)

    @property
    def typed_search_attributes(self) -> TypedSearchAttributes:
        """The run's search attributes, typed (``[SearchAttributePair(key, value)]``)."""
        from ._search_attributes import decode_typed

        return decode_typed(self.raw_search_attributes)

    @staticmethod
    def from_row(row: Any, data_converter: DataConverter | None = None) -> WorkflowExecution:
        """Build from a store row."""
        memo = getattr(row, "memo", None)
        held = getattr(row, "visible_search_attributes", None)
        return WorkflowExecution(
            id=row.workflow_id,
            run_id=row.run_id,
            workflow_type=row.workflow_type,
            task_queue=row.task_queue,
            status=WorkflowExecutionStatus(row.status),
            start_time=datetime.fromtimestamp(row.start_time, UTC),
            close_time=_dt(row.close_time),
            history_length=row.next_event_id - 1,
            namespace=row.namespace,
            parent_id=row.parent_workflow_id,
            parent_run_id=row.parent_run_id,
            root_id=getattr(row, "root_workflow_id", None),
            root_run_id=getattr(row, "root_run_id", None),
            execution_time=_dt(getattr(row, "execution_time", None)),
            data_converter=data_converter,
            raw_memo=json.loads(memo) if memo else {},
            raw_search_attributes=json.loads(held) if held else {},
        )

    async def memo(self) -> dict[str, Any]:
        """The run's memo now (the start memo with ``upsert_memo``'s changes), decoded."""
        return {key: self._decode(payload, None) for key, payload in self.raw_memo.items()}

    async def memo_value(
        self, key: str, default: Any = _NO_DEFAULT, *, type_hint: type | None = None
    ) -> Any:
        """One memo field, decoded (as ``type_hint`` if given); ``default`` if it is not
        there, else :class:`KeyError`."""
        if key not in self.raw_memo:
            if default is _NO_DEFAULT:
                raise KeyError(f"memo does not have a value for key {key!r}")
            return default
        return self._decode(self.raw_memo[key], type_hint)

    def _decode(self, payload: dict[str, Any], type_hint: type | None) -> Any:
        from .converter import DataConverter, Payload

        converter = self.data_converter or DataConverter.default
        return converter.from_payloads([Payload.from_json(payload)], [type_hint])[0]


@dataclass
class WorkflowExecutionDescription(WorkflowExecution):
    """``describe()``: a run plus its pending activities, timers and workflow task."""

    pending_activities: list[dict[str, Any]] = field(default_factory=list)
    pending_timers: list[dict[str, Any]] = field(default_factory=list)
    pending_workflow_task: dict[str, Any] | None = None
    history_size_bytes: int = 0
    first_execution_run_id: str = ""
    continued_as_new_run_id: str | None = None
    #: Temporal's ``UserMetadata`` of the start (``{"summary": payload, "details": ...}``).
    raw_user_metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    async def static_summary(self) -> str | None:
        """The ``static_summary`` the run was started with (None if it had none)."""
        payload = self.raw_user_metadata.get("summary")
        return None if payload is None else self._decode(payload, str)

    async def static_details(self) -> str | None:
        """The ``static_details`` the run was started with (None if it had none)."""
        payload = self.raw_user_metadata.get("details")
        return None if payload is None else self._decode(payload, str)
