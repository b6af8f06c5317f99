"""Migrations on an empty database yield exactly the declared schema (both backends)."""

from __future__ import annotations

import sqlalchemy as sa

from engine._store.gateway import Store
from engine._store.migrations import MIGRATIONS, current_version
from engine._store.schema import SCHEMA_VERSION, metadata


def _normalise_type(t: sa.types.TypeEngine, dialect: sa.Dialect) -> str:
    name = t.compile(dialect=dialect).split("(")[0].replace("DOUBLE PRECISION", "DOUBLE")
    if dialect.name == "sqlite" and name == "VARCHAR":
        # SQLite has type affinities, not types: VARCHAR(n) and TEXT store the same way
        # (no length is enforced), and SQLite cannot alter a column's declared type.
        return "TEXT"
    return name


def test_migrating_an_empty_database_yields_the_declared_schema(db_url: str) -> None:
    store = Store(db_url)
    store.open()
    try:
        inspector = sa.inspect(store.engine)
        dialect = store.engine.dialect
        tables = {t for t in inspector.get_table_names() if t.startswith("dn_")}
        assert tables == set(metadata.tables)
        for name, table in metadata.tables.items():
            reflected = {c["name"]: c for c in inspector.get_columns(name)}
            assert list(reflected) == [c.name for c in table.columns], name
            for column in table.columns:
                got = reflected[column.name]
                assert got["nullable"] == column.nullable, (name, column.name)
                want_type = _normalise_type(column.type, dialect)
                got_type = _normalise_type(got["type"], dialect)
                if want_type == "SERIAL":
                    want_type = "INTEGER"
                assert got_type == want_type, (name, column.name, got_type, want_type)
            pk = inspector.get_pk_constraint(name)["constrained_columns"]
            assert pk == [c.name for c in table.primary_key.columns], name
            indexes = {
                i["name"]: (tuple(i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(name)
            }
            declared = {
                i.name: (tuple(c.name for c in i.columns), bool(i.unique)) for i in table.indexes
            }
            assert indexes == declared, name
        with store.engine.begin() as conn:
            assert current_version(conn) == SCHEMA_VERSION == MIGRATIONS[-1].version
    finally:
        store.close()


def test_migrating_twice_changes_nothing(db_url: str) -> None:
    first = Store(db_url)
    first.open()
    first.close()
    second = Store(db_url)
    second.open()
    with second.engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT version FROM dn_schema_versions")).scalars().all()
    second.close()
    assert rows == [m.version for m in MIGRATIONS]


def test_open_workflow_id_is_unique_but_closed_ones_may_repeat(db_url: str) -> None:
    store = Store(db_url)
    store.open()
    row = {
        "namespace": "default",
        "workflow_id": "w",
        "workflow_type": "T",
        "task_queue": "q",
        "start_time": 0.0,
        "first_run_id": "r",
        "next_event_id": 1,
        "history_size_bytes": 0,
        "workflow_task_timeout": 10.0,
    }
    table = metadata.tables["dn_executions"]
    try:
        with store.engine.begin() as conn:
            conn.execute(table.insert().values(run_id="r1", status=2, **row))
            conn.execute(table.insert().values(run_id="r2", status=3, **row))
            conn.execute(table.insert().values(run_id="r3", status=1, **row))
        try:
            with store.engine.begin() as conn:
                conn.execute(table.insert().values(run_id="r4", status=1, **row))
        except sa.exc.IntegrityError:
            pass
        else:
            raise AssertionError("a second open run with the same workflow id was accepted")
    finally:
        store.close()


def test_upgrading_from_version_1_keeps_data(db_url: str) -> None:
    from engine._store.dialects import create_engine, parse_url
    from engine._store.migrations import _render

    engine = create_engine(parse_url(db_url), fsync=False)
    dialect = engine.dialect.name
    with engine.begin() as conn:
        for statement in MIGRATIONS[0].statements:
            conn.execute(sa.text(_render(statement, dialect)))
        conn.execute(
            sa.text(
                "INSERT INTO dn_schema_versions (version, description, applied_at) "
                "VALUES (1, 'v1', 0)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO dn_executions (run_id, namespace, workflow_id, workflow_type, "
                "task_queue, status, start_time, first_run_id, next_event_id, "
                "history_size_bytes, workflow_task_timeout) VALUES ('r1', 'default', 'w', 'T', "
                "'q', 2, 0, 'r1', 5, 100, 10)"
            )
        )
    engine.dispose()
    store = Store(db_url)
    store.open()  # migrates 1 -> latest
    try:
        with store.engine.begin() as conn:
            assert current_version(conn) == SCHEMA_VERSION
            row = conn.execute(
                sa.text("SELECT workflow_id, next_event_id, parent_close_policy FROM dn_executions")
            ).one()
        assert tuple(row) == ("w", 5, None)
    finally:
        store.close()


async def test_upgrading_to_version_13_deletes_nothing_of_the_old_runs(db_url: str) -> None:
    """Before version 13 nothing was ever deleted: the namespaces a database had keep their
    runs (ten years), while a namespace new to it, default here, gets the week."""
    import time
    from datetime import timedelta

    from engine import Client
    from engine._store.dialects import create_engine, parse_url
    from engine._store.migrations import UPGRADED_RETENTION_SECONDS, _render

    a_year_ago = time.time() - 365 * 86400
    engine = create_engine(parse_url(db_url), fsync=False)
    dialect = engine.dialect.name
    with engine.begin() as conn:
        for migration in MIGRATIONS[:12]:
            for statement in migration.statements:
                conn.execute(sa.text(_render(statement, dialect)))
        conn.execute(
            sa.text(
                "INSERT INTO dn_schema_versions (version, description, applied_at) "
                "VALUES (12, 'v12', 0)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO dn_namespaces (name, retention_seconds, created_at) "
                "VALUES ('shop', 604800, 0)"
            )
        )
        conn.execute(  # a run of the shop closed a year ago
            sa.text(
                "INSERT INTO dn_executions (run_id, namespace, workflow_id, workflow_type, "
                "task_queue, status, start_time, close_time, first_run_id, next_event_id, "
                "history_size_bytes, workflow_task_timeout) VALUES ('r1', 'shop', 'w', 'T', "
                "'q', 2, :t, :t, 'r1', 5, 100, 10)"
            ),
            {"t": a_year_ago},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dn_visibility (run_id, namespace, workflow_id, workflow_type, "
                "task_queue, status, start_time, execution_time, close_time, close_order) "
                "VALUES ('r1', 'shop', 'w', 'T', 'q', 2, :t, :t, :t, :t)"
            ),
            {"t": a_year_ago},
        )
    engine.dispose()
    client = await Client.connect(db_url)  # migrates 12 -> latest
    try:
        shop = await client.service.describe_namespace("shop")
        assert shop.retention_seconds == UPGRADED_RETENTION_SECONDS and len(shop.id) == 36
        default = await client.service.describe_namespace("default")
        assert default.retention_seconds == timedelta(days=7).total_seconds()
        assert await client.service.delete_expired_runs() == 0
        shop_client = Client(client.store, namespace="shop")
        assert [w.run_id async for w in shop_client.list_workflows()] == ["r1"]
    finally:
        await client.close()
