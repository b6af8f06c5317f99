"""``durable workflow list`` and ``durable workflow count``: finding runs with Temporal's
List Filter, as ``temporal workflow list|count`` (registered by :mod:`engine.cli`)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from .client import Client, WorkflowExecution


def add_visibility_commands(
    wf_cmds: argparse._SubParsersAction,  # type: ignore[type-arg]  # argparse's own type
    common: argparse.ArgumentParser,
) -> None:
    """Add ``workflow list`` and ``workflow count`` under ``durable workflow``."""
    p = wf_cmds.add_parser(
        "list", parents=[common], help="list runs: open ones first, then closed, newest first"
    )
    p.add_argument(
        "--query",
        "-q",
        help="Temporal's List Filter, e.g. \"WorkflowType = 'Order' AND "
        "ExecutionStatus = 'Running'\" or \"CustomerId = 'c-1' ORDER BY StartTime\"",
    )
    p.add_argument("--limit", type=int, default=1000, help="at most this many runs (1000)")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.set_defaults(func=_cmd_list)
    p = wf_cmds.add_parser("count", parents=[common], help="how many runs match a filter")
    p.add_argument(
        "--query",
        "-q",
        help="Temporal's List Filter; end it with GROUP BY ExecutionStatus for a count per status",
    )
    p.add_argument("--output", "-o", choices=["text", "json"], default="text")
    p.set_defaults(func=_cmd_count)


def _cmd_list(args: argparse.Namespace) -> int:
    from .cli import (
        EXIT_OK,
        CommandError,
        _err,
        _execution_json,
        _json_default,
        _out,
        _table,
        _time,
        _with_client,
    )

    if args.limit < 1:
        raise CommandError(f"--limit must be at least 1 (got {args.limit})")

    async def fetch(client: Client) -> list[WorkflowExecution]:
        return [e async for e in client.list_workflows(args.query, limit=args.limit)]

    executions = _with_client(args.db, fetch, namespace=args.namespace)
    if args.output == "json":
        _out(json.dumps([_execution_json(e) for e in executions], indent=2, default=_json_default))
        return EXIT_OK
    rows = [
        [
            e.id,
            e.run_id,
            e.workflow_type,
            e.status.name,
            _time(e.start_time),
            _time(e.close_time),
            str(e.history_length),
            _attributes_text(e),
        ]
        for e in executions
    ]
    headers = ["WORKFLOW ID", "RUN ID", "TYPE", "STATUS", "START TIME", "CLOSE TIME", "EVENTS"]
    if not any(row[-1] for row in rows):
        rows = [row[:-1] for row in rows]
    else:
        headers.append("SEARCH ATTRIBUTES")
    _out(_table(headers, rows))
    if not executions:
        _err("no workflows" + (f" match {args.query!r}" if args.query else ""))
    return EXIT_OK


def _attributes_text(execution: WorkflowExecution) -> str:
    """``CustomerId=c-1 Amount=5 Tags=["a"]``: the run's search attributes by name (a
    KeywordList as a JSON list, a Datetime in ISO 8601)."""
    parts = []
    for pair in sorted(execution.typed_search_attributes, key=lambda p: p.key.name):
        value = pair.value
        if isinstance(value, datetime):
            text = value.isoformat()
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(list(value) if isinstance(value, list | tuple) else value)
        parts.append(f"{pair.key.name}={text}")
    return " ".join(parts)


def _cmd_count(args: argparse.Namespace) -> int:
    from .cli import EXIT_OK, _out, _with_client

    async def count(client: Client) -> Any:
        return await client.count_workflows(args.query)

    result = _with_client(args.db, count, namespace=args.namespace)
    if args.output == "json":
        _out(
            json.dumps(
                {
                    "count": result.count,
                    "groups": [
                        {"group_values": list(g.group_values), "count": g.count}
                        for g in result.groups
                    ],
                },
                indent=2,
            )
        )
        return EXIT_OK
    _out(f"Total: {result.count}")
    for group in result.groups:
        _out(f"  {', '.join(str(v) for v in group.group_values)}: {group.count}")
    return EXIT_OK
