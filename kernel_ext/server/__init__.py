"""The Jupyter server extension: hosts the service's duties, the REST API and the web UI."""

from __future__ import annotations

from .app import DurableExtension

__all__ = ["DurableExtension"]
