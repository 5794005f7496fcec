"""The store operations the CLI, demo and benchmark use instead of reaching for SQL."""

from __future__ import annotations

import psycopg

from tests.support import Probe, fresh_prefix
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore


def test_ping_answers_with_the_server_version(store: PostgresStore, database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        version = conn.info.parameter_status("server_version")
    assert store.ping() == version


def test_drop_prefix_removes_every_table_of_the_prefix_only(
    database_dsn: str, store: PostgresStore
) -> None:
    other = PostgresStore.from_dsn(database_dsn, Prefix(fresh_prefix("other")), pool_size=1)
    probe = Probe(database_dsn, store.prefix.name)
    try:
        other.migrate()
        store.drop_prefix()
        tables = [
            store.prefix.jobs,
            store.prefix.journal,
            store.prefix.table("schedules"),
            store.prefix.table("schema_history"),
        ]
        left = probe.scalar("SELECT count(*) FROM pg_tables WHERE tablename = ANY(%s)", tables)
        assert left == 0
        other.check_schema()  # another prefix keeps its tables
    finally:
        other.drop_prefix()
        other.close()
        probe.close()


def test_with_prefix_shares_the_pool_and_never_closes_it(
    database_dsn: str, store: PostgresStore
) -> None:
    name = fresh_prefix("sibling")
    other = store.with_prefix(Prefix(name))
    try:
        assert other.pool is store.pool and not other.owns_pool
        assert other.prefix.name == name
        other.migrate()
        job_id = other.enqueue(NewJob("k", {}))
        assert other.reads.get(job_id) is not None and store.reads.get(job_id) is None
    finally:
        other.drop_prefix()
        other.close()
    assert not store.pool.closed
    assert store.ping()


def test_schema_script_uses_the_stores_prefix_and_lock_timeout(database_dsn: str) -> None:
    name = fresh_prefix("script")
    store = PostgresStore.from_dsn(
        database_dsn, Prefix(name), pool_size=1, migration_lock_timeout=2.5
    )
    try:
        script = store.schema_script(made_by="tool 9")
        assert script.startswith(f"-- tool 9: schema of prefix {name!r}, migrations 0001_")
        assert "'2500ms'" in script and f'"{name}_jobs"' in script
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(script.encode())
        store.check_schema()
        assert store.migrate() == []
    finally:
        store.drop_prefix()
        store.close()
