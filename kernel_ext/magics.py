"""The ``%durable`` line magic: parses its arguments and delegates to the kernel's session."""

from __future__ import annotations

import argparse
import shlex
from typing import NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from engine.exceptions import DurableError

from . import display
from .kernel_session import DEFAULT_TASK_QUEUE, Session, SessionMoveError

__all__ = ["DurableMagics", "build_parser"]

USAGE = """\
%durable status                                  database, workers, task queues, metrics
%durable worker start|stop [--task-queue Q]      start or stop the kernel's worker for Q
%durable list [QUERY]                            runs, e.g. WorkflowType = 'Order'
%durable history WORKFLOW_ID [--run-id R]        the events of a run
%durable replay WORKFLOW_ID [--run-id R]         replay a run against this kernel's code"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%durable: {message}\n{USAGE}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The argument grammar of ``%durable``."""
    parser = _Parser(prog="%durable", add_help=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("status", add_help=False)
    worker = sub.add_parser("worker", add_help=False)
    worker.add_argument("action", choices=["start", "stop"])
    worker.add_argument("--task-queue", "-q", default=DEFAULT_TASK_QUEUE)
    sub.add_parser("list", add_help=False)  # its query is taken verbatim, see durable()
    for name in ("history", "replay"):
        p = sub.add_parser(name, add_help=False)
        p.add_argument("workflow_id")
        p.add_argument("--run-id", default=None)
    return parser


@magics_class
class DurableMagics(Magics):
    """``%durable ...``: status, workers, listing, history and replay of the kernel's runs."""

    def __init__(self, shell: object, session: Session) -> None:
        super().__init__(shell)  # type: ignore[no-untyped-call]
        self.session = session
        self.parser = build_parser()

    @line_magic  # type: ignore[untyped-decorator]
    def durable(self, line: str) -> None:
        """Manage the kernel's durable workers and inspect runs (``%durable`` for help)."""
        if not line.strip():
            print(USAGE)
            return
        command, _, rest = line.strip().partition(" ")
        if command == "list":  # the query is kept verbatim: its quotes belong to it
            args = argparse.Namespace(command="list", query=rest.strip())
        else:
            try:
                words = shlex.split(line)
            except ValueError as err:
                raise UsageError(f"%durable: {err}") from err
            args = self.parser.parse_args(words)
        try:  # first, the database Client.connect() opens now (a notebook run again)
            moved = self.session.follow_env()
        except SessionMoveError as err:
            err.reported = True
            raise UsageError(f"%durable {args.command}: {err}") from err
        if moved:
            print(moved)
        try:
            self._dispatch(args)
        except DurableError as err:  # engine errors say what to do: no traceback needed
            raise UsageError(f"%durable {args.command}: {err}") from err

    def _dispatch(self, args: argparse.Namespace) -> None:
        s = self.session
        if args.command == "status":
            print(display.format_status(s.database_url, s.workers()))
        elif args.command == "worker":
            action = s.start_worker if args.action == "start" else s.stop_worker
            print(action(args.task_queue))
        elif args.command == "list":
            print(display.format_runs(s.list_runs(args.query)))
        elif args.command == "history":
            history = s.history(args.workflow_id, args.run_id)
            print(display.format_history(history.events))
        elif args.command == "replay":
            print(display.format_replay(s.replay(args.workflow_id, args.run_id)))
