"""Namespaces and custom search attributes: ``client.workflow_service`` and
``client.operator_service``, as Temporal's.

Namespaces: ``RegisterNamespaceRequest``, ``DescribeNamespaceRequest``,
``ListNamespacesRequest``, ``UpdateNamespaceRequest`` (with ``UpdateNamespaceInfo`` and
``NamespaceConfig``) and ``Duration``, through ``client.workflow_service`` (defined in
``engine._namespace_api``).

Search attributes:

A test or program written for Temporal registers attributes with
``await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
namespace="default", search_attributes={"CustomerId": IndexedValueType.
INDEXED_VALUE_TYPE_KEYWORD}))``; with its imports swapped to this module
(``from engine.operator import AddSearchAttributesRequest, IndexedValueType``) it runs
here unchanged. The requests are plain dataclasses with the fields of Temporal's messages;
any object with those fields is taken (a ``temporalio`` request included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ._namespace_api import (
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    Duration,
    ListNamespacesRequest,
    ListNamespacesResponse,
    NamespaceConfig,
    NamespaceInfo,
    NamespaceState,
    RegisterNamespaceRequest,
    RegisterNamespaceResponse,
    UpdateNamespaceInfo,
    UpdateNamespaceRequest,
    UpdateNamespaceResponse,
    WorkflowService,
)
from ._service.search_attributes import value_type_of
from ._service.visibility import SYSTEM, TYPE_NAMES, type_name
from .service import within_rpc_timeout

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "TYPE_NAMES",
    "AddSearchAttributesRequest",
    "DescribeNamespaceRequest",
    "DescribeNamespaceResponse",
    "Duration",
    "IndexedValueType",
    "ListNamespacesRequest",
    "ListNamespacesResponse",
    "ListSearchAttributesRequest",
    "ListSearchAttributesResponse",
    "NamespaceConfig",
    "NamespaceInfo",
    "NamespaceState",
    "OperatorService",
    "RegisterNamespaceRequest",
    "RegisterNamespaceResponse",
    "RemoveSearchAttributesRequest",
    "UpdateNamespaceInfo",
    "UpdateNamespaceRequest",
    "UpdateNamespaceResponse",
    "WorkflowService",
    "type_name",
]


class IndexedValueType(IntEnum):
    """Temporal's ``temporalio.api.enums.v1.IndexedValueType``."""

    INDEXED_VALUE_TYPE_UNSPECIFIED = 0
    INDEXED_VALUE_TYPE_TEXT = 1
    INDEXED_VALUE_TYPE_KEYWORD = 2
    INDEXED_VALUE_TYPE_INT = 3
    INDEXED_VALUE_TYPE_DOUBLE = 4
    INDEXED_VALUE_TYPE_BOOL = 5
    INDEXED_VALUE_TYPE_DATETIME = 6
    INDEXED_VALUE_TYPE_KEYWORD_LIST = 7


@dataclass
class AddSearchAttributesRequest:
    """Attributes to register: name -> type (IndexedValueType, its number or its name)."""

    search_attributes: Mapping[str, Any] = field(default_factory=dict)
    namespace: str = ""


@dataclass
class RemoveSearchAttributesRequest:
    """Attribute names to unregister."""

    search_attributes: Sequence[str] = field(default_factory=list)
    namespace: str = ""


@dataclass
class ListSearchAttributesRequest:
    namespace: str = ""


@dataclass
class ListSearchAttributesResponse:
    """The namespace's custom attributes and the system ones, name -> IndexedValueType."""

    custom_attributes: dict[str, IndexedValueType]
    system_attributes: dict[str, IndexedValueType]
    storage_schema: dict[str, str] = field(default_factory=dict)


class OperatorService:
    """``client.operator_service``: the search attribute calls of Temporal's operator
    service. ``namespace`` left empty means the client's namespace."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _namespace(self, request: Any) -> str:
        return str(getattr(request, "namespace", "") or self._client.namespace)

    async def add_search_attributes(
        self,
        req: Any,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> None:
        """Register attributes; one already registered is left as it is (as on
        Temporal, whatever type is asked); a system name, or more than Temporal's SQL
        limit of one type (10 Keyword, 3 of each other type), is InvalidArgumentError."""
        del retry, metadata
        wanted = {str(k): value_type_of(v) for k, v in dict(req.search_attributes).items()}
        await within_rpc_timeout(
            self._client.service.add_search_attributes(self._namespace(req), wanted),
            timeout,
            "adding search attributes",
        )

    async def remove_search_attributes(
        self,
        req: Any,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> None:
        """Unregister attributes; their values are cleared from the namespace's runs."""
        del retry, metadata
        await within_rpc_timeout(
            self._client.service.remove_search_attributes(
                self._namespace(req), [str(n) for n in req.search_attributes]
            ),
            timeout,
            "removing search attributes",
        )

    async def list_search_attributes(
        self,
        req: Any = None,
        *,
        retry: bool = False,
        metadata: Mapping[str, str | bytes] = {},
        timeout: timedelta | None = None,
    ) -> ListSearchAttributesResponse:
        """The custom attributes of the namespace and the system ones."""
        del retry, metadata
        custom = await within_rpc_timeout(
            self._client.service.list_search_attributes(self._namespace(req)),
            timeout,
            "listing search attributes",
        )
        return ListSearchAttributesResponse(
            custom_attributes={n: IndexedValueType(int(t)) for n, t in custom.items()},
            system_attributes={n: IndexedValueType(int(a.value_type)) for n, a in SYSTEM.items()},
        )
