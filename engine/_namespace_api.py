"""Namespaces through ``client.workflow_service``, as Temporal's namespace calls.

A program written for Temporal registers a namespace with ``await client.workflow_service.
register_namespace(RegisterNamespaceRequest(namespace="orders",
workflow_execution_retention_period=Duration(seconds=3 * 86400)))``; with its imports
swapped to :mod:`engine.operator` it runs here unchanged. The requests and responses are
plain dataclasses with the fields of Temporal's messages (those that mean something here:
no clusters, replication or archival); any object with those fields is taken, a
``temporalio`` request included. As in protobuf, an empty string in an update means
"leave it as it is".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ._service.namespaces import NamespaceRecord
from .exceptions import InvalidArgumentError
from .service import within_rpc_timeout

if TYPE_CHECKING:
    from .client import Client


class NamespaceState(IntEnum):
    """Temporal's ``temporalio.api.enums.v1.NamespaceState`` (namespaces here are only
    ever registered: there is no deprecating or deleting one)."""

    NAMESPACE_STATE_UNSPECIFIED = 0
    NAMESPACE_STATE_REGISTERED = 1
    NAMESPACE_STATE_DEPRECATED = 2
    NAMESPACE_STATE_DELETED = 3


@dataclass(frozen=True)
class Duration:
    """A span of time as protobuf's ``google.protobuf.Duration``: whole ``seconds`` and
    ``nanos``, with its conversion methods (``ToTimedelta``, ``ToSeconds``...)."""

    seconds: int = 0
    nanos: int = 0

    @classmethod
    def from_seconds(cls, value: float) -> Duration:
        """The duration of ``value`` seconds."""
        whole = math.floor(value)
        return cls(int(whole), round((value - whole) * 1e9))

    def ToTimedelta(self) -> timedelta:
        """As a ``timedelta``."""
        return timedelta(seconds=self.seconds, microseconds=self.nanos // 1000)

    def ToSeconds(self) -> int:
        """Whole seconds."""
        return self.seconds

    def ToMilliseconds(self) -> int:
        """Whole milliseconds."""
        return self.seconds * 1000 + self.nanos // 1_000_000

    def ToNanoseconds(self) -> int:
        """Whole nanoseconds."""
        return self.seconds * 1_000_000_000 + self.nanos


def duration_seconds(value: Any, field_name: str) -> float | None:
    """Seconds in a timedelta, a number, or a protobuf-style Duration (None: not given;
    a zero protobuf Duration counts as not given, as an unset message field)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    seconds, nanos = getattr(value, "seconds", None), getattr(value, "nanos", 0)
    if isinstance(seconds, int) and isinstance(nanos, int):
        total = seconds + nanos / 1e9
        return total or None
    raise InvalidArgumentError(
        f"{field_name} must be a timedelta, seconds or a Duration, not {type(value).__name__}"
    )


@dataclass
class NamespaceInfo:
    """Temporal's ``temporalio.api.namespace.v1.NamespaceInfo``."""

    name: str = ""
    state: NamespaceState = NamespaceState.NAMESPACE_STATE_UNSPECIFIED
    description: str = ""
    owner_email: str = ""
    data: dict[str, str] = field(default_factory=dict)
    id: str = ""
    supports_schedules: bool = False


@dataclass
class NamespaceConfig:
    """Temporal's ``temporalio.api.namespace.v1.NamespaceConfig`` (its retention)."""

    workflow_execution_retention_ttl: Duration | timedelta | None = None


@dataclass
class UpdateNamespaceInfo:
    """What an update changes (an empty string: unchanged; ``data`` keys are merged)."""

    description: str = ""
    owner_email: str = ""
    data: dict[str, str] = field(default_factory=dict)


@dataclass
class RegisterNamespaceRequest:
    """Temporal's ``RegisterNamespaceRequest``: the retention is required (at least a day)."""

    namespace: str = ""
    description: str = ""
    owner_email: str = ""
    workflow_execution_retention_period: Duration | timedelta | None = None
    data: dict[str, str] = field(default_factory=dict)


@dataclass
class RegisterNamespaceResponse:
    """Temporal's (empty) ``RegisterNamespaceResponse``."""


@dataclass
class DescribeNamespaceRequest:
    namespace: str = ""
    id: str = ""


@dataclass
class DescribeNamespaceResponse:
    """Temporal's ``DescribeNamespaceResponse`` (its info and config)."""

    namespace_info: NamespaceInfo = field(default_factory=NamespaceInfo)
    config: NamespaceConfig = field(default_factory=NamespaceConfig)
    is_global_namespace: bool = False


@dataclass
class ListNamespacesRequest:
    page_size: int = 0
    next_page_token: bytes = b""


@dataclass
class ListNamespacesResponse:
    namespaces: list[DescribeNamespaceResponse] = field(default_factory=list)
    next_page_token: bytes = b""


@dataclass
class UpdateNamespaceRequest:
    """Temporal's ``UpdateNamespaceRequest``: ``update_info`` and ``config`` as given."""

    namespace: str = ""
    update_info: UpdateNamespaceInfo | None = None
    config: NamespaceConfig | None = None


UpdateNamespaceResponse = DescribeNamespaceResponse


def describe_response(record: NamespaceRecord) -> DescribeNamespaceResponse:
    """A stored namespace as Temporal describes one."""
    return DescribeNamespaceResponse(
        namespace_info=NamespaceInfo(
            name=record.name,
            state=NamespaceState.NAMESPACE_STATE_REGISTERED,
            description=record.description,
            owner_email=record.owner_email,
            data=dict(record.data),
            id=record.id,
            supports_schedules=False,
        ),
        config=NamespaceConfig(
            workflow_execution_retention_ttl=Duration.from_seconds(record.retention_seconds)
        ),
    )


def _data(value: Any) -> dict[str, str] | None:
    if not value:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"data must be a mapping of strings, not {type(value).__name__}")
    return dict(value)


class WorkflowService:
    """``client.workflow_service``: the namespace calls of Temporal's workflow service
    (``register_namespace``, ``describe_namespace``, ``list_namespaces``,
    ``update_namespace``). Everything else of that service has a client method here."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def register_namespace(
        self,
        req: Any,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> RegisterNamespaceResponse:
        """Create a namespace; ``RPCError`` ``ALREADY_EXISTS`` if one has that name, and
        ``INVALID_ARGUMENT`` without a retention of at least a day (Temporal's rules)."""
        del retry, metadata
        retention = duration_seconds(
            getattr(req, "workflow_execution_retention_period", None),
            "workflow_execution_retention_period",
        )
        if retention is None:
            raise InvalidArgumentError(
                "A valid retention period is not set on request: give "
                "workflow_execution_retention_period (at least a day, e.g. 72 hours)"
            )
        await within_rpc_timeout(
            self._client.service.register_namespace(
                str(getattr(req, "namespace", "")),
                retention,
                str(getattr(req, "description", "") or ""),
                str(getattr(req, "owner_email", "") or ""),
                _data(getattr(req, "data", None)),
            ),
            timeout,
            "registering a namespace",
        )
        return RegisterNamespaceResponse()

    async def describe_namespace(
        self,
        req: Any,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> DescribeNamespaceResponse:
        """The namespace of ``namespace`` (or, with none, of ``id``); ``RPCError``
        ``NOT_FOUND`` (:class:`NamespaceNotFoundError`) if there is none."""
        del retry, metadata
        record = await within_rpc_timeout(
            self._client.service.describe_namespace(
                str(getattr(req, "namespace", "") or ""), str(getattr(req, "id", "") or "")
            ),
            timeout,
            "describing a namespace",
        )
        return describe_response(record)

    async def list_namespaces(
        self,
        req: Any = None,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> ListNamespacesResponse:
        """A page of namespaces, by name (``page_size`` 0: up to 100)."""
        del retry, metadata
        records, token = await within_rpc_timeout(
            self._client.service.list_namespaces(
                int(getattr(req, "page_size", 0) or 0),
                bytes(getattr(req, "next_page_token", b"") or b"") or None,
            ),
            timeout,
            "listing namespaces",
        )
        return ListNamespacesResponse([describe_response(r) for r in records], token or b"")

    async def update_namespace(
        self,
        req: Any,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> UpdateNamespaceResponse:
        """Change a namespace's description, owner email, data (merged) or retention.
        A shorter retention applies to runs already closed too, at the next sweep."""
        del retry, metadata
        info = getattr(req, "update_info", None)
        config = getattr(req, "config", None)
        retention = duration_seconds(
            getattr(config, "workflow_execution_retention_ttl", None),
            "config.workflow_execution_retention_ttl",
        )
        record = await within_rpc_timeout(
            self._client.service.update_namespace(
                str(getattr(req, "namespace", "")),
                retention,
                getattr(info, "description", "") or None,
                getattr(info, "owner_email", "") or None,
                _data(getattr(info, "data", None)),
            ),
            timeout,
            "updating a namespace",
        )
        return describe_response(record)
