"""Replay history files with ``temporalio``'s Replayer, in a process of its own.

    python -m tests.interop.temporalio_replay JOBS.json

``JOBS.json`` is a list of ``{"name", "path", "workflows": "code" | "changed"}``. For each
job, the file is read with ``temporalio.client.WorkflowHistory.from_json`` and replayed
against the workflows of ``temporal_code.py`` ("code") or ``temporal_changed.py``
("changed"). The file is also parsed strictly as Temporal's ``History`` protobuf (unknown
fields are errors) and written back by protobuf's JSON printer, which is what Temporal's
SDK and CLI write; every difference from the file is reported.

One line per job: ``RESULT {json}`` with ``name``, ``replayed`` (bool), ``error_type``,
``error``, ``strict_parse_error`` and ``canonical_diffs``. Then ``DONE <count>``.

The process ends with ``os._exit(0)`` after flushing: temporalio 1.35 can crash in a
``tokio-rt-worker`` thread during interpreter finalization (sdk-python#300), after all
work is done. The workflows run in temporalio's default sandbox, which re-imports
``temporal_code.py``; that module has no import-time side effects.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from .temporal_changed import CHANGED_WORKFLOWS
from .temporal_code import ALL_WORKFLOWS

WORKFLOWS = {"code": ALL_WORKFLOWS, "changed": CHANGED_WORKFLOWS}


#: Protobuf map fields on the way (payload metadata, search attributes, memo, headers, a
#: marker's details): the printer writes their entries in no fixed order, so theirs is
#: not compared.
_MAP_FIELDS = ("metadata", "indexedFields", "fields", "details")


def _diffs(ours: Any, canonical: Any, path: str, out: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(canonical, dict):
        is_map = path.rsplit(".", 1)[-1] in _MAP_FIELDS
        if not is_map and list(ours) != list(canonical) and set(ours) == set(canonical):
            out.append(f"{path}: field order {list(ours)} != {list(canonical)}")
        for key in sorted(set(ours) | set(canonical)):
            if key not in canonical:
                out.append(
                    f"{path}.{key}: written as {json.dumps(ours[key])[:60]}, Temporal omits it"
                )
            elif key not in ours:
                out.append(
                    f"{path}.{key}: missing, Temporal writes {json.dumps(canonical[key])[:60]}"
                )
            else:
                _diffs(ours[key], canonical[key], f"{path}.{key}", out)
    elif isinstance(ours, list) and isinstance(canonical, list) and len(ours) == len(canonical):
        for i, (a, b) in enumerate(zip(ours, canonical, strict=True)):
            _diffs(a, b, f"{path}[{i}]", out)
    elif ours != canonical or type(ours) is not type(canonical):
        out.append(
            f"{path}: written as {json.dumps(ours)[:60]}, Temporal writes {json.dumps(canonical)[:60]}"
        )


def _fidelity(data: dict[str, Any]) -> tuple[str | None, list[str]]:
    try:
        message = json_format.ParseDict(data, History(), ignore_unknown_fields=False)
    except json_format.ParseError as err:
        return str(err), []
    canonical = json_format.MessageToDict(message)
    out: list[str] = []
    for i, (ours, theirs) in enumerate(zip(data["events"], canonical["events"], strict=True)):
        _diffs(ours, theirs, f"event {i + 1} {ours.get('eventType')}", out)
    return None, out


def _read(job: dict[str, Any]) -> tuple[dict[str, Any], WorkflowHistory | None]:
    text = Path(job["path"]).read_text()
    data = json.loads(text)
    attrs = data["events"][0]["workflowExecutionStartedEventAttributes"]
    result: dict[str, Any] = {"name": job["name"], "replayed": False}
    result["strict_parse_error"], result["canonical_diffs"] = _fidelity(data)
    try:
        history = WorkflowHistory.from_json(attrs.get("workflowId") or job["name"], text)
    except Exception as err:
        result.update(error_type=type(err).__name__, error=str(err))
        return result, None
    return result, history


async def _replay_all(workflows: str, items: list[tuple[dict[str, Any], WorkflowHistory]]) -> None:
    """Replay every history of one set of workflows through one replay iterator: one
    Replayer and one worker for all of them, which is ten times quicker than a Replayer per
    history (the sandbox and the worker are set up once)."""
    by_history = {id(history): result for result, history in items}

    async def histories() -> Any:
        for _, history in items:
            yield history

    replayer = Replayer(workflows=WORKFLOWS[workflows])
    try:
        async with replayer.workflow_replay_iterator(histories()) as outcomes:
            async for outcome in outcomes:
                result = by_history[id(outcome.history)]
                failure = outcome.replay_failure
                if failure is None:
                    result["replayed"] = True
                else:
                    result.update(error_type=type(failure).__name__, error=str(failure))
    except Exception as err:
        for result, _ in items:
            if not result["replayed"] and "error" not in result:
                result.update(error_type=type(err).__name__, error=str(err))


async def main(jobs_file: str) -> None:
    jobs = json.loads(Path(jobs_file).read_text())
    results = []
    groups: dict[str, list[tuple[dict[str, Any], WorkflowHistory]]] = {}
    for job in jobs:
        result, history = _read(job)
        results.append(result)
        if history is not None:
            groups.setdefault(job["workflows"], []).append((result, history))
    for workflows, items in groups.items():
        await _replay_all(workflows, items)
    for result in results:
        print("RESULT " + json.dumps(result), flush=True)
    print(f"DONE {len(jobs)}", flush=True)


if __name__ == "__main__":
    status = 0
    try:
        asyncio.run(main(sys.argv[1]))
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
