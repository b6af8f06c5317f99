"""``durable operator search-attribute ...``: custom search attributes of a namespace, as
``temporal operator search-attribute`` (registered by :mod:`engine.cli`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ._cli_namespace import add_namespace_commands
from ._service.visibility import SYSTEM, TYPE_NAMES, type_name
from .client import Client


def add_operator_commands(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]  # argparse's own type
    common: argparse.ArgumentParser,
) -> None:
    """Add ``durable operator search-attribute create|list|remove`` and ``durable operator
    namespace create|describe|list|update``."""
    operator = commands.add_parser(
        "operator", parents=[common], help="namespaces and search attributes"
    )
    op_cmds = operator.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    add_namespace_commands(op_cmds, common)
    sa = op_cmds.add_parser(
        "search-attribute",
        parents=[common],
        help="register, list and remove custom search attributes",
        description="A fact you will find runs by must be a search attribute before the "
        "run starts, and a custom one must be registered with its type first.",
    )
    sa_cmds = sa.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sa_cmds.add_parser("create", parents=[common], help="register attributes")
    p.add_argument("--name", action="append", required=True, help="attribute name (repeatable)")
    p.add_argument(
        "--type",
        action="append",
        required=True,
        choices=TYPE_NAMES,
        help="its type, one per --name (or one for all)",
    )
    p.add_argument("-n", dest="namespace", default=argparse.SUPPRESS, help="the namespace")
    p.set_defaults(func=_cmd_create)
    p = sa_cmds.add_parser("list", parents=[common], help="the registered and system ones")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.add_argument("-n", dest="namespace", default=argparse.SUPPRESS, help="the namespace")
    p.set_defaults(func=_cmd_list)
    p = sa_cmds.add_parser("remove", parents=[common], help="unregister attributes")
    p.add_argument("--name", action="append", required=True, help="attribute name (repeatable)")
    p.add_argument("-n", dest="namespace", default=argparse.SUPPRESS, help="the namespace")
    p.set_defaults(func=_cmd_remove)


def _namespace(args: argparse.Namespace) -> str:
    return str(getattr(args, "namespace", None) or "default")


def _with(
    args: argparse.Namespace, fn: Callable[[Client], Awaitable[Any]], *, creates: bool = False
) -> Any:
    """``fn(client)``; a SQLite database that is not there is an error unless the command
    ``creates`` something (a registration may come before any run)."""
    from .cli import _with_client

    return _with_client(
        getattr(args, "db", None), fn, namespace=_namespace(args), must_exist=not creates
    )


def _cmd_create(args: argparse.Namespace) -> int:
    from .cli import CommandError

    types = args.type * len(args.name) if len(args.type) == 1 else args.type
    if len(types) != len(args.name):
        raise CommandError(
            f"{len(args.name)} --name but {len(args.type)} --type: give one --type per --name "
            "(or one for all)"
        )
    wanted = dict(zip(args.name, types, strict=True))

    async def create(client: Client) -> tuple[list[str], dict[str, Any]]:
        before = await client.service.list_search_attributes(client.namespace)
        added = await client.service.add_search_attributes(client.namespace, wanted)
        return added, before

    added, before = _with(args, create, creates=True)
    for name, kind in wanted.items():
        if name in added:
            print(f"registered {name} ({kind}) in namespace {_namespace(args)}")
        else:
            had = type_name(before[name])
            note = "" if had == kind else f"; it stays {had} (remove it first to change its type)"
            print(f"{name} was registered already{note}", file=sys.stdout)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    async def fetch(client: Client) -> dict[str, Any]:
        return dict(await client.service.list_search_attributes(client.namespace))

    custom = _with(args, fetch)
    if args.output == "json":
        print(
            json.dumps(
                {
                    "custom": {n: type_name(t) for n, t in sorted(custom.items())},
                    "system": {n: type_name(a.value_type) for n, a in SYSTEM.items()},
                },
                indent=2,
            )
        )
        return 0
    width = max([len(n) for n in [*custom, *SYSTEM]] + [4])
    print(f"{'NAME':<{width}}  TYPE         KIND")
    for name, kind in sorted(custom.items()):
        print(f"{name:<{width}}  {type_name(kind):<11}  custom")
    for name, attr in SYSTEM.items():
        print(f"{name:<{width}}  {type_name(attr.value_type):<11}  system")
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    async def remove(client: Client) -> None:
        await client.service.remove_search_attributes(client.namespace, args.name)

    _with(args, remove)
    for name in args.name:
        print(f"removed {name} from namespace {_namespace(args)}")
    return 0
