"""The client's schedules: ``create_schedule``, ``ScheduleHandle``, ``list_schedules``.

The classes (``engine._schedule_types``) become the service's JSON here and come back from
it; the service (``engine._service.schedules``) hosts the schedules. Checks that need no
database (a callable that is not a workflow, a field of the wrong type) happen here, before
any request; the spec is checked by the service, which creates nothing when it refuses.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._ids import random_uuid
from ._model import list_filter as lf
from ._model.schedules import ScheduleOverlapPolicy
from ._schedule_types import (
    Schedule,
    ScheduleActionLogEntry,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleListDescription,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from ._search_attributes import decode as decode_search_attributes
from ._search_attributes import encode as encode_search_attributes
from ._service.schedules import ScheduleRecord
from ._service.visibility import SYSTEM as SYSTEM_ATTRIBUTES
from .common import (
    SearchAttributes,
    TypedSearchAttributes,
)
from .exceptions import InvalidArgumentError
from .service import within_rpc_timeout

if TYPE_CHECKING:
    from .client import Client

from ._schedule_json import (
    _dt,
    _overlap,
    _payload_json,
    backfills_of,
    check_new_state,
    definition_json,
    description_of,
    list_entry_of,
)

JsonDict = dict[str, Any]

# -- the client's calls ---------------------------------------------------------------------


async def create_schedule(
    client: Client,
    id: str,
    schedule: Schedule,
    *,
    trigger_immediately: bool = False,
    backfill: Sequence[ScheduleBackfill] = (),
    memo: Mapping[str, Any] | None = None,
    search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
    rpc_metadata: Mapping[str, str | bytes] = {},
    rpc_timeout: timedelta | None = None,
) -> ScheduleHandle:
    from ._model.limits import check_id

    check_id(id, "id (the schedule id)")
    check_new_state(schedule)
    definition = definition_json(client, schedule)
    memo_json = {str(k): _payload_json(client, v) for k, v in (memo or {}).items()}
    own = encode_search_attributes(search_attributes) or None
    await within_rpc_timeout(
        client.service.create_schedule(
            client.namespace,
            id,
            definition,
            memo=memo_json or None,
            search_attributes=own,
            trigger_immediately=bool(trigger_immediately),
            backfills=backfills_of(backfill),
            request_id=random_uuid(),
        ),
        rpc_timeout,
        f"the creation of schedule {id!r}",
        rpc_metadata,
    )
    return ScheduleHandle(client, id)


class ScheduleHandle:
    """A schedule by id (``client.get_schedule_handle(id)``): describe it, change it,
    trigger or backfill it, pause it, delete it."""

    def __init__(self, client: Client, id: str) -> None:
        """A handle; nothing is looked up until a call."""
        self._client = client
        self.id = id

    async def _call(
        self,
        what: str,
        coro: Awaitable[Any],
        rpc_timeout: timedelta | None,
        rpc_metadata: Mapping[str, str | bytes],
    ) -> Any:
        return await within_rpc_timeout(
            coro, rpc_timeout, f"{what} of schedule {self.id!r}", rpc_metadata
        )

    async def describe(
        self, *, rpc_metadata: Mapping[str, str | bytes] = {}, rpc_timeout: timedelta | None = None
    ) -> ScheduleDescription:
        """The schedule, its counters, its recent and upcoming actions."""
        client = self._client
        rec = await self._call(
            "the description",
            client.service.describe_schedule(client.namespace, self.id),
            rpc_timeout,
            rpc_metadata,
        )
        return description_of(client, rec)

    async def update(
        self,
        updater: Callable[
            [ScheduleUpdateInput], ScheduleUpdate | Awaitable[ScheduleUpdate | None] | None
        ],
        *,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Describe the schedule, give it to ``updater``, write what it returns (None:
        nothing). The counters and the runs it started stay."""
        client = self._client
        description = await self.describe(rpc_metadata=rpc_metadata, rpc_timeout=rpc_timeout)
        update = updater(ScheduleUpdateInput(description))
        if inspect.isawaitable(update):
            update = await update
        if not update:
            return
        if not isinstance(update, ScheduleUpdate):
            raise InvalidArgumentError(
                f"the update callback returned {type(update).__name__}: return a "
                "ScheduleUpdate(schedule=...) or None"
            )
        definition = definition_json(client, update.schedule)
        own = None
        if update.search_attributes is not None:
            own = encode_search_attributes(update.search_attributes)
        await self._call(
            "the update",
            client.service.update_schedule(
                client.namespace,
                self.id,
                definition,
                search_attributes=own,
                request_id=random_uuid(),
            ),
            rpc_timeout,
            rpc_metadata,
        )

    async def _patch(
        self,
        what: str,
        rpc_timeout: timedelta | None,
        rpc_metadata: Mapping[str, str | bytes],
        **patch: Any,
    ) -> None:
        client = self._client
        await self._call(
            what,
            client.service.patch_schedule(
                client.namespace, self.id, request_id=random_uuid(), **patch
            ),
            rpc_timeout,
            rpc_metadata,
        )

    async def pause(
        self,
        *,
        note: str | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Pause it: no action is taken at its times until it is unpaused (they are not
        made up afterwards)."""
        await self._patch(
            "the pause", rpc_timeout, rpc_metadata, pause=note or "Paused via Python SDK"
        )

    async def unpause(
        self,
        *,
        note: str | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Unpause it."""
        await self._patch(
            "the unpause", rpc_timeout, rpc_metadata, unpause=note or "Unpaused via Python SDK"
        )

    async def trigger(
        self,
        *,
        overlap: ScheduleOverlapPolicy | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Take an action now (even while paused; ``overlap`` overrides the policy)."""
        await self._patch(
            "a trigger", rpc_timeout, rpc_metadata, trigger=_overlap(overlap, "overlap")
        )

    async def backfill(
        self,
        *backfill: ScheduleBackfill,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Take the action times of each period as if they were now."""
        if not backfill:
            raise ValueError("At least one backfill required")
        await self._patch("a backfill", rpc_timeout, rpc_metadata, backfills=backfills_of(backfill))

    async def delete(
        self, *, rpc_metadata: Mapping[str, str | bytes] = {}, rpc_timeout: timedelta | None = None
    ) -> None:
        """Delete it (the runs it started go on)."""
        client = self._client
        await self._call(
            "the deletion",
            client.service.delete_schedule(client.namespace, self.id),
            rpc_timeout,
            rpc_metadata,
        )

    async def actions(
        self,
        *,
        after: int = 0,
        limit: int = 1000,
        newest: bool = False,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> list[ScheduleActionLogEntry]:
        """The schedule's action log, oldest first: every action time it came to and what
        became of it, skipped and missed ones included (this engine's; Temporal keeps
        counters only; the newest 2,000 entries are kept). ``after``: an entry's ``id``,
        to read on from there; ``newest=True``: the ``limit`` newest entries instead."""
        client = self._client
        rows = await self._call(
            "the action log",
            client.service.schedule_actions(client.namespace, self.id, after, limit, newest),
            rpc_timeout,
            rpc_metadata,
        )
        return [
            ScheduleActionLogEntry(
                id=int(r["id"]),
                nominal_time=_dt(float(r["nominal_time"])),
                scheduled_time=_dt(float(r["scheduled_time"])),
                decided_time=_dt(float(r["decided_time"])),
                outcome=r["outcome"],
                source=r["source"],
                overlap=ScheduleOverlapPolicy(int(r["overlap"])),
                workflow_id=r["workflow_id"],
                run_id=r["started_run_id"],
                detail=r["detail"] or None,
            )
            for r in rows
        ]


# -- listing --------------------------------------------------------------------------------

#: What a list_schedules query may name besides the schedule's custom attributes (the
#: dev server refuses the other system attributes: "cannot filter on").
_LIST_KEYS = {"ScheduleId", "TemporalSchedulePaused"}


def _entry_values(rec: ScheduleRecord) -> dict[str, Any]:
    values: dict[str, Any] = {
        "ScheduleId": rec.schedule_id,
        "TemporalSchedulePaused": bool(rec.definition["state"].get("paused")),
    }
    for name, vals in decode_search_attributes(rec.search_attributes or {}).items():
        values[name] = vals if len(vals) != 1 else vals[0]
    return values


def _literal(v: lf.Value, against: Any) -> Any:
    if v.kind == "name":
        raise lf.ListFilterError(f"{v.raw} is not a value: quote it ('{v.raw}')", v.column)
    raw = v.raw
    if isinstance(against, datetime) and isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise lf.ListFilterError(f"{raw!r} is not a time", v.column) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return raw


def _compare(a: Any, op: str, b: Any) -> bool:
    if a is None:
        return op in ("!=", "<>") and b is not None
    items = a if isinstance(a, list) else [a]
    try:
        if op == "=":
            return b in items
        if op in ("!=", "<>"):
            return b not in items
        if op == ">":
            return bool(a > b)
        if op == ">=":
            return bool(a >= b)
        if op == "<":
            return bool(a < b)
        return bool(a <= b)
    except TypeError:
        return False


def _check_name(name: lf.Name, known: set[str]) -> None:
    if name.text in known:
        return
    if name.text in SYSTEM_ATTRIBUTES:
        raise lf.ListFilterError(
            f'invalid query filter for schedules: cannot filter on "{name.text}" '
            "(schedules are found by ScheduleId, TemporalSchedulePaused and their own "
            "custom search attributes)",
            name.column,
        )
    raise lf.ListFilterError(f"invalid search attribute: {name.text}", name.column)


def _names(expr: lf.Expr) -> list[lf.Name]:
    """Every attribute a filter names."""
    if isinstance(expr, lf.And | lf.Or):
        return [n for e in expr.items for n in _names(e)]
    if isinstance(expr, lf.Not):
        return _names(expr.item)
    return [expr.name]


def _matches(expr: lf.Expr, values: Mapping[str, Any], known: set[str]) -> bool:
    def value_of(name: lf.Name) -> Any:
        _check_name(name, known)
        return values.get(name.text)

    if isinstance(expr, lf.And):
        return all(_matches(e, values, known) for e in expr.items)
    if isinstance(expr, lf.Or):
        return any(_matches(e, values, known) for e in expr.items)
    if isinstance(expr, lf.Not):
        return not _matches(expr.item, values, known)
    if isinstance(expr, lf.Compare):
        a = value_of(expr.name)
        return _compare(a, expr.op, _literal(expr.value, a))
    if isinstance(expr, lf.Member):
        a = value_of(expr.name)
        found = any(_compare(a, "=", _literal(v, a)) for v in expr.values)
        return found != expr.negated
    if isinstance(expr, lf.Between):
        a = value_of(expr.name)
        inside = (
            a is not None
            and _compare(a, ">=", _literal(expr.low, a))
            and _compare(a, "<=", _literal(expr.high, a))
        )
        return inside != expr.negated
    if isinstance(expr, lf.StartsWith):
        a = value_of(expr.name)
        prefix = _literal(expr.prefix, a)
        return isinstance(a, str) and a.startswith(str(prefix))
    if isinstance(expr, lf.IsNull):
        a = value_of(expr.name)
        return (a is None) != expr.negated
    raise AssertionError(expr)


class ScheduleAsyncIterator:
    """``async for`` over the schedules of ``list_schedules``, a page at a time."""

    def __init__(
        self,
        client: Client,
        query: str | None,
        page_size: int,
        next_page_token: bytes | None,
    ) -> None:
        """Nothing is read until the first iteration."""
        self._client = client
        self._query = query
        self._filter = lf.parse(query)
        if self._filter.order_by or self._filter.group_by:
            raise lf.ListFilterError("list_schedules takes a filter only (no ORDER BY or GROUP BY)")
        self._page_size = max(1, int(page_size))
        self._next_page_token = next_page_token
        self._current_page: list[ScheduleListDescription] | None = None
        self._current_page_index = 0
        self._done = False

    @property
    def current_page_index(self) -> int:
        """Index of the entry the next ``__anext__`` returns."""
        return self._current_page_index

    @property
    def current_page(self) -> Sequence[ScheduleListDescription] | None:
        """The page read last, if any."""
        return self._current_page

    @property
    def next_page_token(self) -> bytes | None:
        """Where the next page starts (None: no more)."""
        return self._next_page_token

    async def fetch_next_page(self, *, page_size: int | None = None) -> None:
        """Read the next page."""
        client = self._client
        after = (self._next_page_token or b"").decode()
        size = page_size or self._page_size
        records, custom = await client.service.list_schedules_page(client.namespace, after, size)
        known = _LIST_KEYS | set(custom)
        if self._filter.where is not None:
            # Every name checked first: a bad filter fails even where no schedule is.
            for name in _names(self._filter.where):
                _check_name(name, known)
        page = []
        for rec in records:
            if self._filter.where is None or _matches(
                self._filter.where, _entry_values(rec), known
            ):
                page.append(list_entry_of(client, rec))
        self._current_page = page
        self._current_page_index = 0
        full = len(records) >= size
        self._next_page_token = records[-1].schedule_id.encode() if full and records else None
        self._done = not full

    def __aiter__(self) -> ScheduleAsyncIterator:
        """This iterator."""
        return self

    async def __anext__(self) -> ScheduleListDescription:
        """The next schedule, reading pages as needed."""
        while True:
            if self._current_page is None:
                await self.fetch_next_page()
                continue
            if self._current_page_index >= len(self._current_page):
                if self._next_page_token is not None:
                    await self.fetch_next_page()
                    continue
                raise StopAsyncIteration
            entry = self._current_page[self._current_page_index]
            self._current_page_index += 1
            return entry
