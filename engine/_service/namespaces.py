"""Namespaces and retention, as Temporal's.

Every run, task queue and search attribute belongs to one namespace. A new database has
``default``; others are registered first (an unknown namespace is ``NOT_FOUND``, with
Temporal's message). Each has a retention period: once a closed run has been closed for
longer, it is deleted with everything it left (its history, tasks, attempts, request ids
and visibility row) by :meth:`NamespaceOps.delete_expired_runs`, which the service host
runs among its background duties, a bounded batch per transaction (not under a
time-skipping clock: Temporal's time-skipping test server keeps every run). The id reuse policies
already look only at runs inside retention, so a ``REJECT_DUPLICATE`` start succeeds once
the closed run it would clash with is past it, deleted or not yet.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .._model.limits import check_namespace, check_text
from .._store.gateway import Store
from .._store.schema import DEFAULT_RETENTION_SECONDS
from .._store.shared_time import now as tx_now
from .._store.tx import StoreTx
from ..exceptions import (
    InvalidArgumentError,
    NamespaceNotFoundError,
    RPCError,
    RPCStatusCode,
    WorkflowNotFoundError,
)
from .clock import Clock
from .operation import operation

__all__ = [
    "DEFAULT_RETENTION_SECONDS",
    "MIN_RETENTION_SECONDS",
    "NEW_NAMESPACE_RETENTION_SECONDS",
    "SWEEP_BATCH",
    "SWEEP_EVENTS",
    "NamespaceOps",
    "NamespaceRecord",
]

#: Temporal's shortest retention period: a day.
MIN_RETENTION_SECONDS = 24 * 3600.0
#: What ``durable operator namespace create`` gives when no retention is given (Temporal's
#: CLI gives 72 hours).
NEW_NAMESPACE_RETENTION_SECONDS = 3 * 24 * 3600.0
#: Runs deleted per transaction by the retention sweep, and events of history at most
#: (a batch of long histories is cut short; one run is always taken).
SWEEP_BATCH = 200
SWEEP_EVENTS = 50_000
#: Namespaces per page of a listing.
_LIST_PAGE = 100


@dataclass(frozen=True)
class NamespaceRecord:
    """A namespace as the store holds it."""

    name: str
    id: str
    retention_seconds: float
    description: str = ""
    owner_email: str = ""
    data: dict[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The namespace as the CLI's ``-o json`` and the REST API show it (times ISO
        8601 in UTC)."""
        return {
            "name": self.name,
            "id": self.id,
            "state": "Registered",
            "retention_seconds": self.retention_seconds,
            "description": self.description,
            "owner_email": self.owner_email,
            "data": dict(self.data),
            "created": datetime.fromtimestamp(self.created_at, UTC).isoformat(),
            "updated": datetime.fromtimestamp(self.updated_at, UTC).isoformat(),
        }


def _record(row: Any) -> NamespaceRecord:
    try:
        data = json.loads(row.data) if row.data else {}
    except ValueError:
        data = {}
    return NamespaceRecord(
        name=str(row.name),
        id=str(row.namespace_id or ""),
        retention_seconds=float(row.retention_seconds),
        description=str(row.description or ""),
        owner_email=str(row.owner_email or ""),
        data={str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {},
        created_at=float(row.created_at),
        updated_at=float(row.updated_at if row.updated_at is not None else row.created_at),
    )


def check_retention(seconds: Any, field_name: str = "retention") -> float:
    """A retention period in seconds: a finite number of at least a day."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidArgumentError(
            f"{field_name} must be a duration (timedelta or seconds), not {type(seconds).__name__}"
        )
    value = float(seconds)
    if not math.isfinite(value) or value < MIN_RETENTION_SECONDS or value > 1e12:
        raise InvalidArgumentError(
            f"A valid retention period is not set on request: {field_name} is {value:g} s; it "
            "must be at least a day (Temporal's minimum), e.g. 72h"
        )
    return value


def _check_data(data: Mapping[str, Any] | None) -> str:
    if data is None:
        return "{}"
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(
            f"namespace data must be a mapping of strings, not {type(data).__name__}"
        )
    for key, value in data.items():
        check_text(key, "a namespace data key")
        check_text(value, f"namespace data {key!r}")
    return json.dumps(dict(sorted(data.items())), ensure_ascii=False)


def existing_namespace(tx: StoreTx, namespace: str) -> Any:
    """The namespace's row; :class:`NamespaceNotFoundError` if there is none."""
    row = tx.get_namespace(namespace)
    if row is None:
        raise NamespaceNotFoundError(namespace)
    return row


def not_found(
    tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None, *, open_only: bool = False
) -> RPCError:
    """The error for a run that is not there: its namespace's absence, if that is why."""
    if tx.get_namespace(namespace) is None:
        return NamespaceNotFoundError(namespace)
    return WorkflowNotFoundError(workflow_id, run_id, open_only=open_only)


class NamespaceOps:
    """Registering, describing, listing and updating namespaces; deleting what retention
    is over for (mixed into Service)."""

    store: Store
    clock: Clock
    _namespaces: set[str]

    def require_namespace(self, tx: StoreTx, namespace: str) -> None:
        """Raise :class:`NamespaceNotFoundError` unless ``namespace`` exists. Namespaces are
        never deleted, so one found once is remembered."""
        if namespace in self._namespaces:
            return
        if tx.get_namespace(namespace) is None:
            raise NamespaceNotFoundError(namespace)
        self._namespaces.add(namespace)

    def _namespace(self, tx: StoreTx, name: str) -> Any:
        return existing_namespace(tx, check_namespace(name))

    @operation
    def register_namespace(
        self,
        tx: StoreTx,
        name: str,
        retention_seconds: float,
        description: str = "",
        owner_email: str = "",
        data: Mapping[str, str] | None = None,
    ) -> NamespaceRecord:
        """Create a namespace; ``ALREADY_EXISTS`` if there is one of that name."""
        check_namespace(name)
        retention = check_retention(retention_seconds)
        created = tx.insert_namespace(
            name,
            retention,
            tx_now(self.clock),
            description=check_text(description, "description"),
            owner_email=check_text(owner_email, "owner_email"),
            data=_check_data(data),
        )
        if not created:
            raise RPCError(f'Namespace "{name}" already exists', RPCStatusCode.ALREADY_EXISTS)
        return _record(tx.get_namespace(name))

    @operation
    def ensure_namespace(self, tx: StoreTx, name: str) -> None:
        """Create ``name`` with the default retention if it does not exist (what
        ``WorkflowEnvironment.start_local(namespace=...)`` does, as the dev server's
        ``--namespace`` does)."""
        check_namespace(name)
        if tx.get_namespace(name) is None:
            tx.insert_namespace(name, DEFAULT_RETENTION_SECONDS, tx_now(self.clock))

    @operation(read=True)
    def describe_namespace(self, tx: StoreTx, name: str, namespace_id: str = "") -> NamespaceRecord:
        """The namespace of that name (or, with no name, of that id, as Temporal looks one
        up); ``NOT_FOUND`` if there is none."""
        if not name and namespace_id:
            row = tx.get_namespace_by_id(check_text(namespace_id, "namespace id"))
            if row is None:
                raise NamespaceNotFoundError(namespace_id)
            return _record(row)
        return _record(self._namespace(tx, name))

    @operation(read=True)
    def list_namespaces(
        self, tx: StoreTx, page_size: int = 0, next_page_token: bytes | None = None
    ) -> tuple[list[NamespaceRecord], bytes | None]:
        """A page of namespaces by name, and the token of the next page (None: last)."""
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 0:
            raise InvalidArgumentError(f"page_size must be a whole number >= 0, not {page_size!r}")
        limit = min(page_size or _LIST_PAGE, 1000)
        after = ""
        if next_page_token:
            try:
                after = json.loads(bytes(next_page_token).decode("utf-8"))["after"]
                check_text(after, "the page token's name")
            except (ValueError, KeyError, TypeError, UnicodeDecodeError, InvalidArgumentError):
                raise InvalidArgumentError(
                    "next_page_token is not one this service handed out: pass the previous "
                    "page's token unchanged (none for the first page)"
                ) from None
        rows = tx.list_namespaces(after, limit + 1)
        page = [_record(r) for r in rows[:limit]]
        more = len(rows) > limit
        token = json.dumps({"after": page[-1].name}).encode() if more and page else None
        return page, token

    @operation
    def update_namespace(
        self,
        tx: StoreTx,
        name: str,
        retention_seconds: float | None = None,
        description: str | None = None,
        owner_email: str | None = None,
        data: Mapping[str, str] | None = None,
    ) -> NamespaceRecord:
        """Change what is given and keep the rest; ``data`` keys are merged into the
        namespace's (Temporal's rule). A shorter retention applies to the runs already
        closed too, at the next sweep."""
        found = tx.get_namespace(check_namespace(name), lock=True)
        if found is None:
            raise NamespaceNotFoundError(name)
        row = _record(found)
        merged = {**row.data, **(data or {})} if data is not None else row.data
        tx.update_namespace(
            row.name,
            row.retention_seconds
            if retention_seconds is None
            else check_retention(retention_seconds),
            row.description if description is None else check_text(description, "description"),
            row.owner_email if owner_email is None else check_text(owner_email, "owner_email"),
            _check_data(merged),
            tx_now(self.clock),
        )
        return _record(tx.get_namespace(row.name))

    @operation(read=True)
    def find_expired_runs(
        self, tx: StoreTx, limit: int = SWEEP_BATCH, max_events: int = SWEEP_EVENTS
    ) -> list[str]:
        """Closed runs that have been closed for longer than their namespace's retention,
        oldest first: at most ``limit``, and no more than ``max_events`` events of history
        in all (but at least one run). Open runs are never picked, however old."""
        now = tx_now(self.clock)
        found: list[str] = []
        events = 0
        after = ""
        while True:
            rows = tx.list_namespaces(after, _LIST_PAGE)
            for row in rows:
                cutoff = now - float(row.retention_seconds)
                for run_id, length in tx.expired_runs(str(row.name), cutoff, limit - len(found)):
                    if found and events + length > max_events:
                        return found
                    found.append(run_id)
                    events += length
                if len(found) >= limit:
                    return found
            if len(rows) < _LIST_PAGE:
                return found
            after = str(rows[-1].name)

    @operation
    def delete_closed_runs(self, tx: StoreTx, run_ids: Sequence[str]) -> int:
        """Delete these runs (those still there and closed) with every row they left, in
        one transaction; returns how many were deleted."""
        return tx.delete_closed_runs(run_ids)

    async def delete_expired_runs(
        self, limit: int = SWEEP_BATCH, max_events: int = SWEEP_EVENTS
    ) -> int:
        """One batch of the retention sweep: find the runs past retention (a read, so a
        sweep with nothing to do writes nothing), then delete them; returns how many."""
        run_ids = await self.find_expired_runs(limit, max_events)
        if not run_ids:
            return 0
        deleted: int = await self.delete_closed_runs(run_ids)
        return deleted
