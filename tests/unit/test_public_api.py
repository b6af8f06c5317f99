"""The public surface is pinned, and the layers import only in the allowed direction."""

from __future__ import annotations

import ast
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


def test_outer_packages_use_only_public_engine_names() -> None:
    for package in ("kernel_ext", "widgets"):
        for path in (ROOT / package).rglob("*.py"):
            for name in _imports(path):
                if name.startswith("engine"):
                    assert "._" not in name and not name.startswith("engine._"), f"{path}: {name}"


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
