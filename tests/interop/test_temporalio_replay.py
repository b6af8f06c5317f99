"""Histories cross over to Temporal's SDK, both ways.

- Ours to Temporal: each case of ``engine_code.py`` runs on our engine (time skipping);
  its history, written by ``WorkflowHistory.to_json()``, is read by
  ``temporalio.client.WorkflowHistory.from_json`` and replayed by ``temporalio``'s
  ``Replayer`` against the same code with ``temporalio`` imports (``temporal_code.py``).
  So are the golden histories of ``tests/replay/histories``. The JSON must also parse
  strictly as Temporal's ``History`` protobuf and equal what protobuf's JSON printer (the
  writer of Temporal's SDK and CLI) makes of it.
- Temporal to ours to Temporal: every sample of ``tests/data/temporal`` goes through our
  ``from_json()`` and ``to_json()``, then replays in ``temporalio``.
- Changed code: ``temporalio`` rejects our histories against deliberately changed
  workflows, so a clean replay means something.

All the ``temporalio`` work runs in one child process (``temporalio_replay.py``) that
ends with ``os._exit(0)``: temporalio 1.35 can crash during interpreter shutdown, which
must not take pytest with it. Its default sandboxed workflow runner is used.
"""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import WorkflowHistory
from engine.testing import WorkflowEnvironment

from ..conftest import TEMPORAL_DATA
from .cases import CASES, Case, record

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
GOLDEN = ROOT / "tests" / "replay" / "histories"
LIVE = [c for c in CASES if not c.real_time]
GOLDENS = sorted(p.stem for p in GOLDEN.glob("*.json"))
SAMPLES = sorted(p.name for p in TEMPORAL_DATA.glob("temporal_history_*.json"))
# (our live history, the changed temporalio workflow's behaviour, event temporalio names)
CHANGED = [("timer", "timer swapped for an activity", 5), ("one_activity", "timer added", 11)]


async def _record_live(workdir: Path) -> dict[str, WorkflowHistory]:
    histories = {}
    for case in LIVE:
        # A fresh environment (database and clock) per case: time skipped while one case
        # awaits its result must not fire the timers of the next.
        url = f"sqlite:///{workdir / (case.feature + '.db')}"
        env = await WorkflowEnvironment.start_time_skipping(database_url=url)
        try:
            histories[case.feature] = await record(env.client, case)
        finally:
            await env.shutdown()
    return histories


@pytest.fixture(scope="module")
def temporalio_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Results of the temporalio child process, by job name."""
    out = tmp_path_factory.mktemp("interop")
    jobs: list[dict[str, str]] = []
    for feature, history in asyncio.run(_record_live(out)).items():
        path = out / f"ours_{feature}.json"
        path.write_text(history.to_json())
        jobs.append({"name": f"ours:{feature}", "path": str(path), "workflows": "code"})
    for feature, _, _ in CHANGED:
        path = out / f"ours_{feature}.json"
        jobs.append({"name": f"changed:{feature}", "path": str(path), "workflows": "changed"})
    for stem in GOLDENS:
        path = GOLDEN / f"{stem}.json"
        jobs.append({"name": f"golden:{stem}", "path": str(path), "workflows": "code"})
    for name in SAMPLES:
        text = (TEMPORAL_DATA / name).read_text()
        path = out / f"round_trip_{name}"
        path.write_text(WorkflowHistory.from_json(name, text).to_json())
        jobs.append({"name": f"sample:{name}", "path": str(path), "workflows": "code"})
    jobs_file = out / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.interop.temporalio_replay", str(jobs_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            item = json.loads(line.removeprefix("RESULT "))
            results[item["name"]] = item
    assert f"DONE {len(jobs)}" in proc.stdout.splitlines(), (
        f"the temporalio process stopped early (exit {proc.returncode}):\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return results


def _replayed(result: dict[str, Any]) -> None:
    assert result["replayed"], f"{result['error_type']}: {result['error']}"


@pytest.mark.parametrize("case", LIVE, ids=[c.feature for c in LIVE])
def test_our_history_replays_in_temporalio(
    temporalio_results: dict[str, dict[str, Any]], case: Case
) -> None:
    _replayed(temporalio_results[f"ours:{case.feature}"])


@pytest.mark.parametrize("stem", GOLDENS)
def test_golden_history_replays_in_temporalio(
    temporalio_results: dict[str, dict[str, Any]], stem: str
) -> None:
    _replayed(temporalio_results[f"golden:{stem}"])


@pytest.mark.parametrize(
    "name", [f"ours:{c.feature}" for c in LIVE] + [f"golden:{s}" for s in GOLDENS]
)
def test_our_json_is_temporal_protobuf_json(
    temporalio_results: dict[str, dict[str, Any]], name: str
) -> None:
    """Every field is one of Temporal's, spelled and formatted as protobuf's JSON printer
    writes it (int64 as strings, durations as "10s", enums as RETRY_STATE_..., field
    order), with nothing written that Temporal would omit."""
    result = temporalio_results[name]
    assert result["strict_parse_error"] is None
    assert result["canonical_diffs"] == []


@pytest.mark.parametrize("name", SAMPLES)
def test_temporal_sample_through_our_reader_and_writer_replays_in_temporalio(
    temporalio_results: dict[str, dict[str, Any]], name: str
) -> None:
    result = temporalio_results[f"sample:{name}"]
    _replayed(result)
    assert result["canonical_diffs"] == []


@pytest.mark.parametrize(("feature", "change", "event_id"), CHANGED, ids=[c[0] for c in CHANGED])
def test_temporalio_rejects_our_history_against_changed_code(
    temporalio_results: dict[str, dict[str, Any]], feature: str, change: str, event_id: int
) -> None:
    result = temporalio_results[f"changed:{feature}"]
    assert not result["replayed"], f"replayed although the code changed ({change})"
    assert result["error_type"] == "NondeterminismError", result["error"]
    assert f"id: {event_id}," in result["error"], result["error"]


def _without_imports(path: Path) -> str:
    tree = ast.parse(path.read_text())
    body = [
        node
        for node in tree.body
        if not isinstance(node, (ast.Import, ast.ImportFrom))
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def test_engine_and_temporal_code_differ_only_in_imports() -> None:
    assert _without_imports(HERE / "engine_code.py") == _without_imports(HERE / "temporal_code.py")
