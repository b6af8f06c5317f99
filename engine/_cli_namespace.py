"""``durable operator namespace create|describe|list|update``: namespaces, as
``temporal operator namespace`` (registered by :mod:`engine._cli_operator`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any

from ._service.namespaces import NEW_NAMESPACE_RETENTION_SECONDS, NamespaceRecord
from ._service.visibility import parse_go_duration
from .client import Client


def retention_arg(text: str) -> float:
    """A retention given as Temporal's CLI takes it (``72h``, ``30m``, or days: ``7d``)."""
    value = text.strip()
    seconds: float | None
    if value.endswith("d") and value[:-1].replace(".", "", 1).isdigit():
        seconds = float(value[:-1]) * 86400
    else:
        seconds = parse_go_duration(value)
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give hours, minutes or days, e.g. 72h, 90m or 7d"
        )
    return seconds


def _data_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def add_namespace_commands(
    op_cmds: argparse._SubParsersAction,  # type: ignore[type-arg]  # argparse's own type
    common: argparse.ArgumentParser,
) -> None:
    """Add ``durable operator namespace ...`` under ``durable operator``."""
    ns = op_cmds.add_parser(
        "namespace",
        parents=[common],
        help="create, describe, list and update namespaces",
        description="Every run, task queue and search attribute belongs to one namespace. "
        "A new database has 'default'; each namespace deletes its closed runs once its "
        "retention period has passed.",
    )
    cmds = ns.add_subparsers(dest="action", required=True, metavar="ACTION")

    def named(name: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, parents=[common], help=help_text)
        p.add_argument("name", nargs="?", metavar="NAMESPACE", help="the namespace (or -n)")
        p.add_argument("-n", dest="namespace", default=argparse.SUPPRESS, help="the namespace")
        return p

    def fields(p: argparse.ArgumentParser, retention_default: float | None) -> None:
        p.add_argument(
            "--retention",
            type=retention_arg,
            default=retention_default,
            help="how long closed runs are kept (at least a day; e.g. 72h, 7d)"
            + (" [default: 72h]" if retention_default else ""),
        )
        p.add_argument("--description")
        p.add_argument("--email", dest="owner_email", help="the owner's email")
        p.add_argument("--data", type=_data_arg, action="append", default=[], metavar="KEY=VALUE")

    p = named("create", "register a namespace")
    fields(p, NEW_NAMESPACE_RETENTION_SECONDS)
    p.set_defaults(func=_cmd_create)
    p = named("describe", "a namespace's retention, description and data")
    p.add_argument("--output", "-o", choices=["text", "json"], default="text")
    p.set_defaults(func=_cmd_describe)
    p = named("update", "change a namespace's retention, description, email or data")
    fields(p, None)
    p.set_defaults(func=_cmd_update)
    p = cmds.add_parser("list", parents=[common], help="every namespace")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.set_defaults(func=_cmd_list)


def _name(args: argparse.Namespace) -> str:
    from .cli import CommandError

    given = {n for n in (args.name, getattr(args, "namespace", None)) if n}
    if len(given) != 1:
        raise CommandError("give the namespace once: durable operator namespace ACTION NAME")
    return str(given.pop())


def _run(
    args: argparse.Namespace, fn: Callable[[Client], Awaitable[Any]], *, creates: bool = False
) -> Any:
    from .cli import _with_client

    return _with_client(getattr(args, "db", None), fn, must_exist=not creates)


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:g} days" if days != 1 else "1 day"


def _print(record: NamespaceRecord) -> None:
    print(f"Name         {record.name}")
    print(f"Id           {record.id}")
    print("State        Registered")
    print(f"Retention    {_days(record.retention_seconds)}")
    print(f"Description  {record.description}")
    print(f"OwnerEmail   {record.owner_email}")
    for key, value in sorted(record.data.items()):
        print(f"Data         {key}={value}")


def _cmd_create(args: argparse.Namespace) -> int:
    name = _name(args)
    record = _run(
        args,
        lambda c: c.service.register_namespace(
            name,
            args.retention,
            args.description or "",
            args.owner_email or "",
            dict(args.data),
        ),
        creates=True,
    )
    print(f"created namespace {record.name} (retention {_days(record.retention_seconds)})")
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    name = _name(args)
    record = _run(args, lambda c: c.service.describe_namespace(name))
    if args.output == "json":
        print(json.dumps(record.as_json(), indent=2))
    else:
        _print(record)
    return 0


def _cmd_update(args: argparse.Namespace) -> int:
    from .cli import CommandError

    name = _name(args)
    unchanged = (args.retention, args.description, args.owner_email) == (None, None, None)
    if unchanged and not args.data:
        raise CommandError("nothing to update: give --retention, --description, --email or --data")
    record = _run(
        args,
        lambda c: c.service.update_namespace(
            name, args.retention, args.description, args.owner_email, dict(args.data) or None
        ),
    )
    print(f"updated namespace {record.name}")
    _print(record)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    async def every(client: Client) -> list[NamespaceRecord]:
        records: list[NamespaceRecord] = []
        token: bytes | None = None
        while True:
            page, token = await client.service.list_namespaces(100, token)
            records.extend(page)
            if token is None:
                return records

    records = _run(args, every)
    if args.output == "json":
        print(json.dumps([r.as_json() for r in records], indent=2))
        return 0
    width = max([len(r.name) for r in records] + [9])
    print(f"{'NAMESPACE':<{width}}  RETENTION  DESCRIPTION")
    for r in records:
        print(f"{r.name:<{width}}  {_days(r.retention_seconds):<9}  {r.description}")
    return 0
