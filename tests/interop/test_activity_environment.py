"""A test module written for ``temporalio.testing.ActivityEnvironment`` passes here with its
imports alone swapped: ``temporal_activity_env.py`` runs as written (on ``temporalio``) and
with ``temporalio`` replaced by ``engine`` in its import lines, each in a child process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHECKS = HERE / "temporal_activity_env.py"


def _swap_imports(source: str) -> str:
    """``from temporalio...`` / ``import temporalio...`` lines name ``engine`` instead."""
    return re.sub(r"^(from|import) temporalio\b", r"\1 engine", source, flags=re.MULTILINE)


def _run(path: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(HERE / "run_checks.py"), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def swapped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = CHECKS.read_text()
    changed = _swap_imports(source)
    # Only import lines differ.
    diff = [
        (a, b) for a, b in zip(source.splitlines(), changed.splitlines(), strict=True) if a != b
    ]
    assert diff and all(re.match(r"(from|import) ", b) for _, b in diff)
    path = tmp_path_factory.mktemp("swapped") / "engine_activity_env.py"
    path.write_text(changed)
    return path


def test_the_checks_pass_on_temporalio() -> None:
    outcomes = _run(CHECKS)
    assert len(outcomes) >= 8
    failed = {name: why for name, why in outcomes.items() if why != "ok"}
    assert not failed, failed


def test_the_same_checks_pass_here_with_the_imports_swapped(swapped: Path) -> None:
    outcomes = _run(swapped)
    assert set(outcomes) == set(_run(CHECKS))
    failed = {name: why for name, why in outcomes.items() if why != "ok"}
    assert not failed, failed
