"""``durable``: list, inspect, start, signal, cancel and terminate workflows; export and replay
histories.

Every command takes ``--db URL`` (default: as ``Client.connect()``: ``DURABLE_DATABASE_URL``
or ``./.durable/durable.db``) and ``--namespace NS`` (default ``default``)::

    durable workflow list [--query Q] [--limit N] [--output table|json]
    durable workflow count [--query Q] [--output text|json]
    durable workflow describe ID [--run-id R] [--output table|json]
    durable workflow show ID [--run-id R] [--output table|json]
    durable workflow start --type T --task-queue Q --workflow-id ID [--input JSON ...]
    durable workflow signal ID --name N [--input JSON ...]
    durable workflow query ID --name N [--input JSON ...]
    durable workflow cancel ID [--reason R]
    durable workflow terminate ID [--reason R]
    durable history export ID [ID ...] --format json|csv|parquet [--output PATH]
    durable replay HISTORY.json [...] --workflows module:Class [...]
    durable operator namespace create|describe|list|update [NAME] [--retention 72h ...]
    durable operator search-attribute create|list|remove --name N [--type T]
    durable schedule list|describe|create|trigger|pause|unpause|backfill|delete [-s ID ...]

``--output -`` writes to stdout; ``history export --format parquet`` without ``--output``
writes ``ID.parquet`` in the current directory. A SQLite ``--db`` in a directory that does
not exist is an error (never a new, empty database), and so is a missing database file for
every command but ``workflow start``.

Exit codes: 0 success; 1 a replay failed (``durable replay``: non-determinism or an error in
workflow code); 2 bad input or an error (one line on stderr, ``durable: error: ...``); 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import json
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from ._cli_db import add_db_commands
from ._cli_operator import add_operator_commands
from ._cli_schedule import add_schedule_commands
from ._cli_visibility import add_visibility_commands
from ._model.limits import check_text
from .client import Client, WorkflowExecution, WorkflowExecutionDescription
from .exceptions import DurableError
from .history import WorkflowHistory

__all__ = ["main"]

T = TypeVar("T")

PROGRESS_AFTER = 3
"""Progress lines go to stderr when a command handles more items than this."""

EXIT_OK = 0
EXIT_REPLAY_FAILED = 1
EXIT_ERROR = 2


class CommandError(Exception):
    """A user error with a message for stderr (exit code 2)."""


# -- output helpers -------------------------------------------------------------------------


def _out(text: str = "") -> None:
    print(text, file=sys.stdout)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _Progress:
    """``[3/10] verb label`` lines on stderr, only for more than a few items."""

    def __init__(self, total: int, verb: str) -> None:
        self.total = total
        self.verb = verb
        self.enabled = total > PROGRESS_AFTER

    def step(self, index: int, label: str) -> None:
        if self.enabled:
            _err(f"[{index + 1}/{self.total}] {self.verb} {label}")


def _time(value: datetime | float | None) -> str:
    """A UTC time to the millisecond, or ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(value, UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], max_width: int = 48) -> str:
    """Columns padded to their widest cell (capped at ``max_width``; the last is not)."""
    count = len(headers)
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[: count - 1]):
            widths[i] = min(max(widths[i], len(cell)), max_width)

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, cell in enumerate(cells):
            if i == count - 1:
                parts.append(cell)
            else:
                text = cell if len(cell) <= widths[i] else cell[: widths[i] - 1] + "…"
                parts.append(text.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.name
    return str(value)


def _execution_json(e: WorkflowExecution, **extra: Any) -> dict[str, Any]:
    out = dataclasses.asdict(e)
    out.pop("data_converter", None)  # how to decode, not data
    out["status"] = e.status.name  # an IntEnum would otherwise be written as a number
    return out | extra


def _metadata_text(payload: Any, converter: Any) -> str:
    """A ``userMetadata`` payload (a summary or details) decoded with the client's
    converter; "" for none, "(encoded)" when it cannot be decoded (a codec missing)."""
    if not isinstance(payload, dict):
        return ""
    try:
        value = converter.from_payloads_json([payload])[0]
    except Exception:
        return "(encoded)"
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _parse_json_inputs(values: Sequence[str] | None, option: str) -> list[Any]:
    parsed = []
    for text in values or ():
        try:
            parsed.append(json.loads(text))
        except (ValueError, RecursionError) as err:  # also 5,000 digits, deep nesting
            raise CommandError(
                f"{option} {text[:200]!r} is not valid JSON "
                f"({getattr(err, 'msg', None) or _one_line(str(err))}); quote strings as JSON, "
                f"e.g. {option} '\"Ada\"'"
            ) from err
    return parsed


# -- running client commands ----------------------------------------------------------------


def _run(factory: Callable[[], Awaitable[T]]) -> T:
    """Run ``factory()`` with ``asyncio.run``; in a thread when this one has a running
    loop (``main()`` called from a notebook cell or async code)."""

    async def go() -> T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    with ThreadPoolExecutor(1, thread_name_prefix="durable-cli") as pool:
        return pool.submit(lambda: asyncio.run(go())).result()


def _check_database(db: str | None, *, must_exist: bool) -> None:
    """Refuse a SQLite file in a directory that does not exist (a typo in ``--db`` would
    otherwise create a new, empty database there), and for commands that read, a file that
    does not exist at all."""
    from ._store.dialects import parse_url

    url = parse_url(db)
    if url.get_backend_name() != "sqlite" or not url.database:
        return
    path = Path(url.database)
    where = (
        "--db"
        if db is not None
        else (
            "DURABLE_DATABASE_URL"
            if os.environ.get("DURABLE_DATABASE_URL", "").strip()
            else "the default database"
        )
    )
    if not path.parent.is_dir():
        raise CommandError(
            f"{where} names SQLite file {path}, but directory {path.parent} does not exist: "
            "check the path (a new database is never created in a missing directory)"
        )
    if must_exist and not path.exists():
        raise CommandError(
            f"no database at {path} ({where}): nothing has run against it yet; give "
            "--db URL (or set DURABLE_DATABASE_URL) for the database your workers use"
        )


def _with_client(
    db: str | None,
    fn: Callable[[Client], Awaitable[T]],
    *,
    must_exist: bool = True,
    namespace: str | None = None,
) -> T:
    _check_database(db, must_exist=must_exist)

    async def go() -> T:
        client = await Client.connect(db, namespace=namespace or "default")
        try:
            return await fn(client)
        finally:
            await client.close()

    return _run(go)


# -- workflow commands ----------------------------------------------------------------------


def _describe_lines(d: WorkflowExecutionDescription, summary: str, details: str) -> list[str]:
    duration = f"{(d.close_time - d.start_time).total_seconds():.3f}s" if d.close_time else "(open)"
    pairs = [
        ("Workflow ID", d.id),
        ("Run ID", d.run_id),
        ("Type", d.workflow_type),
        *([("Summary", _one_line(summary))] if summary else []),
        *([("Details", details.rstrip())] if details else []),
        ("Task queue", d.task_queue),
        ("Namespace", d.namespace),
        ("Status", d.status.name),
        ("Start time", _time(d.start_time)),
        ("Close time", _time(d.close_time)),
        ("Duration", duration),
        ("History", f"{d.history_length} events, {d.history_size_bytes} bytes"),
        ("First run ID", d.first_execution_run_id or "-"),
    ]
    if d.continued_as_new_run_id:
        pairs.append(("Continued as new", d.continued_as_new_run_id))
    width = max(len(k) for k, _ in pairs) + 2
    lines = [f"{k + ':':<{width}}{v}".replace("\n", "\n" + " " * width) for k, v in pairs]
    from .dataframes import failure_text

    lines.append(f"Pending activities: {len(d.pending_activities)}")
    for act in d.pending_activities:
        text = (
            f"  {act.get('activity_type')} (id {act.get('activity_id')}): "
            f"{act.get('state')}, attempt {act.get('attempt')}"
        )
        if act.get("next_attempt_at"):
            text += f", next attempt at {_time(act['next_attempt_at'])}"
        failure = failure_text(act.get("last_failure"))
        if failure:
            text += f", last failure: {_one_line(failure)}"
        lines.append(text)
    lines.append(f"Pending timers: {len(d.pending_timers)}")
    for timer in d.pending_timers:
        lines.append(f"  timer {timer.get('timer_id')}: fires at {_time(timer.get('fire_at'))}")
    wft = d.pending_workflow_task
    lines.append(
        "Pending workflow task: "
        + (f"{wft.get('state')}, attempt {wft.get('attempt')}" if wft else "none")
    )
    return lines


def _cmd_describe(args: argparse.Namespace) -> int:
    async def fetch(client: Client) -> tuple[WorkflowExecutionDescription, str, str]:
        d = await client.get_workflow_handle(args.workflow_id, run_id=args.run_id).describe()
        meta, converter = d.raw_user_metadata, client.data_converter
        text = [_metadata_text(meta.get(k), converter) for k in ("summary", "details")]
        return d, text[0], text[1]

    description, summary, details = _with_client(args.db, fetch, namespace=args.namespace)
    if args.output == "json":
        out = _execution_json(description, static_summary=summary, static_details=details)
        _out(json.dumps(out, indent=2, default=_json_default))
    else:
        _out("\n".join(_describe_lines(description, summary, details)))
    return EXIT_OK


def _fetch_history(
    db: str | None, workflow_id: str, run_id: str | None, namespace: str | None
) -> tuple[WorkflowHistory, dict[int, str]]:
    """The history and the summaries its events carry (decoded, by event id)."""

    async def fetch(client: Client) -> tuple[WorkflowHistory, dict[int, str]]:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        meta = {e.event_id: e.extra.get("userMetadata") or {} for e in history.events}
        texts = {
            i: _metadata_text(m.get("summary"), client.data_converter) for i, m in meta.items()
        }
        return history, {i: text for i, text in texts.items() if text}

    return _with_client(db, fetch, namespace=namespace)


def _event_details(cols: dict[str, list[Any]], i: int, summary: str = "") -> str:
    parts = [f'"{_one_line(summary)}"'] if summary else []
    category = cols["category"][i]
    subject = cols["subject"][i]
    if category == "activity" and (subject is not None or cols["activity_type"][i]):
        parts.append(f"{cols['activity_type'][i] or '?'} (id {subject})")
    elif subject is not None:
        parts.append(f"{category} {subject}")
    attempt = cols["attempt"][i]
    if attempt is not None and attempt > 1:
        parts.append(f"attempt {attempt}")
    duration = cols["duration_s"][i]
    if not math.isnan(duration):
        parts.append(f"after {duration:.3f}s")
    if cols["payload_preview"][i] is not None:
        parts.append(cols["payload_preview"][i])
    if cols["failure"][i] is not None:
        parts.append("failure: " + _one_line(cols["failure"][i]))
    return "  ".join(parts)


def _cmd_show(args: argparse.Namespace) -> int:
    history, summaries = _fetch_history(args.db, args.workflow_id, args.run_id, args.namespace)
    if args.output == "json":
        _out(history.to_json())
        return EXIT_OK
    from .dataframes import history_columns

    cols = history_columns(history)
    rows = [
        [
            str(cols["event_id"][i]),
            _time(cols["time"][i]),
            cols["type"][i],
            _event_details(cols, i, summaries.get(cols["event_id"][i], "")),
        ]
        for i in range(len(history))
    ]
    _out(
        f"Workflow {history.workflow_id}  run {history.run_id}  type {history.workflow_type}  "
        f"({len(history)} events)"
    )
    if history.events and history.events[0].event_id in summaries:
        _out(f"Summary: {_one_line(summaries[history.events[0].event_id])}")
    _out(_table(["ID", "TIME", "TYPE", "DETAILS"], rows))
    return EXIT_OK


def _cmd_start(args: argparse.Namespace) -> int:
    inputs = _parse_json_inputs(args.input, "--input")

    async def start(client: Client) -> str:
        handle = await client.start_workflow(
            args.type, args=inputs, id=args.workflow_id, task_queue=args.task_queue
        )
        return handle.result_run_id or ""

    run_id = _with_client(args.db, start, must_exist=False, namespace=args.namespace)
    _out(f"Started workflow {args.workflow_id} (type {args.type}, task queue {args.task_queue})")
    _out(f"Run ID: {run_id}")
    return EXIT_OK


def _cmd_query(args: argparse.Namespace) -> int:
    inputs = _parse_json_inputs(args.input, "--input")

    async def query(client: Client) -> Any:
        handle = client.get_workflow_handle(args.workflow_id, run_id=args.run_id)
        return await handle.query(args.name, args=inputs, timeout=timedelta(seconds=args.timeout))

    result = _with_client(args.db, query, namespace=args.namespace)
    _out(json.dumps(result, indent=2, default=_json_default))
    return EXIT_OK


def _cmd_signal(args: argparse.Namespace) -> int:
    inputs = _parse_json_inputs(args.input, "--input")

    async def signal(client: Client) -> None:
        handle = client.get_workflow_handle(args.workflow_id, run_id=args.run_id)
        await handle.signal(args.name, args=inputs)

    _with_client(args.db, signal, namespace=args.namespace)
    _out(f"Sent signal {args.name!r} to workflow {args.workflow_id}")
    return EXIT_OK


def _cmd_cancel(args: argparse.Namespace) -> int:
    async def cancel(client: Client) -> None:
        handle = client.get_workflow_handle(args.workflow_id, run_id=args.run_id)
        await handle.cancel(args.reason or "")

    _with_client(args.db, cancel, namespace=args.namespace)
    _out(f"Requested cancellation of workflow {args.workflow_id}")
    return EXIT_OK


def _cmd_terminate(args: argparse.Namespace) -> int:
    async def terminate(client: Client) -> None:
        handle = client.get_workflow_handle(args.workflow_id, run_id=args.run_id)
        await handle.terminate(reason=args.reason)

    _with_client(args.db, terminate, namespace=args.namespace)
    _out(f"Terminated workflow {args.workflow_id}")
    return EXIT_OK


# -- history export -------------------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _file_name(workflow_id: str) -> str:
    return (_UNSAFE.sub("_", workflow_id).strip("._") or "workflow") + ".json"


def _cmd_export(args: argparse.Namespace) -> int:
    ids: list[str] = args.workflow_ids
    if args.run_id and len(ids) > 1:
        raise CommandError("--run-id needs exactly one workflow id")
    to_stdout = args.output == "-"
    if args.output and not to_stdout:
        check_text(args.output, "--output")  # Arrow and open() take UTF-8 without NUL
    if args.format == "json" and len(ids) > 1 and (not args.output or to_stdout):
        raise CommandError(
            "exporting several histories as JSON needs --output DIRECTORY (one file each)"
        )
    if args.format == "parquet" and not args.output:
        # Parquet is binary: a file named after the run, in the current directory.
        stem = _file_name(ids[0])[: -len(".json")] if len(ids) == 1 else "histories"
        args.output = f"{stem}.parquet"
    if args.format != "json":
        from .dataframes import _pandas

        _pandas()  # fail before touching the database when pandas is missing

    progress = _Progress(len(ids), "exporting")

    async def fetch_all(client: Client) -> list[WorkflowHistory]:
        out = []
        for i, workflow_id in enumerate(ids):
            progress.step(i, workflow_id)
            handle = client.get_workflow_handle(workflow_id, run_id=args.run_id)
            out.append(await handle.fetch_history())
        return out

    histories = _with_client(args.db, fetch_all, namespace=args.namespace)
    total = sum(len(h) for h in histories)
    if args.format == "json":
        if len(ids) == 1:
            text = histories[0].to_json()
            if args.output and not to_stdout:
                Path(args.output).write_text(text + "\n", encoding="utf-8")
            else:
                _out(text)
        else:
            folder = Path(args.output)
            folder.mkdir(parents=True, exist_ok=True)
            for history in histories:
                path = folder / _file_name(history.workflow_id)
                path.write_text(history.to_json() + "\n", encoding="utf-8")
    else:
        from .dataframes import _pandas, history_to_dataframe, to_csv, to_parquet

        pd = _pandas()
        frames = []
        for history in histories:
            frame = history_to_dataframe(history)
            frame.insert(0, "run_id", pd.Series([history.run_id] * len(frame), dtype="string"))
            frame.insert(
                0, "workflow_id", pd.Series([history.workflow_id] * len(frame), dtype="string")
            )
            frames.append(frame)
        df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        if args.format == "csv":
            to_csv(df, sys.stdout if to_stdout or not args.output else args.output)
        elif to_stdout:
            sys.stdout.flush()
            to_parquet(df, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            to_parquet(df, args.output)
    if args.output and not to_stdout:
        _err(f"wrote {total} events of {len(histories)} workflow(s) to {args.output}")
    return EXIT_OK


# -- replay ---------------------------------------------------------------------------------


def _import_workflow_class(spec: str) -> type:
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise CommandError(f"--workflows {spec!r}: expected module:Class (e.g. app.flows:Order)")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` does: modules beside the user are found
    try:
        module = importlib.import_module(module_name)
    except Exception as err:
        raise CommandError(
            f"--workflows {spec!r}: cannot import module {module_name!r}: "
            f"{type(err).__name__}: {_one_line(str(err))}"
        ) from err
    value: Any = module
    for part in qualname.split("."):
        try:
            value = getattr(value, part)
        except AttributeError as err:
            raise CommandError(
                f"--workflows {spec!r}: module {module_name!r} has no {qualname!r}"
            ) from err
    if not isinstance(value, type):
        raise CommandError(f"--workflows {spec!r}: {qualname!r} is not a class")
    return value


def _load_history(path: str) -> WorkflowHistory:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise CommandError(f"{path}: no such file") from err
    except (OSError, ValueError) as err:  # ValueError: undecodable, or NUL in the path
        raise CommandError(f"{path}: cannot read: {_one_line(str(err))}") from err
    try:
        history = WorkflowHistory.from_json(file.stem, text)
    except DurableError as err:
        raise CommandError(f"{path}: {_one_line(str(err))}") from err
    if not history.events:
        raise CommandError(f"{path}: the history has no events")
    workflow_id = history.events[0].attributes.get("workflowId")
    if isinstance(workflow_id, str) and workflow_id:
        history.workflow_id = workflow_id
    return history


def _cmd_replay(args: argparse.Namespace) -> int:
    from .worker import Replayer

    classes = [_import_workflow_class(spec) for spec in args.workflows]
    replayer = Replayer(workflows=classes)
    paths: list[str] = args.histories
    progress = _Progress(len(paths), "replaying")
    counts = {"ok": 0, "failed": 0, "bad": 0}

    async def replay_all() -> None:
        for i, path in enumerate(paths):
            progress.step(i, path)
            try:
                history = _load_history(path)
            except CommandError as err:
                counts["bad"] += 1
                _err(f"durable: error: {err}")
                continue
            try:
                result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
                failure = result.replay_failure
            except Exception as err:  # a history the replayer could not even start on
                failure = err
            if failure is None:
                counts["ok"] += 1
                _out(
                    f"OK      {path}  {history.workflow_type} {history.workflow_id} "
                    f"({len(history)} events)"
                )
            else:
                counts["failed"] += 1
                _out(f"FAILED  {path}  {type(failure).__name__}: {_one_line(str(failure))}")

    _run(replay_all)
    if len(paths) > 1:
        _err(
            f"replayed {len(paths)} histories: {counts['ok']} OK, {counts['failed']} failed"
            + (f", {counts['bad']} unreadable" if counts["bad"] else "")
        )
    if counts["bad"]:
        return EXIT_ERROR
    return EXIT_REPLAY_FAILED if counts["failed"] else EXIT_OK


# -- parser ---------------------------------------------------------------------------------


def _seconds_arg(text: str) -> float:
    """A positive, finite number of seconds (argparse reports the error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:50]!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0 or value >= timedelta.max.total_seconds():
        raise argparse.ArgumentTypeError(
            f"{text[:50]!r} is not a positive, finite number of seconds (below 8.6e13)"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``durable`` argument parser."""
    db_help = (
        "database URL (SQLite or PostgreSQL SQLAlchemy URL); default: $DURABLE_DATABASE_URL "
        "or ./.durable/durable.db"
    )
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a --db given before the subcommand is not reset by the subcommand's default.
    common.add_argument("--db", metavar="URL", default=argparse.SUPPRESS, help=db_help)
    common.add_argument(
        "--namespace", default=argparse.SUPPRESS, help="the namespace (default: default)"
    )

    parser = argparse.ArgumentParser(
        prog="durable",
        description="Inspect and drive durable-notebook workflows; export and replay histories.",
    )
    parser.add_argument("--db", metavar="URL", default=None, help=db_help)
    parser.add_argument("--namespace", default=None, help="the namespace (default: default)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    wf = commands.add_parser("workflow", parents=[common], help="list, inspect and act on runs")
    wf_cmds = wf.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    add_visibility_commands(wf_cmds, common)

    p = wf_cmds.add_parser("describe", parents=[common], help="status, times and pending work")
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--run-id", "-r", help="a run of the workflow (default: the latest)")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.set_defaults(func=_cmd_describe)

    p = wf_cmds.add_parser("show", parents=[common], help="the event history of a run")
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--run-id", "-r", help="a run of the workflow (default: the latest)")
    p.add_argument(
        "--output",
        "-o",
        choices=["table", "json"],
        default="table",
        help="json: Temporal's JSON (as 'temporal workflow show --output json')",
    )
    p.set_defaults(func=_cmd_show)

    p = wf_cmds.add_parser("start", parents=[common], help="start a run (returns at once)")
    p.add_argument("--type", "-t", required=True, help="workflow type name")
    p.add_argument("--task-queue", required=True, help="task queue its workers poll")
    p.add_argument("--workflow-id", "--id", required=True, help="workflow id")
    p.add_argument(
        "--input",
        "-i",
        action="extend",
        nargs="+",
        metavar="JSON",
        help="an argument as JSON; repeat (or list several) for several arguments",
    )
    p.set_defaults(func=_cmd_start)

    p = wf_cmds.add_parser("signal", parents=[common], help="send a signal to a run")
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--name", "-n", required=True, help="signal name")
    p.add_argument("--input", "-i", action="extend", nargs="+", metavar="JSON")
    p.add_argument("--run-id", "-r")
    p.set_defaults(func=_cmd_signal)

    p = wf_cmds.add_parser(
        "query", parents=[common], help="ask a run a read-only question (a query handler)"
    )
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--name", "-n", required=True, help="query name")
    p.add_argument("--input", "-i", action="extend", nargs="+", metavar="JSON")
    p.add_argument("--run-id", "-r")
    p.add_argument(
        "--timeout", type=_seconds_arg, default=10.0, help="seconds to wait for a worker"
    )
    p.set_defaults(func=_cmd_query)

    p = wf_cmds.add_parser("cancel", parents=[common], help="request cancellation of a run")
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--reason", default="")
    p.add_argument("--run-id", "-r")
    p.set_defaults(func=_cmd_cancel)

    p = wf_cmds.add_parser("terminate", parents=[common], help="end a run now, running no code")
    p.add_argument("workflow_id", metavar="ID")
    p.add_argument("--reason")
    p.add_argument("--run-id", "-r")
    p.set_defaults(func=_cmd_terminate)

    hist = commands.add_parser("history", parents=[common], help="export histories")
    hist_cmds = hist.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    p = hist_cmds.add_parser(
        "export",
        parents=[common],
        help="write histories as Temporal's JSON, or one row per event as CSV or Parquet",
    )
    p.add_argument("workflow_ids", nargs="+", metavar="ID")
    p.add_argument("--format", "-f", choices=["json", "csv", "parquet"], required=True)
    p.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        help="file, or - for stdout (default: stdout for json and csv, ID.parquet for "
        "parquet); a directory for several JSON histories",
    )
    p.add_argument("--run-id", "-r", help="a run of the workflow (one ID only)")
    p.set_defaults(func=_cmd_export)

    p = commands.add_parser(
        "replay",
        parents=[common],
        help="replay history files against workflow code (the deploy-safety check)",
        description="Exit code 0: all replayed; 1: a replay failed (non-determinism or an "
        "error in workflow code); 2: bad input (missing file, malformed JSON, bad class).",
    )
    p.add_argument("histories", nargs="+", metavar="HISTORY.json")
    p.add_argument(
        "--workflows",
        "-w",
        nargs="+",
        required=True,
        metavar="module:Class",
        help="workflow classes to replay against (imported; the current directory is on "
        "the import path)",
    )
    p.set_defaults(func=_cmd_replay)
    add_db_commands(commands, common)
    add_operator_commands(commands, common)
    add_schedule_commands(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``durable`` command line; returns the exit code (does not exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed by argparse
        code = exit_.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_ERROR)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (CommandError, DurableError, ImportError, OSError) as err:
        # ImportError: pandas, pyarrow or a database driver is missing.
        _err(f"durable: error: {_one_line(str(err))}")
    except KeyboardInterrupt:
        _err("durable: interrupted")
        return 130
    except Exception as err:
        if os.environ.get("DURABLE_DEBUG"):
            raise
        _err(
            f"durable: error: unexpected {type(err).__name__}: {_one_line(str(err))} "
            "(set DURABLE_DEBUG=1 to see the traceback)"
        )
    return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    # ``python -m engine.cli``: run the imported module's main, not this __main__ copy's,
    # so the _cli_* modules' errors are the classes main() catches.
    from engine.cli import main as _imported_main

    sys.exit(_imported_main())
