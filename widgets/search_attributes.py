"""Search attributes as the views show them: Temporal's type names, the names a filter
box suggests, and a run's values as JSON and as text.

Shared by :class:`widgets.ExecutionList` and the web UI's REST API (``kernel_ext``), which
may use only what ``engine``'s public modules export (the type names come from
``engine.operator``).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from engine import Client, WorkflowExecution
from engine.operator import TYPE_NAMES, type_name

__all__ = [
    "SUGGEST_SCRIPT",
    "TYPE_NAMES",
    "attribute_text",
    "attribute_values",
    "catalogue",
    "suggestions",
    "type_name",
]

#: The filter box's suggestions (a plain script: the widget's module has it in front, and
#: the web UI loads it with a ``<script>`` tag).
SUGGEST_SCRIPT = Path(__file__).parent / "static" / "suggest.js"


async def catalogue(client: Client) -> dict[str, dict[str, str]]:
    """The attributes a filter of ``client``'s namespace may name, by kind, with their
    type names: ``{"custom": {"CustomerId": "Keyword"}, "system": {"WorkflowId": ...}}``."""
    listed = await client.operator_service.list_search_attributes()
    return {
        "custom": {n: type_name(t) for n, t in sorted(listed.custom_attributes.items())},
        "system": {n: type_name(t) for n, t in listed.system_attributes.items()},
    }


def suggestions(names: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The catalogue as the filter box's suggestions: ``{name, type, custom}`` each, the
    namespace's custom attributes first, then the system ones, each kind by name."""
    return [
        {"name": name, "type": kind, "custom": custom}
        for custom, group in ((True, names.get("custom", {})), (False, names.get("system", {})))
        for name, kind in sorted(group.items())
    ]


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


def attribute_values(execution: WorkflowExecution) -> dict[str, Any]:
    """The search attributes a listed or described run holds, decoded, by name: one value
    each (a list for a KeywordList, or for an untyped value of several), datetimes in ISO
    8601. Unset attributes are left out."""
    out: dict[str, Any] = {}
    for pair in execution.typed_search_attributes:
        out[pair.key.name] = _json_value(pair.value)
    # Values written without a type (the older dict form) are not in the typed view.
    for name, values in execution.search_attributes.items():
        if name in out or not values:
            continue
        out[name] = _json_value(values[0] if len(values) == 1 else list(values))
    return dict(sorted(out.items()))


def attribute_text(value: Any) -> str:
    """One decoded value as the chips show it: lists joined with ``", "``, booleans as
    ``true`` / ``false`` (as a filter writes them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(attribute_text(v) for v in value)
    return str(value)
