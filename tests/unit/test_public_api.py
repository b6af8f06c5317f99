"""The public surface is pinned, and the layers import only in the allowed direction."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "ActivityCancellationType",
    "ActivityError",
    "ApplicationError",
    "CancelledError",
    "Client",
    "Clock",
    "DataConverter",
    "HistoryEvent",
    "NondeterminismError",
    "Payload",
    "PayloadCodec",
    "PayloadConverter",
    "RetryPolicy",
    "SkippingClock",
    "TerminatedError",
    "Worker",
    "WorkflowAlreadyStartedError",
    "WorkflowExecution",
    "WorkflowExecutionDescription",
    "WorkflowExecutionStatus",
    "WorkflowFailureError",
    "WorkflowHandle",
    "WorkflowHistory",
    "WorkflowIDConflictPolicy",
    "WorkflowIDReusePolicy",
    "__version__",
    "activity",
    "exceptions",
    "workflow",
}


def test_public_names_are_pinned() -> None:
    assert set(engine.__all__) == EXPECTED
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_temporal_workflow_names_exist() -> None:
    from engine import workflow

    for name in (
        "defn",
        "run",
        "signal",
        "query",
        "update",
        "init",
        "execute_activity",
        "start_activity",
        "sleep",
        "wait_condition",
        "now",
        "random",
        "uuid4",
        "logger",
        "info",
        "patched",
        "deprecate_patch",
        "continue_as_new",
        "all_handlers_finished",
    ):
        assert callable(getattr(workflow, name)) or name == "logger", name
    assert callable(workflow.unsafe.imports_passed_through)
    assert callable(workflow.unsafe.is_replaying)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_engine_imports_nothing_from_jupyter() -> None:
    banned = (
        "IPython",
        "ipywidgets",
        "jupyter",
        "jupyter_server",
        "tornado",
        "traitlets",
        "kernel_ext",
        "widgets",
    )
    for path in (ROOT / "engine").rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] not in banned, f"{path} imports {name}"


def test_sql_lives_only_in_the_store() -> None:
    for path in (ROOT / "engine").rglob("*.py"):
        if "_store" in path.parts:
            continue
        for name in _imports(path):
            assert not name.startswith("sqlalchemy"), f"{path} imports {name}"


def test_replay_core_does_no_io() -> None:
    for path in (ROOT / "engine" / "_replay").rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] not in ("sqlalchemy", "socket", "subprocess"), path
        source = path.read_text()
        assert "_store" not in source and "_service" not in source, path


# The outer packages (kernel_ext, widgets) use only what engine's public modules export.
# import-linter's private-modules contract (pyproject.toml) sees static imports of private
# modules; this check also sees private *names* (``from engine.client import _x``), names a
# public module does not export (not in its ``__all__``), and the module names given as
# strings to ``importlib.import_module`` or ``__import__``, which no import graph records.

_IMPORT_FUNCTIONS = {"import_module", "__import__"}


def _module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of a source file under ROOT, and whether it is a package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _absolute(module: str, level: int, importer: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) import names, as the import system resolves it."""
    if level == 0:
        return module
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imported(source: str, importer: str, is_package: bool = False) -> list[tuple[str, str | None]]:
    """Every ``(module, name)`` a source imports, wherever the import is (functions, ``if
    TYPE_CHECKING:``): ``import a.b`` and ``import_module("a.b")`` give ``("a.b", None)``,
    ``from a import b`` gives ``("a", "b")``; relative forms are made absolute."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node.module or "", node.level, importer, is_package)
            found += [(module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            first = node.args[0]
            if name not in _IMPORT_FUNCTIONS or not isinstance(first, ast.Constant):
                continue
            if not isinstance(first.value, str):
                continue
            target = first.value
            if target.startswith("."):  # import_module(".x", package) resolves against package
                package = node.args[1] if len(node.args) > 1 else None
                package = package or next(
                    (k.value for k in node.keywords if k.arg == "package"), None
                )
                if not (isinstance(package, ast.Constant) and isinstance(package.value, str)):
                    continue
                level = len(target) - len(target.lstrip("."))
                target = _absolute(target[level:], level, package.value, True)
            found.append((target, None))
    return found


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_engine_uses(source: str, importer: str, is_package: bool = False) -> list[str]:
    """What a source takes from engine that engine's public modules do not export."""
    bad: list[str] = []
    for module, name in imported(source, importer, is_package):
        if module != "engine" and not module.startswith("engine."):
            continue
        if name is not None and _is_module(f"{module}.{name}"):
            module, name = f"{module}.{name}", None  # `from engine import workflow` names a module
        if _is_private(module):
            bad.append(f"{module} is private")
        elif name is not None and name != "*":
            exported = getattr(importlib.import_module(module), "__all__", None)
            if name.startswith("_") or (exported is not None and name not in exported):
                bad.append(f"{module}.{name} is not exported")
    return bad


def _outer_sources() -> list[Path]:
    return [
        p for package in ("kernel_ext", "widgets") for p in sorted((ROOT / package).rglob("*.py"))
    ]


def test_outer_packages_use_only_public_engine_names() -> None:
    found = {
        str(path.relative_to(ROOT)): bad
        for path in _outer_sources()
        if (bad := private_engine_uses(path.read_text(), *_module_name(path)))
    }
    assert found == {}


def test_widgets_never_import_kernel_ext() -> None:
    for path in (ROOT / "widgets").rglob("*.py"):
        for module, _ in imported(path.read_text(), *_module_name(path)):
            assert module.split(".")[0] != "kernel_ext", f"{path}: {module}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import engine._store.gateway", "engine._store.gateway is private"),
        ("import engine._store as store", "engine._store is private"),
        ("from engine import Client, _ids", "engine._ids is private"),
        ("from engine._model.events import HistoryEvent", "engine._model.events is private"),
        ("from engine.client import _missing", "engine.client._missing is not exported"),
        ("from engine.client import Service", "engine.client.Service is not exported"),
        (
            "def f():\n    from engine._worker import workflows",
            "engine._worker.workflows is private",
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import engine._service",
            "engine._service is private",
        ),
        (
            "import importlib\nimportlib.import_module('engine._replay')",
            "engine._replay is private",
        ),
        (
            "from importlib import import_module\nimport_module('._json', 'engine')",
            "engine._json is private",
        ),
        ("import_module('.._service', package='engine.client')", "engine._service is private"),
        ("__import__('engine._store.tx')", "engine._store.tx is private"),
    ],
)
def test_the_public_names_check_catches_each_form(source: str, expected: str) -> None:
    assert private_engine_uses(source, "widgets.probe") == [expected]


def test_the_public_names_check_lets_public_names_through() -> None:
    source = (
        "import engine\nimport engine.workflow\nfrom engine import Client, workflow, cli\n"
        "from engine.worker import Replayer\nfrom engine.exceptions import *\n"
        "from . import _live\nfrom .models import rows\nimport_module(f'.{name}', __name__)\n"
    )
    assert private_engine_uses(source, "widgets.probe") == []
    assert ("widgets._live", None) not in imported(source, "widgets.probe")
    assert ("widgets", "_live") in imported(source, "widgets.probe")
    assert imported("from .. import display", "kernel_ext.server.app") == [
        ("kernel_ext", "display")
    ]
    assert imported("from . import app", "kernel_ext.server", is_package=True) == [
        ("kernel_ext.server", "app")
    ]


def test_resolve_database_url_names_what_connect_would_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine import Client
    from engine.exceptions import DatabaseURLError

    monkeypatch.delenv("DURABLE_DATABASE_URL", raising=False)
    assert Client.resolve_database_url() == "sqlite:///.durable/durable.db"
    monkeypatch.setenv("DURABLE_DATABASE_URL", "postgresql://ada:secret@db.example/app")
    assert Client.resolve_database_url() == "postgresql+psycopg://ada:***@db.example/app"
    assert (
        Client.resolve_database_url(hide_password=False)
        == "postgresql+psycopg://ada:secret@db.example/app"
    )
    assert Client.resolve_database_url("sqlite:///x.db") == "sqlite:///x.db"
    with pytest.raises(DatabaseURLError, match="mysql"):
        Client.resolve_database_url("mysql://nowhere/db")
