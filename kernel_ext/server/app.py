"""The server extension app: opens the store, hosts the service's duties, wires handlers.

The app only composes objects and manages their lifecycle; handlers are thin. The store is
opened on the server's event loop (in the async start hook, or lazily on the first request
when the server was started without running that hook, as in pytest-jupyter).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jupyter_server.extension.application import ExtensionApp
from sqlalchemy.engine import make_url
from traitlets import Unicode, default

from engine import Client

from . import handlers

ENV_VAR = "DURABLE_DATABASE_URL"
#: Query parameters of a database URL that carry a secret (libpq's, and common spellings).
SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "sslpassword", "passfile"})
#: ``scheme://user:password@``, as SQLAlchemy reads it (the password runs to the first @).
_USERINFO = re.compile(r"^([\w+]+://[^:/]*):[^@]*@")


def redact_url(url: str) -> str:
    """``url`` with its password (and any password query parameter) shown as ``***``.

    The rest is left exactly as written, so the URL still reads as the one configured.
    """
    base, sep, query = url.partition("?")
    base = _USERINFO.sub(r"\1:***@", base, count=1)
    if sep:
        params = []
        for param in query.split("&"):
            key, eq, _value = param.partition("=")
            if eq and unquote(key).strip().lower() in SECRET_PARAMS:
                param = f"{key}=***"
            params.append(param)
        query = "&".join(params)
    return base + sep + query


def resolve_url(configured: str, env_value: str | None, root: Path) -> tuple[str, str]:
    """The store URL and where it came from: ``"environment"`` (``$DURABLE_DATABASE_URL``,
    the trait's default), ``"config"`` (``DurableExtension.database_url``) or ``"default"``
    (``.durable/durable.db`` under the server's root directory)."""
    if not configured:
        return f"sqlite:///{root / '.durable' / 'durable.db'}", "default"
    return configured, "environment" if configured == env_value else "config"


def backend_of(url: str) -> str:
    """``sqlite``, ``postgresql``, or the URL's own backend name (``unknown`` if unreadable)."""
    try:
        name = make_url(url).get_backend_name()
    except Exception:
        return "unknown"
    return "postgresql" if name == "postgres" else name


class DurableExtension(ExtensionApp):
    """durable-notebook inside the Jupyter server (``/durable/`` and ``/durable/api/v1/``)."""

    name = "kernel_ext"
    extension_url = "/durable/"
    load_other_extensions = True

    database_url = Unicode(
        help=(
            "SQLAlchemy URL of the durable store (SQLite or PostgreSQL). Defaults to "
            "$DURABLE_DATABASE_URL, else sqlite:///<root_dir>/.durable/durable.db. The URL "
            "is exported as DURABLE_DATABASE_URL to the kernels the server starts."
        ),
        config=True,
    )

    @default("database_url")
    def _default_database_url(self) -> str:
        return os.environ.get(ENV_VAR, "")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client: Client | None = None
        #: Clients of the other namespaces the REST API was asked about (``?namespace=``),
        #: sharing the extension client's store.
        self._namespace_clients: dict[str, Client] = {}
        self._connecting: asyncio.Future[Client] | None = None
        self._hosting = False
        self._previous_env: str | None = None
        self._env_set = False
        self.resolved_url = ""
        #: Where the URL came from: "environment", "config" or "default".
        self.url_source = "default"

    # -- lifecycle --------------------------------------------------------------------

    def initialize_settings(self) -> None:
        """Resolve the store URL and export it to the kernels this server starts."""
        root = Path(self.serverapp.root_dir if self.serverapp else os.getcwd())
        url, self.url_source = resolve_url(self.database_url, os.environ.get(ENV_VAR), root)
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.resolved_url = url
        # Kernels inherit the server's environment: they open the same store.
        self._previous_env = os.environ.get(ENV_VAR)
        os.environ[ENV_VAR] = url
        self._env_set = True
        self.settings["durable_extension"] = self
        self.log.info("durable-notebook: store %s", redact_url(url))

    def info(self) -> dict[str, Any]:
        """What the web UI and ``GET /durable/api/v1/info`` say about the store (no secrets)."""
        return {
            "database": {
                "url": redact_url(self.resolved_url),
                "backend": backend_of(self.resolved_url),
                "source": self.url_source,
                "env_var": ENV_VAR,
            },
        }

    def initialize_handlers(self) -> None:
        """Register the REST API and the web UI."""
        self.handlers.extend(handlers.routes())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """Open the store and start hosting timers, timeouts and retries."""
        await self.client()

    async def client(self) -> Client:
        """The extension's client (connected, and hosting the service's duties)."""
        if self._client is not None:
            return self._client
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        return await asyncio.shield(self._connecting)

    async def namespace_client(self, namespace: str) -> Client:
        """A client of ``namespace`` on the extension's store (the extension's own for
        its namespace)."""
        base = await self.client()
        if namespace == base.namespace:
            return base
        found = self._namespace_clients.get(namespace)
        if found is None:
            # Only namespaces that exist are kept (NamespaceNotFoundError otherwise: a
            # 404), so requests naming others cannot grow the cache.
            await base.service.describe_namespace(namespace)
            found = Client(
                base.store,
                namespace=namespace,
                data_converter=base.data_converter,
                clock=base.service.clock,
            )
            self._namespace_clients[namespace] = found
        return found

    async def _connect(self) -> Client:
        try:
            client = await Client.connect(self.resolved_url)
            client.start_service()
        except BaseException:
            self._connecting = None
            raise
        self._hosting = True
        self._client = client
        self.log.info("durable-notebook: hosting timers, timeouts, retries and schedules")
        return client

    async def stop_extension(self) -> None:
        """Stop hosting, close the store and restore the environment."""
        if self._connecting is not None and self._client is None:
            try:
                await self._connecting
            except Exception:
                pass
        client, self._client, self._connecting = self._client, None, None
        self._namespace_clients.clear()  # they share the store closed below
        if client is not None:
            if self._hosting:
                self._hosting = False
                await client.stop_service()
            await client.close()
        if self._env_set:
            self._env_set = False
            if self._previous_env is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = self._previous_env
