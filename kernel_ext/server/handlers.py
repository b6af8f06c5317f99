"""REST API (``/durable/api/v1/``) and web UI (``/durable/``) handlers: thin, JSON in and out.

Errors are ``{"error": {"code": ..., "message": ...}}``: 400 for malformed input (checked
before anything touches the store), 404 for an unknown workflow, 409 for a workflow id
already in use, 500 otherwise.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from engine import Client, WorkflowAlreadyStartedError
from engine.client import ScheduleNotFoundError
from engine.exceptions import (
    InvalidArgumentError,
    NamespaceNotFoundError,
    RPCError,
    RPCStatusCode,
    StoreUnavailableError,
    WorkflowNotFoundError,
    WorkflowUpdateFailedError,
)
from widgets.models import HistoryModel, metadata_text, timeline_ticks
from widgets.search_attributes import SUGGEST_SCRIPT, attribute_values
from widgets.timeline_model import timeline

STATIC = Path(__file__).parent / "static"
AUTH_RESOURCE = "durable"
MAX_LIMIT = 1000
#: Far above any token the engine hands out (about 100 characters).
MAX_PAGE_TOKEN = 1000


class BadRequest(Exception):
    """Malformed input: answered with 400 and this message."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def _epoch_iso(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).isoformat()
    return _jsonable(value)


def execution_json(execution: Any) -> dict[str, Any]:
    """A listed or described run as JSON (times ISO 8601 in UTC, status by name), with
    its ``search_attributes`` decoded (name → value, a list for a KeywordList, datetimes
    ISO 8601: :func:`widgets.search_attributes.attribute_values`); a described one also
    has its ``static_summary`` and ``static_details`` decoded with the client's data
    converter (as text, "" for none: see :func:`widgets.models.metadata_text`)."""
    data = _jsonable(execution)
    data.pop("data_converter", None)  # how to decode, not data
    data.pop("raw_search_attributes", None)  # payloads: decoded below
    if hasattr(execution, "typed_search_attributes"):
        data["search_attributes"] = attribute_values(execution)
    meta = getattr(execution, "raw_user_metadata", None)
    if isinstance(meta, dict):
        converter = getattr(execution, "data_converter", None)
        data["static_summary"] = metadata_text(meta.get("summary"), converter)
        data["static_details"] = metadata_text(meta.get("details"), converter)
    for key in ("pending_activities", "pending_timers"):
        for item in data.get(key, []) or []:
            for field in ("fire_at", "last_heartbeat_time", "next_attempt_at", "scheduled_time"):
                if field in item:
                    item[field] = _epoch_iso(item[field])
    wft = data.get("pending_workflow_task")
    if isinstance(wft, dict) and "scheduled_time" in wft:
        wft["scheduled_time"] = _epoch_iso(wft["scheduled_time"])
    return data


class DurableAPIHandler(APIHandler):
    """Base of the REST handlers: the client, JSON bodies and JSON errors."""

    auth_resource = AUTH_RESOURCE

    @property
    def extension(self) -> Any:
        return self.settings["durable_extension"]

    async def prepare(self) -> None:
        """Jupyter's checks, then the id of a ``workflow/...?workflow_id=`` request.

        Every ``workflows/{id}/...`` endpoint also answers as ``workflow/...`` with the id
        in the query: an id ``.`` or ``..`` cannot travel as a path segment (browsers and
        most HTTP clients resolve dot segments, escaped or not, before sending)."""
        await super().prepare()
        if self.path_kwargs.get("workflow_id") == "":
            values = self.get_query_arguments("workflow_id", strip=False)
            if len(values) != 1 or not values[0]:
                raise BadRequest("give the workflow id once, as ?workflow_id=...")
            self.path_kwargs["workflow_id"] = values[0]

    async def client(self) -> Client:
        """The client of the request's namespace: ``?namespace=`` (default: the server's,
        ``default``). An unknown namespace is a 404 when the request reaches the store."""
        values = self.get_query_arguments("namespace", strip=False)
        if len(values) > 1:
            raise BadRequest("give namespace at most once")
        if values:  # a malformed name is the Client's InvalidArgumentError: a 400
            client: Client = await self.extension.namespace_client(values[0])
            return client
        client = await self.extension.client()
        return client

    def write_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(_jsonable(data)))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error as ``{"error": {"code", "message"}}``."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        code, message = _error_of(status_code, exc, self._reason)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps({"error": {"code": code, "message": message}}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, BadRequest | InvalidArgumentError | _NOT_FOUND) or _answered(value):
            self.log.info("durable API: %s", value)
            return
        if isinstance(value, WorkflowAlreadyStartedError | WorkflowUpdateFailedError):
            self.log.info("durable API: %s", value)
            return
        if isinstance(value, StoreUnavailableError):  # the store has logged the outage
            self.log.warning("durable API: %s", value)
            return
        super().log_exception(typ, value, tb)

    def send_error(self, status_code: int = 500, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        status = _status_of(exc, status_code)
        super().send_error(status, **kwargs)

    # -- input ------------------------------------------------------------------------

    def body_object(self, *, allow_empty: bool = False) -> dict[str, Any]:
        raw = self.request.body
        if not raw.strip():
            if allow_empty:
                return {}
            raise BadRequest("the request body must be a JSON object")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            raise BadRequest(f"the request body is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise BadRequest(f"the request body must be a JSON object, not {type(data).__name__}")
        return data

    async def message(self, workflow_id: str) -> tuple[Any, str, list[Any]]:
        """A signal, query or update request: ``{name, args}`` and the run's handle."""
        data = self.body_object()
        self.check_fields(data, {"name": str}, {"args": list})
        handle = await self.existing_handle(workflow_id)
        return handle, data["name"], list(data.get("args", []))

    @staticmethod
    def check_fields(
        data: dict[str, Any], required: dict[str, type], optional: dict[str, type]
    ) -> None:
        unknown = sorted(set(data) - set(required) - set(optional))
        if unknown:
            allowed = ", ".join(sorted({*required, *optional}))
            raise BadRequest(f"unknown field(s) {', '.join(unknown)}; expected: {allowed}")
        for name in required:
            if name not in data:
                raise BadRequest(f"missing field {name!r}")
        for name, kind in {**required, **optional}.items():
            if name not in data:
                continue
            value = data[name]
            if kind is str and (not isinstance(value, str) or not value.strip()):
                if name in optional and isinstance(value, str):
                    continue
                raise BadRequest(f"field {name!r} must be a non-empty string")
            if kind is list and not isinstance(value, list):
                raise BadRequest(f"field {name!r} must be a JSON array (the arguments)")

    def run_id_arg(self) -> str | None:
        values = self.get_query_arguments("run_id")
        if len(values) > 1:
            raise BadRequest("give run_id at most once")
        if values and not values[0].strip():
            raise BadRequest("run_id must not be empty")
        return values[0] if values else None

    def int_arg(self, name: str, default: int, lo: int, hi: int) -> int:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadRequest(f"{name} must be an integer (got {raw!r})") from None
        if not lo <= value <= hi:
            raise BadRequest(f"{name} must be between {lo} and {hi} (got {value})")
        return value

    async def existing_handle(self, workflow_id: str) -> Any:
        """A handle to ``workflow_id`` after checking it exists (404 otherwise)."""
        run_id = self.run_id_arg()
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        await handle.describe()  # raises WorkflowNotFoundError
        return handle


#: Errors answered with 404: an unknown run, schedule or namespace.
_NOT_FOUND = WorkflowNotFoundError | ScheduleNotFoundError | NamespaceNotFoundError


def _already_exists(exc: BaseException | None) -> bool:
    return isinstance(exc, RPCError) and exc.status == RPCStatusCode.ALREADY_EXISTS


def _answered(exc: BaseException | None) -> bool:
    """An ``RPCError`` the API answers as the client's mistake (``NOT_FOUND`` or
    ``ALREADY_EXISTS``): logged at info, without a traceback. Any other ``RPCError`` is
    the server's and keeps the default logging."""
    return isinstance(exc, RPCError) and exc.status in (
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.ALREADY_EXISTS,
    )


def _status_of(exc: BaseException | None, default: int) -> int:
    if isinstance(exc, BadRequest | InvalidArgumentError):
        return 400
    if isinstance(exc, _NOT_FOUND):
        return 404
    if isinstance(exc, WorkflowAlreadyStartedError) or _already_exists(exc):
        return 409
    if isinstance(exc, WorkflowUpdateFailedError):
        return 422
    if isinstance(exc, StoreUnavailableError):
        return 503
    return default


def _error_of(status: int, exc: BaseException | None, reason: str) -> tuple[str, str]:
    if isinstance(exc, BadRequest):
        return "bad_request", str(exc)
    if isinstance(exc, InvalidArgumentError):
        return "invalid_argument", str(exc)
    if isinstance(exc, _NOT_FOUND):
        return "not_found", str(exc)
    if isinstance(exc, WorkflowAlreadyStartedError):
        return "already_started", str(exc)
    if _already_exists(exc):
        return "already_exists", str(exc)
    if isinstance(exc, WorkflowUpdateFailedError):
        return "update_failed", str(exc)
    if isinstance(exc, StoreUnavailableError):
        return "unavailable", str(exc)
    if isinstance(exc, web.HTTPError):
        return {
            401: "unauthorized",
            403: "forbidden",
            404: "not_found",
            405: "method_not_allowed",
        }.get(status, "http_error"), exc.log_message or reason
    if exc is not None:
        return type(exc).__name__, str(exc) or "".join(traceback.format_exception_only(exc)).strip()
    return "http_error", reason


class InfoHandler(DurableAPIHandler):
    """``GET info``: which database the server reads (its URL with any password as
    ``***``, the backend, and whether the URL came from the environment, the server's
    config or the default), and the environment variable that points kernels at it."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json(self.extension.info())


class WorkflowsHandler(DurableAPIHandler):
    """``GET workflows?query=&limit=&page_token=`` lists runs, newest first, one page per
    request: ``{executions, limit, next_page_token}``, where ``next_page_token`` (an opaque
    string, ``null`` on the last page) is the ``page_token`` of the next request.
    ``POST workflows`` starts a run."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        if "page" in self.request.query_arguments:
            raise BadRequest(
                "page is no longer supported: the list is paged by token; pass the "
                "next_page_token of the previous response as page_token (none for the first page)"
            )
        query = self.get_query_argument("query", "").strip() or None
        limit = self.int_arg("limit", 50, 1, MAX_LIMIT)
        token = self.page_token_arg()
        client = await self.client()
        try:
            listing = client.list_workflows(query, page_size=limit, next_page_token=token)
        except (InvalidArgumentError, ArithmeticError) as err:
            # ArithmeticError: a forged token whose time overflows a float.
            raise BadRequest(_bad_page_token(token)) from err
        await listing.fetch_next_page()
        next_token = listing.next_page_token
        self.write_json(
            {
                "executions": [execution_json(r) for r in listing.current_page or []],
                "limit": limit,
                "next_page_token": None if next_token is None else next_token.decode("ascii"),
            }
        )

    def page_token_arg(self) -> bytes | None:
        values = self.get_query_arguments("page_token")
        if len(values) > 1:
            raise BadRequest("give page_token at most once")
        if not values or not values[0]:
            return None
        if len(values[0]) > MAX_PAGE_TOKEN:
            raise BadRequest(_bad_page_token(values[0][:40].encode()))
        try:
            return values[0].encode("ascii")
        except UnicodeEncodeError:
            raise BadRequest(_bad_page_token(values[0].encode())) from None

    @web.authenticated
    @authorized
    async def post(self) -> None:
        data = self.body_object()
        self.check_fields(
            data,
            {"workflow_type": str, "workflow_id": str, "task_queue": str},
            {"args": list},
        )
        client = await self.client()
        handle = await client.start_workflow(
            data["workflow_type"],
            id=data["workflow_id"],
            task_queue=data["task_queue"],
            args=data.get("args", []),
        )
        self.set_header(
            "Location",
            url_path_join(self.base_url, "durable/api/v1/workflows", data["workflow_id"]),
        )
        self.write_json({"workflow_id": handle.id, "run_id": handle.result_run_id}, 201)


def _bad_page_token(token: bytes | None) -> str:
    shown = (token or b"")[:40].decode("ascii", "replace")
    return (
        f"page_token {shown!r} is not a token this API handed out: pass the "
        "next_page_token of the previous response unchanged (or no page_token for the "
        "first page)"
    )


class WorkflowHandler(DurableAPIHandler):
    """``GET workflows/{id}[?run_id=]``: describe, with pending activities and timers."""

    @web.authenticated
    @authorized
    async def get(self, workflow_id: str) -> None:
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=self.run_id_arg())
        self.write_json(execution_json(await handle.describe()))


class HistoryHandler(DurableAPIHandler):
    """``GET workflows/{id}/history``: the history in Temporal's JSON."""

    @web.authenticated
    @authorized
    async def get(self, workflow_id: str) -> None:
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=self.run_id_arg())
        history = await handle.fetch_history()
        self.write_json(history.to_json_dict())


class AttemptsHandler(DurableAPIHandler):
    """``GET workflows/{id}/attempts``: every activity attempt of the run."""

    @web.authenticated
    @authorized
    async def get(self, workflow_id: str) -> None:
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=self.run_id_arg())
        self.write_json({"attempts": await handle.fetch_attempts()})


class CompactHandler(DurableAPIHandler):
    """``GET workflows/{id}/compact``: the compact history, one row per activity, timer,
    child, signal, update, marker, failed workflow task and the run itself: the rows of
    :class:`widgets.models.HistoryModel`, as the HistoryView widget gets them.

    The user's summaries are decoded here, with the client's data converter (its payload
    codec included): each row's ``user_summary`` / ``user_details``, the run's
    ``static_summary`` / ``static_details``, and ``event_summaries`` (event id → the
    summary recorded on that event) for the full history, whose events stay in Temporal's
    JSON at ``history``. All are plain text, for the page to show as text."""

    @web.authenticated
    @authorized
    async def get(self, workflow_id: str) -> None:
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=self.run_id_arg())
        history = await handle.fetch_history()
        model = HistoryModel(history.events, data_converter=client.data_converter)
        summaries = {
            str(e.event_id): text
            for e in model.events
            if (text := model.user_metadata(e.event_id)[0])
        }
        self.write_json(
            {
                "workflow_id": history.workflow_id,
                "run_id": history.run_id,
                "event_count": len(model.events),
                "failure_count": model.failures,
                "closed": model.closed,
                "static_summary": model.static_summary,
                "static_details": model.static_details,
                "event_summaries": summaries,
                "rows": model.rows("compact", 0, model.count("compact")),
            }
        )


class TimelineHandler(DurableAPIHandler):
    """``GET workflows/{id}/timeline``: the lanes of :func:`widgets.timeline_model.timeline` (bars
    and ticks, seconds since the run's first event), ``now`` while the run is open, and
    the axis ``ticks`` (``[seconds, label]``): what the Timeline widget draws, with the
    user's summaries decoded by the client's data converter (each lane's ``summary``, a
    child's ``details``, the run's ``summary`` / ``details``)."""

    @web.authenticated
    @authorized
    async def get(self, workflow_id: str) -> None:
        client = await self.client()
        handle = client.get_workflow_handle(workflow_id, run_id=self.run_id_arg())
        history = await handle.fetch_history()
        model = HistoryModel(history.events, data_converter=client.data_converter)
        attempts = await handle.fetch_attempts()
        now = None if model.closed else client.clock.now()
        data = timeline(model, attempts, now=now).to_json()
        data["ticks"] = timeline_ticks(data["end"], data["now"])
        self.write_json(data)


class SignalHandler(DurableAPIHandler):
    """``POST workflows/{id}/signal`` with ``{name, args}``."""

    @web.authenticated
    @authorized
    async def post(self, workflow_id: str) -> None:
        handle, name, args = await self.message(workflow_id)
        await handle.signal(name, args=args)
        self.write_json({"ok": True}, 202)


class QueryHandler(DurableAPIHandler):
    """``POST workflows/{id}/query`` with ``{name, args}`` → ``{result}``."""

    @web.authenticated
    @authorized
    async def post(self, workflow_id: str) -> None:
        handle, name, args = await self.message(workflow_id)
        result = await handle.query(name, args=args)
        self.write_json({"result": result})


class UpdateHandler(DurableAPIHandler):
    """``POST workflows/{id}/update`` with ``{name, args}`` → ``{result}``; a rejected or
    failed update is a 422 with the workflow's message."""

    @web.authenticated
    @authorized
    async def post(self, workflow_id: str) -> None:
        handle, name, args = await self.message(workflow_id)
        result = await handle.execute_update(name, args=args)
        self.write_json({"result": result})


class CancelHandler(DurableAPIHandler):
    """``POST workflows/{id}/cancel`` with an optional ``{reason}``."""

    @web.authenticated
    @authorized
    async def post(self, workflow_id: str) -> None:
        data = self.body_object(allow_empty=True)
        self.check_fields(data, {}, {"reason": str})
        handle = await self.existing_handle(workflow_id)
        await handle.cancel(data.get("reason", ""))
        self.write_json({"ok": True}, 202)


class TerminateHandler(DurableAPIHandler):
    """``POST workflows/{id}/terminate`` with an optional ``{reason}``."""

    @web.authenticated
    @authorized
    async def post(self, workflow_id: str) -> None:
        data = self.body_object(allow_empty=True)
        self.check_fields(data, {}, {"reason": str})
        handle = await self.existing_handle(workflow_id)
        await handle.terminate(reason=data.get("reason") or None)
        self.write_json({"ok": True})


class UnknownAPIHandler(DurableAPIHandler):
    """Anything else under the API prefix: a JSON 404 (not Jupyter's HTML page)."""

    @web.authenticated
    @authorized
    async def get(self, *args: Any) -> None:
        raise web.HTTPError(404, f"no such endpoint: GET {self.request.path}")

    @web.authenticated
    @authorized
    async def post(self, *args: Any) -> None:
        raise web.HTTPError(404, f"no such endpoint: POST {self.request.path}")


class PageHandler(JupyterHandler):
    """``/durable/``: the web UI page (after Jupyter's login, or ``?token=``)."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    def get(self) -> None:
        page = (STATIC / "index.html").read_text(encoding="utf-8")
        base = url_path_join(self.base_url, "durable/")
        page = page.replace("{{base}}", _attr(base)).replace(
            "{{xsrf}}", _attr(self.xsrf_token.decode("ascii"))
        )
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(page)


def _attr(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def routes() -> list[tuple[str, Any, dict[str, Any]] | tuple[str, Any]]:
    """URL patterns (relative to the server's base URL)."""
    api = r"/durable/api/v1"
    per_run: list[tuple[str, Any]] = [
        ("/history", HistoryHandler),
        ("/attempts", AttemptsHandler),
        ("/compact", CompactHandler),
        ("/timeline", TimelineHandler),
        ("/signal", SignalHandler),
        ("/query", QueryHandler),
        ("/update", UpdateHandler),
        ("/cancel", CancelHandler),
        ("/terminate", TerminateHandler),
        ("", WorkflowHandler),
    ]
    # The id as a path segment (decoded: %2F is a "/" of the id), or, under workflow/,
    # in the query (?workflow_id=; an empty group, filled in by DurableAPIHandler.prepare).
    by_path = [(rf"{api}/workflows/(?P<workflow_id>[^/]+){sub}/?", h) for sub, h in per_run]
    by_query = [(rf"{api}/workflow(?P<workflow_id>){sub}/?", h) for sub, h in per_run]
    from .namespace_handlers import NamespaceHandler, NamespacesHandler
    from .schedule_handlers import (
        PauseHandler,
        ScheduleHandler,
        SchedulesHandler,
        TriggerHandler,
        UnpauseHandler,
    )
    from .visibility_handlers import CountHandler, SearchAttributeHandler, SearchAttributesHandler

    return [
        (rf"{api}/info/?", InfoHandler),
        (rf"{api}/workflows/?", WorkflowsHandler),
        # Before workflows/{id}: a run whose id is "count" is workflow?workflow_id=count.
        (rf"{api}/workflows/count/?", CountHandler),
        (rf"{api}/search-attributes/?", SearchAttributesHandler),
        (rf"{api}/search-attributes/(?P<name>[^/]+)/?", SearchAttributeHandler),
        (rf"{api}/namespaces/?", NamespacesHandler),
        (rf"{api}/namespaces/(?P<name>[^/]+)/?", NamespaceHandler),
        (rf"{api}/schedules/?", SchedulesHandler),
        *[
            (rf"{api}/{prefix}{sub}/?", h)
            for prefix in ("schedules/(?P<schedule_id>[^/]+)", "schedule(?P<schedule_id>)")
            for sub, h in (
                ("/trigger", TriggerHandler),
                ("/pause", PauseHandler),
                ("/unpause", UnpauseHandler),
                ("", ScheduleHandler),
            )
        ],
        *by_path,
        *by_query,
        (rf"{api}(/.*)?", UnknownAPIHandler),
        (r"/durable", web.RedirectHandler, {"url": "durable/"}),
        (r"/durable/", PageHandler),
        # The filter box's suggestions, shared with the ExecutionList widget.
        (
            r"/durable/static/(suggest\.js)",
            web.StaticFileHandler,
            {"path": str(SUGGEST_SCRIPT.parent)},
        ),
        (r"/durable/static/(.*)", web.StaticFileHandler, {"path": str(STATIC)}),
    ]
