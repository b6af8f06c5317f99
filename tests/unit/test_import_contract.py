"""The import contract in pyproject.toml holds, and breaks when a forbidden import is added.

``make lint`` runs import-linter on the tree. Here it runs twice: on the tree itself, which
must keep every contract, and on a copy of the three packages with one probe module per
forbidden import form added, which must break each contract and name each probe. Every
contract has at least one probe, so a contract added without one fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "kernel_ext", "widgets")
CONTRACTS = {
    c["id"]: c["name"]
    for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
}
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


@dataclass(frozen=True)
class Probe:
    """A module added to the copy, and the first import of the chain the contract must report."""

    contract: str
    path: str
    source: str
    imported: str

    @property
    def importer(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    def __str__(self) -> str:
        return f"{self.contract}:{self.path}"


TYPE_CHECKING_IMPORT = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {}\n"

PROBES = [
    # engine._model: relative, from a public module above it, and through another module.
    Probe(
        "model",
        "engine/_model/_probe_rel.py",
        "from .._replay import loop\n",
        "engine._replay.loop",
    ),
    Probe(
        "model", "engine/_model/_probe_pub.py", "from ..workflow import defn\n", "engine.workflow"
    ),
    Probe("model", "engine/_model/_probe_via.py", "import engine.history\n", "engine.history"),
    # engine._store: absolute from-import, a package named in `from .. import`.
    Probe(
        "store",
        "engine/_store/_probe_abs.py",
        "from engine._model import events\n",
        "engine._model.events",
    ),
    Probe("store", "engine/_store/_probe_pkg.py", "from .. import _service\n", "engine._service"),
    Probe("store", "engine/_store/_probe_pub.py", "from ..client import Client\n", "engine.client"),
    # engine._service: `import a.b`, `from .. import _x`, an import inside a function.
    Probe(
        "service",
        "engine/_service/_probe_imp.py",
        "import engine._replay.loop\n",
        "engine._replay.loop",
    ),
    Probe("service", "engine/_service/_probe_pkg.py", "from .. import _worker\n", "engine._worker"),
    Probe(
        "service",
        "engine/_service/_probe_fn.py",
        "def f():\n    from ..workflow import sleep\n",
        "engine.workflow",
    ),
    # engine._replay: a submodule, an `if TYPE_CHECKING:` import, SQL.
    Probe(
        "replay",
        "engine/_replay/_probe_sub.py",
        "from .._store.gateway import Store\n",
        "engine._store.gateway",
    ),
    Probe(
        "replay",
        "engine/_replay/_probe_tc.py",
        TYPE_CHECKING_IMPORT.format("from .._service.service import Service"),
        "engine._service.service",
    ),
    Probe("replay", "engine/_replay/_probe_sql.py", "import sqlalchemy\n", "sqlalchemy"),
    # engine._worker: the public modules that drive it.
    Probe(
        "worker", "engine/_worker/_probe_pub.py", "from ..client import Client\n", "engine.client"
    ),
    Probe("worker", "engine/_worker/_probe_abs.py", "from engine import worker\n", "engine.worker"),
    # Only engine._store speaks SQL.
    Probe("sql-in-store", "engine/_probe_sql.py", "from sqlalchemy import text\n", "sqlalchemy"),
    Probe(
        "sql-in-store", "engine/_service/_probe_pg.py", "def f():\n    import psycopg\n", "psycopg"
    ),
    # engine knows nothing of Jupyter: third-party packages and our outer packages.
    Probe("no-jupyter-in-engine", "engine/_probe_ipy.py", "import IPython.display\n", "IPython"),
    Probe(
        "no-jupyter-in-engine",
        "engine/_replay/_probe_tornado.py",
        "def f():\n    from tornado import web\n",
        "tornado",
    ),
    Probe(
        "no-jupyter-in-engine",
        "engine/_probe_traitlets.py",
        TYPE_CHECKING_IMPORT.format("import traitlets"),
        "traitlets",
    ),
    Probe("no-jupyter-in-engine", "engine/_probe_ipw.py", "import ipywidgets as w\n", "ipywidgets"),
    Probe(
        "no-jupyter-in-engine",
        "engine/_probe_widgets.py",
        "from widgets import models\n",
        "widgets.models",
    ),
    # kernel_ext and widgets reach no private module of engine (nor of each other).
    Probe(
        "private-modules",
        "kernel_ext/probe_from.py",
        "from engine import _store\n",
        "engine._store",
    ),
    Probe(
        "private-modules",
        "kernel_ext/probe_imp.py",
        "import engine._replay.instance\n",
        "engine._replay.instance",
    ),
    Probe(
        "private-modules",
        "widgets/probe_sub.py",
        "from engine._model.events import HistoryEvent\n",
        "engine._model.events",
    ),
    Probe(
        "private-modules",
        "widgets/probe_top.py",
        "def f():\n    from engine._json import loads\n",
        "engine._json",
    ),
    Probe(
        "private-modules",
        "kernel_ext/probe_widgets.py",
        "from widgets import _live\n",
        "widgets._live",
    ),
    # widgets stays below kernel_ext.
    Probe(
        "widgets-below-kernel-ext",
        "widgets/probe_ke.py",
        "from kernel_ext import display\n",
        "kernel_ext.display",
    ),
    Probe("widgets-below-kernel-ext", "widgets/probe_imp.py", "import kernel_ext\n", "kernel_ext"),
]


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _broken_sections(output: str) -> dict[str, str]:
    """The report of each broken contract, keyed by the contract's name."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line == "Broken contracts")
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line, below in zip(lines[start + 2 :], [*lines[start + 3 :], ""], strict=True):
        if line and below == "-" * len(line):
            current = sections.setdefault(line, [])
        elif line != "-" * len(line):
            current.append(line)
    return {name: "\n".join(body) for name, body in sections.items()}


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


def test_every_contract_has_a_probe() -> None:
    assert {p.contract for p in PROBES} == set(CONTRACTS)


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Lint a copy of the packages with every probe added; the report per broken contract."""
    root = tmp_path_factory.mktemp("contract")
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", root)
    for probe in PROBES:
        (root / probe.path).write_text(probe.source)
    result = _lint(root)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in result.stdout, result.stdout
    return _broken_sections(result.stdout)


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_a_forbidden_import_breaks_its_contract(broken: dict[str, str], probe: Probe) -> None:
    report = broken[CONTRACTS[probe.contract]]
    assert f"{probe.importer} -> {probe.imported} (l." in report, report
