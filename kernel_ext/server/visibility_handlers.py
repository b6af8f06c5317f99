"""REST handlers for finding runs: counting them (Temporal's List Filter, ``GROUP BY
ExecutionStatus``) and the namespace's search attributes (list, register, remove).

``routes()`` in :mod:`kernel_ext.server.handlers` mounts them under ``/durable/api/v1/``,
with the REST conventions of that module (``{"error": {"code", "message"}}``, 400 for a
bad filter or body, Jupyter's authentication and XSRF checks).
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from engine.exceptions import InvalidArgumentError
from engine.operator import AddSearchAttributesRequest, RemoveSearchAttributesRequest
from widgets.search_attributes import TYPE_NAMES, catalogue

from .handlers import BadRequest, DurableAPIHandler


class CountHandler(DurableAPIHandler):
    """``GET workflows/count?query=``: how many runs match the List Filter ``query``
    (none: every run of the namespace), as ``client.count_workflows`` counts them:
    ``{"count": n, "groups": [{"group_values": ["Running"], "count": n}, ...]}``, the
    groups given by ``... GROUP BY ExecutionStatus`` (else ``[]``). A filter the engine
    cannot read is a 400 whose message names the column.

    This path is matched before ``workflows/{id}``: a workflow whose id is literally
    ``count`` is described at ``workflow?workflow_id=count`` (its other endpoints, such as
    ``workflows/count/history``, are reached as usual)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        query = self.get_query_argument("query", "").strip() or None
        client = await self.client()
        counted = await client.count_workflows(query)
        self.write_json(
            {
                "count": counted.count,
                "groups": [
                    {"group_values": list(g.group_values), "count": g.count} for g in counted.groups
                ],
            }
        )


class SearchAttributesHandler(DurableAPIHandler):
    """``GET search-attributes``: ``{"custom": {name: type}, "system": {name: type}}``
    for the server's namespace (type names Keyword, Text, Int, Double, Bool, Datetime,
    KeywordList). ``POST search-attributes`` with ``{"name": ..., "type": ...}`` registers
    a custom attribute (201; one already registered is left as it is, as on Temporal);
    a bad body is a 400 that says which field was wrong."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        client = await self.client()
        self.write_json(await catalogue(client))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        data = self.body_object()
        self.check_fields(data, {"name": str, "type": str}, {})
        name, kind = data["name"].strip(), data["type"].strip()
        if kind not in TYPE_NAMES:
            raise BadRequest(
                f"field 'type': {kind!r} is not a search attribute type; one of "
                + ", ".join(TYPE_NAMES)
            )
        client = await self.client()
        names = await catalogue(client)
        if name in names["system"]:
            raise BadRequest(f"field 'name': {name} is a system search attribute")
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest({name: kind})
            )
        except InvalidArgumentError as err:
            raise BadRequest(f"field 'name' ({name!r}): {err}") from err
        registered = (await catalogue(client))["custom"]
        self.write_json({"name": name, "type": registered.get(name, kind)}, 201)


class SearchAttributeHandler(DurableAPIHandler):
    """``DELETE search-attributes/{name}``: unregister a custom attribute (its values are
    cleared from the namespace's runs); 404 when no custom attribute has that name."""

    @web.authenticated
    @authorized
    async def delete(self, name: str) -> None:
        client = await self.client()
        if name not in (await catalogue(client))["custom"]:
            raise web.HTTPError(404, f"no custom search attribute {name!r}")
        await client.operator_service.remove_search_attributes(
            RemoveSearchAttributesRequest([name])
        )
        self.write_json({"ok": True})
