"""`PostgresStore.vacuum_health`: who holds back the xmin horizon, and the jobs table's dead
rows. The server is shared with tests running at the same time, so each test looks for
its own session among the holders, never for an empty list."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import attrs
import psycopg
import psycopg.conninfo
import psycopg.sql
import pytest

from tests.support import Probe, wait_until
from venturi import upkeep
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore
from venturi.upkeep import HorizonHolder, VacuumHealth

# Plenty, so that a busy shared server's other holders cannot crowd ours out.
HOLDERS = 100


def holder(health: VacuumHealth, pid: int) -> HorizonHolder | None:
    return next((h for h in health.holders if h.kind == "session" and h.name == str(pid)), None)


@pytest.fixture
def snapshot(database_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A session holding a REPEATABLE READ snapshot, under a hostile application_name."""
    with psycopg.connect(database_dsn, application_name="<b>report</b>") as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        yield conn


def test_a_held_snapshot_is_reported_with_its_session_until_released(
    store: PostgresStore, snapshot: psycopg.Connection[tuple[object, ...]]
) -> None:
    pid = snapshot.info.backend_pid
    found = wait_until(
        lambda: holder(store.vacuum_health(HOLDERS), pid), what="the session among the holders"
    )
    assert found.application_name == "<b>report</b>" and found.user == "postgres"
    assert found.state == "idle in transaction" and found.idle_in_transaction
    assert found.seconds is not None and found.seconds >= 0 and found.xmin_age >= 0
    assert found.held_too_long(0.0) and not found.held_too_long(upkeep.HELD_AFTER)
    [line] = [w for w in store.vacuum_health(HOLDERS).warnings(0.0) if f"pid {pid} " in w]
    assert "'<b>report</b>'" in line and f"pg_terminate_backend({pid})" in line
    snapshot.rollback()
    wait_until(
        lambda: holder(store.vacuum_health(HOLDERS), pid) is None,
        what="the released session gone from the holders",
    )


def test_a_transaction_idle_after_a_write_is_a_holder_without_a_snapshot(
    store: PostgresStore, database_dsn: str
) -> None:
    """At READ COMMITTED an idle transaction keeps no snapshot, but the transaction id of
    its write holds the horizon as well: a vacuum keeps every version that died since."""
    with psycopg.connect(database_dsn, application_name="writer") as conn:
        conn.execute("SELECT pg_current_xact_id()")  # takes a transaction id, then idles
        pid = conn.info.backend_pid
        found = wait_until(
            lambda: holder(store.vacuum_health(HOLDERS), pid), what="the writer among holders"
        )
        assert found.idle_in_transaction and found.xmin_age >= 0
        conn.rollback()
        wait_until(
            lambda: holder(store.vacuum_health(HOLDERS), pid) is None,
            what="the writer gone from the holders once it rolled back",
        )


def test_the_reading_session_itself_is_no_holder(store: PostgresStore) -> None:
    with store.connection() as conn:
        own = conn.info.backend_pid
    assert holder(store.vacuum_health(HOLDERS), own) is None


def test_dead_rows_past_the_threshold_warn(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    probe.rows("ALTER TABLE {jobs} SET (autovacuum_enabled = false)")
    live = 2000
    probe.rows(
        "INSERT INTO {jobs} (id, kind, payload)"
        " SELECT gen_random_uuid(), 'vacuum.test', '{{}}' FROM generate_series(1, %s)",
        live,
    )
    assert not store.vacuum_health().dead_rows_piling()

    def piled() -> VacuumHealth | None:
        # One more round of dead versions each look, until the statistics count enough
        # (a page pruned on the way may take some back).
        probe.rows("UPDATE {jobs} SET priority = priority + 1")
        probe.rows("SELECT pg_stat_force_next_flush()")
        health = store.vacuum_health()
        return health if health.dead_rows_piling() else None

    health = wait_until(piled, what="the jobs table's dead rows past the threshold")
    assert health.dead is not None and health.dead >= upkeep.DEAD_ROWS
    assert health.live is not None and health.live >= live // 2
    assert health.vacuumed_at is None
    warning = health.warnings()[-1]
    assert f"{health.dead:,} dead row versions" in warning and "VACUUM" in warning
    # A lower threshold from the operator warns sooner; a table holding many more live
    # rows than dead does not warn at all.
    assert health.dead_rows_piling(100)
    assert not attrs.evolve(health, live=health.dead * 10).dead_rows_piling(100)


def test_before_the_table_exists_only_the_holders_are_read(unmigrated: PostgresStore) -> None:
    health = unmigrated.vacuum_health()
    assert (health.dead, health.live) == (None, None)
    assert not health.dead_rows_piling() and all("dead row" not in w for w in health.warnings())


@pytest.fixture
def unmigrated(database_dsn: str) -> Iterator[PostgresStore]:
    instance = PostgresStore.from_dsn(
        database_dsn, Prefix(f"nothing_{uuid.uuid4().hex[:8]}"), pool_size=1
    )
    yield instance
    instance.close()


@pytest.fixture
def stranger(database_dsn: str, store: PostgresStore) -> Iterator[PostgresStore]:
    """The test's prefix read by a role without pg_read_all_stats."""
    role = f"venturi_stranger_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(role)))
    dsn = psycopg.conninfo.make_conninfo(database_dsn, user=role)
    instance = PostgresStore.from_dsn(dsn, store.prefix, pool_size=1)
    yield instance
    instance.close()
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))


def test_a_role_without_pg_read_all_stats_reads_unknown(
    stranger: PostgresStore, snapshot: psycopg.Connection[tuple[object, ...]]
) -> None:
    pid = snapshot.info.backend_pid
    found = wait_until(
        lambda: holder(stranger.vacuum_health(HOLDERS), pid),
        what="another role's session among the holders",
    )
    # Its pid, user, application_name and xmin are visible to every role; not its state
    # nor its start, so how long it held the horizon is unknown, and not warned about.
    assert found.application_name == "<b>report</b>"
    assert (found.state, found.seconds, found.idle_in_transaction) == (None, None, None)
    assert "held it for unknown" in found.cause() and "state unknown" in found.cause()
    assert not found.held_too_long(0.0)
    warnings = stranger.vacuum_health(HOLDERS).warnings(0.0)
    assert all(f"pid {pid} " not in line for line in warnings)
