"""Migrations: forward-only, recorded per prefix, serialised per prefix by an advisory
lock, and refused when the database is newer than the code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import psycopg
import pytest

from tests.support import Probe, drop_prefix, fresh_prefix, wait_until
from venturi.errors import MigrationLockTimeout, SchemaError
from venturi.models import NewJob
from venturi.prefix import MAX_PREFIX_LENGTH, Prefix
from venturi.store.migrations import known_migrations, latest_version
from venturi.store.postgres import PostgresStore

ALL = [name for _, name in known_migrations()]


def _tables(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE %s ORDER BY 1",
            (prefix + "\\_%",),
        ).fetchall()
    return [r[0] for r in rows]


def test_migrate_applies_everything_once_then_is_a_no_op(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    store = make_store(prefix)
    with pytest.raises(SchemaError, match="no venturi schema"):
        store.check_schema()
    assert store.migrate() == ALL
    assert store.migrate() == []
    assert make_store(prefix).migrate() == []
    store.check_schema()
    assert _tables(database_dsn, prefix) == sorted(
        f"{prefix}{s}"
        for s in (
            "_deps",
            "_fair_weights",
            "_jobs",
            "_journal",
            "_kinds",
            "_schedules",
            "_schema_history",
            "_signals",
            "_steps",
            "_waits",
            "_workers",
        )
    )
    probe = Probe(database_dsn, prefix)
    try:
        rows = probe.rows("SELECT version, name FROM {schema_history} ORDER BY version")
        assert rows == known_migrations()
    finally:
        probe.close()


_MIGRATE_IN_A_PROCESS = textwrap.dedent(
    """
    import json, sys
    from venturi.store.postgres import PostgresStore
    from venturi.prefix import Prefix
    store = PostgresStore.from_dsn(sys.argv[1], Prefix(sys.argv[2]), pool_size=1)
    try:
        print(json.dumps(store.migrate()))
    finally:
        store.close()
    """
)


def test_eight_processes_migrating_one_fresh_prefix_make_one_schema(
    prefix: str, database_dsn: str
) -> None:
    key = Prefix(prefix).lock_key
    # Hold the prefix's lock so that all eight queue on it, then let them go at once.
    with psycopg.connect(database_dsn, autocommit=True) as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (key,))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _MIGRATE_IN_A_PROCESS, database_dsn, prefix],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        try:
            wait_until(
                lambda: _waiting_on(gate, key) == 8,
                timeout=60,
                what="eight migrating processes to queue on the advisory lock",
            )
        finally:
            started = time.monotonic()
            gate.execute("SELECT pg_advisory_unlock(%s)", (key,))
        results = [p.communicate(timeout=120) for p in procs]
    elapsed = time.monotonic() - started
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    applied = [json.loads(out) for out, _ in results]
    assert sorted(applied) == [[]] * 7 + [ALL]
    probe = Probe(database_dsn, prefix)
    try:
        assert probe.rows(
            "SELECT version, count(*) FROM {schema_history} GROUP BY 1 ORDER BY 1"
        ) == [(version, 1) for version, _ in known_migrations()]
        assert len(_tables(database_dsn, prefix)) == 11
    finally:
        probe.close()
    print(f"8 processes migrated one prefix in {elapsed:.2f}s after release: one applied, 7 no-ops")


def _waiting_on(conn: psycopg.Connection[tuple[int]], key: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND ((classid::bigint << 32) | objid::bigint) = %s",
        (key,),
    ).fetchone()
    assert row is not None
    return row[0]


def test_a_held_lock_times_out_but_other_prefixes_migrate_meanwhile(
    make_store: Callable[..., PostgresStore], database_dsn: str
) -> None:
    blocked, free = fresh_prefix("blocked"), fresh_prefix("free")
    try:
        with psycopg.connect(database_dsn, autocommit=True) as squatter:
            squatter.execute("SELECT pg_advisory_lock(%s)", (Prefix(blocked).lock_key,))
            started = time.monotonic()
            assert make_store(free, migration_lock_timeout=5).migrate() == ALL
            other_prefix = time.monotonic() - started
            started = time.monotonic()
            with pytest.raises(MigrationLockTimeout, match=blocked) as info:
                make_store(blocked, migration_lock_timeout=0.3).migrate()
            waited = time.monotonic() - started
            assert "0.3s" in str(info.value)
            assert _tables(database_dsn, blocked) == []
        print(
            f"other prefix migrated in {other_prefix:.3f}s while the lock was held; "
            f"the blocked one gave up after {waited:.2f}s"
        )
        assert make_store(blocked).migrate() == ALL
    finally:
        drop_prefix(database_dsn, blocked)
        drop_prefix(database_dsn, free)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", [0, 0.0001])
def test_a_zero_lock_timeout_fails_at_once_rather_than_waiting_forever(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str, timeout: float
) -> None:
    # PostgreSQL reads lock_timeout = 0 as "no limit"; venturi must not pass that through.
    with psycopg.connect(database_dsn, autocommit=True) as squatter:
        squatter.execute("SELECT pg_advisory_lock(%s)", (Prefix(prefix).lock_key,))
        with pytest.raises(MigrationLockTimeout):
            make_store(prefix, migration_lock_timeout=timeout).migrate()


def test_a_schema_newer_than_the_code_is_refused(
    store: PostgresStore, make_store: Callable[..., PostgresStore], database_dsn: str
) -> None:
    future = latest_version() + 1
    probe = Probe(database_dsn, store.prefix.name)
    try:
        probe.rows("INSERT INTO {schema_history} (version, name) VALUES (%s, %s)", future, "future")
        other = make_store(store.prefix.name)
        for call in (other.migrate, other.check_schema):
            with pytest.raises(SchemaError, match=f"version {future}.*upgrade venturi"):
                call()
        assert probe.count("schema_history") == len(ALL) + 1
    finally:
        probe.close()


def test_a_missing_migration_fails_the_schema_check(
    store: PostgresStore, database_dsn: str
) -> None:
    probe = Probe(database_dsn, store.prefix.name)
    try:
        probe.rows("DELETE FROM {schema_history} WHERE version = %s", known_migrations()[-1][0])
        with pytest.raises(SchemaError, match=f"lacks migrations {ALL[-1]}"):
            store.check_schema()
    finally:
        probe.close()


def test_the_longest_prefix_migrates_with_no_name_truncated(
    make_store: Callable[..., PostgresStore], database_dsn: str
) -> None:
    name = (fresh_prefix("long") + "_" * MAX_PREFIX_LENGTH)[:MAX_PREFIX_LENGTH]
    prefix = Prefix(name)
    try:
        store = make_store(name)
        assert store.migrate() == ALL
        store.enqueue(NewJob("k"))
        with psycopg.connect(database_dsn) as conn:
            found = {
                r[0]
                for r in conn.execute(
                    "SELECT relname FROM pg_class WHERE relname LIKE %s"
                    " UNION SELECT conname FROM pg_constraint WHERE conname LIKE %s"
                    " UNION SELECT proname FROM pg_proc WHERE proname LIKE %s"
                    " UNION SELECT stxname FROM pg_statistic_ext WHERE stxname LIKE %s"
                    " UNION SELECT typname FROM pg_type WHERE typtype = 'd' AND typname LIKE %s"
                    " UNION SELECT tgname FROM pg_trigger WHERE tgname LIKE %s",
                    (name + "%",) * 6,
                )
            }
        expected = {
            prefix.table(key)
            for key in prefix.placeholders()
            if key not in ("channel", "channel_ident", "done_channel", "done_channel_ident")
        }
        dropped = {
            prefix.table("history_idx"),  # by 0002: history pages by id
            prefix.table("jobs_status_check"),  # by 0010: statuses kept by domains
            prefix.table("journal_outcome_check"),
        }
        assert expected - dropped <= found, f"missing (truncated?) names: {expected - found}"
        assert not dropped & found, f"left behind: {dropped & found}"
        assert max(len(n) for n in expected) == 63
    finally:
        drop_prefix(database_dsn, name)


def test_the_jobs_table_and_journal_carry_autovacuum_settings_by_row_count(
    store: PostgresStore, database_dsn: str
) -> None:
    with psycopg.connect(database_dsn) as conn:
        options: dict[str, list[str]] = dict(
            conn.execute(
                "SELECT relname, reloptions FROM pg_class WHERE oid = ANY(%s::regclass[])",
                ([store.prefix.jobs, store.prefix.table("journal")],),
            ).fetchall()
        )
    jobs = options[store.prefix.jobs]
    assert "autovacuum_vacuum_scale_factor=0" in jobs
    assert "autovacuum_vacuum_threshold=10000" in jobs
    assert "autovacuum_vacuum_cost_delay=0" in jobs
    assert "fillfactor=70" in jobs
    journal = options[store.prefix.table("journal")]
    assert "autovacuum_vacuum_scale_factor=0" in journal
    assert "autovacuum_vacuum_cost_delay=0" in journal
