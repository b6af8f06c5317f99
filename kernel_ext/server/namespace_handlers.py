"""REST handlers for namespaces: list and create (``namespaces``), describe and update
(``namespaces/{name}``), as ``client.workflow_service`` does them.

A namespace is JSON as ``{"name", "id", "state", "retention_seconds", "description",
"owner_email", "data", "created", "updated"}`` (times ISO 8601 in UTC). Every other
endpoint takes ``?namespace=`` to act in a namespace other than ``default``.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .handlers import BadRequest, DurableAPIHandler

#: A new namespace's retention when the body gives none (Temporal's CLI: 72 hours).
CREATE_RETENTION_SECONDS = 3 * 86400


def namespace_json(record: Any) -> dict[str, Any]:
    """A namespace as the REST API shows it (the record's own JSON form)."""
    return dict(record.as_json())


def _fields(data: dict[str, Any], *, name_required: bool) -> dict[str, Any]:
    allowed = {"retention_seconds", "description", "owner_email", "data"}
    if name_required:
        allowed.add("name")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(unknown)}; expected: {', '.join(sorted(allowed))}"
        )
    if name_required and (not isinstance(data.get("name"), str) or not data["name"].strip()):
        raise BadRequest("field 'name' must be a non-empty string (the namespace)")
    retention = data.get("retention_seconds")
    if retention is not None and (
        isinstance(retention, bool) or not isinstance(retention, int | float)
    ):
        raise BadRequest("field 'retention_seconds' must be a number of seconds (at least 86400)")
    for key in ("description", "owner_email"):
        if key in data and not isinstance(data[key], str):
            raise BadRequest(f"field {key!r} must be a string")
    extra = data.get("data")
    if extra is not None and (
        not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values())
    ):
        raise BadRequest("field 'data' must be an object of strings")
    return data


class NamespacesHandler(DurableAPIHandler):
    """``GET namespaces?limit=&page_token=``: ``{namespaces, next_page_token}`` by name.
    ``POST namespaces`` with ``{"name", "retention_seconds" (default 72 hours; at least a
    day), "description", "owner_email", "data"}`` creates one: 201, or 409 if one has that
    name."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        limit = self.int_arg("limit", 100, 1, 1000)
        token = self.get_query_argument("page_token", "") or None
        client = await self.client()
        records, next_token = await client.service.list_namespaces(
            limit, token.encode("utf-8", "replace") if token else None
        )
        self.write_json(
            {
                "namespaces": [namespace_json(r) for r in records],
                "next_page_token": next_token.decode() if next_token else None,
            }
        )

    @web.authenticated
    @authorized
    async def post(self) -> None:
        data = _fields(self.body_object(), name_required=True)
        client = await self.client()
        record = await client.service.register_namespace(
            data["name"],
            data.get("retention_seconds", CREATE_RETENTION_SECONDS),
            data.get("description", ""),
            data.get("owner_email", ""),
            data.get("data"),
        )
        self.write_json(namespace_json(record), 201)


class NamespaceHandler(DurableAPIHandler):
    """``GET namespaces/{name}`` describes one (404 if there is none); ``PATCH
    namespaces/{name}`` with any of ``retention_seconds``, ``description``,
    ``owner_email``, ``data`` (merged into the namespace's) changes it."""

    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        client = await self.client()
        self.write_json(namespace_json(await client.service.describe_namespace(name)))

    @web.authenticated
    @authorized
    async def patch(self, name: str) -> None:
        data = _fields(self.body_object(), name_required=False)
        if not data:
            raise BadRequest(
                "nothing to update: give retention_seconds, description, owner_email or data"
            )
        client = await self.client()
        record = await client.service.update_namespace(
            name,
            data.get("retention_seconds"),
            data.get("description"),
            data.get("owner_email"),
            data.get("data"),
        )
        self.write_json(namespace_json(record))
