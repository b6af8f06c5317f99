"""The widgets' static front-end files: ES modules and the shared style sheet."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CSS", "STATIC", "esm"]

STATIC = Path(__file__).parent / "static"
#: The style sheet every widget loads.
CSS = STATIC / "widgets.css"


def esm(name: str, *scripts: str) -> str:
    """The ES module ``static/<name>`` with the shared helpers (``common.js``) and then
    the plain ``scripts`` it uses (``"suggest.js"``) in front."""
    parts = ["common.js", *scripts, name]
    return "".join((STATIC / part).read_text(encoding="utf-8") for part in parts)
