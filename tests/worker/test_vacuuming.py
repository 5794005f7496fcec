"""Workers vacuum the jobs table between autovacuum's visits: once enough dead row
versions accumulated since the last vacuum, never again and again for versions an open
snapshot keeps, and never a table their role may not vacuum."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.support import Probe, postgres_store, wait_until
from venturi.client import Queue
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore
from venturi.worker import vacuuming
from venturi.worker.runtime import Worker
from venturi.worker.vacuuming import JobsTableVacuum

# Enough dead versions over this many live rows to make a vacuum due.
LIVE = 2000
DUE = vacuuming.DEAD_ROWS + int(vacuuming.DEAD_FRACTION * LIVE) + 500


def _fill(probe: Probe, rows: int) -> None:
    probe.rows(
        "INSERT INTO {jobs} (id, kind, payload)"
        " SELECT gen_random_uuid(), 'vacuum.test', '{{}}' FROM generate_series(1, %s)",
        rows,
    )


def _kill_versions(probe: Probe, store: PostgresStore, versions: int) -> int:
    """Update rows until the server's statistics count ``versions`` more dead ones."""
    before = _dead(store)
    done = 0
    while done < versions:
        step = min(LIVE, versions - done)
        probe.rows(
            "UPDATE {jobs} SET priority = priority + 1"
            " WHERE id IN (SELECT id FROM {jobs} LIMIT %s)",
            step,
        )
        done += step
    probe.rows("SELECT pg_stat_force_next_flush()")  # not after the idle session's 10 s
    return wait_until(
        lambda: (dead := _dead(store)) >= before + versions and dead,
        what=f"{versions} more dead versions in the statistics",
    )


def _dead(store: PostgresStore) -> int:
    rows = store.dead_rows()
    assert rows is not None
    return rows.dead


def _vacuums(probe: Probe, table: str) -> int:
    """Manual vacuums of ``table`` the statistics count (autovacuum's are apart)."""
    return int(
        probe.scalar(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass(%s)", table
        )
    )


@pytest.fixture
def probe(database_dsn: str, queue: Queue) -> Iterator[Probe]:
    instance = Probe(database_dsn, queue.prefix)
    # Autovacuum stays away, so that every vacuum counted is the one a test expects.
    instance.rows("ALTER TABLE {jobs} SET (autovacuum_enabled = false)")
    _fill(instance, LIVE)
    yield instance
    instance.close()


@pytest.fixture
def store(queue: Queue) -> PostgresStore:
    return postgres_store(queue)


def test_a_vacuum_runs_once_enough_dead_versions_accumulated(
    store: PostgresStore, probe: Probe
) -> None:
    vacuum = JobsTableVacuum(store)
    _kill_versions(probe, store, DUE)
    assert vacuum.step() == vacuuming.BUSY_LOOK
    assert _vacuums(probe, store.prefix.jobs) == 1
    # What it removed depends on every snapshot open on the server (the suite shares it),
    # so that is left to the test that holds one itself.


def test_fewer_dead_versions_are_left_to_autovacuum(store: PostgresStore, probe: Probe) -> None:
    vacuum = JobsTableVacuum(store)
    _kill_versions(probe, store, vacuuming.DEAD_ROWS // 2)
    assert vacuum.step() == vacuuming.BUSY_LOOK  # growing: looked at again soon
    assert vacuum.step() == vacuuming.QUIET_LOOK  # no longer growing
    assert _vacuums(probe, store.prefix.jobs) == 0


def test_a_new_workers_first_look_is_followed_by_another_soon(
    store: PostgresStore, probe: Probe
) -> None:
    """The statistics lag a worker's first claims (an idle backend reports its counts
    after ten seconds): a first look that finds nothing new looks again within a second."""
    _kill_versions(probe, store, vacuuming.DEAD_ROWS // 2)
    earlier = JobsTableVacuum(store)
    earlier.step()
    assert earlier.step() == vacuuming.QUIET_LOOK  # that worker saw the count stand still
    later = JobsTableVacuum(store)
    assert later.step() == vacuuming.BUSY_LOOK
    assert later.step() == vacuuming.QUIET_LOOK


def _holding(database_dsn: str) -> psycopg.Connection[Any]:
    """A session whose REPEATABLE READ snapshot keeps every version that dies later."""
    holder = psycopg.connect(database_dsn)
    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.execute("SELECT 1")
    return holder


def test_versions_an_open_snapshot_keeps_are_not_vacuumed_again_and_again(
    database_dsn: str, store: PostgresStore, probe: Probe
) -> None:
    vacuum = JobsTableVacuum(store)
    with _holding(database_dsn) as holder:
        _kill_versions(probe, store, DUE)
        vacuum.step()
        assert _vacuums(probe, store.prefix.jobs) == 1
        assert _dead(store) >= DUE  # the vacuum could remove none of them
        assert store.vacuum_pace.futile == 1
        # While the holder it met still holds, no vacuum runs, however many die.
        for _ in range(3):
            _kill_versions(probe, store, 2 * DUE)
            assert vacuum.step() == vacuuming.BUSY_LOOK  # looked at again soon
        assert _vacuums(probe, store.prefix.jobs) == 1
        holder.rollback()

    # Released: the next look vacuums, removes them all (once no other session's
    # snapshot, on a server other tests share, still needs them) and the pace starts
    # afresh.
    def vacuumed_clean() -> bool:
        vacuum.step()
        if _dead(store) < vacuuming.DEAD_ROWS:
            return True
        _kill_versions(probe, store, DUE)
        return False

    wait_until(vacuumed_clean, interval=0.2, what="a vacuum that removes the released versions")
    assert store.vacuum_pace.futile == 0
    vacuums = _vacuums(probe, store.prefix.jobs)
    _kill_versions(probe, store, DUE)
    vacuum.step()
    assert _vacuums(probe, store.prefix.jobs) == vacuums + 1


def test_a_new_holder_of_the_horizon_gets_a_vacuum_after_twice_as_many_versions(
    database_dsn: str, store: PostgresStore, probe: Probe
) -> None:
    vacuum = JobsTableVacuum(store)
    with _holding(database_dsn) as older:
        probe.rows("SELECT pg_current_xact_id()")  # the newer snapshot's xmin is later
        with _holding(database_dsn) as newer:
            _kill_versions(probe, store, DUE)
            vacuum.step()
            assert (_vacuums(probe, store.prefix.jobs), store.vacuum_pace.futile) == (1, 1)
            older.rollback()  # the newer snapshot still keeps every version, and now holds
            _kill_versions(probe, store, DUE)
            vacuum.step()  # it removed nothing: the next waits for twice as many versions
            assert _vacuums(probe, store.prefix.jobs) == 1
            _kill_versions(probe, store, DUE)
            vacuum.step()
            assert (_vacuums(probe, store.prefix.jobs), store.vacuum_pace.futile) == (2, 2)
            newer.rollback()


def test_a_worker_started_later_goes_on_from_the_last_vacuum(
    store: PostgresStore, probe: Probe
) -> None:
    _kill_versions(probe, store, DUE)
    JobsTableVacuum(store).step()
    assert _vacuums(probe, store.prefix.jobs) == 1
    # Whatever that vacuum left (other tests' snapshots may keep some), a vacuum of a
    # sibling store (a new worker's) waits for new versions, as the first would.
    later = JobsTableVacuum(store.sibling())
    try:
        later.step()
        assert _vacuums(probe, store.prefix.jobs) == 1
        _kill_versions(probe, store, DUE << store.vacuum_pace.futile)
        later.step()
        assert _vacuums(probe, store.prefix.jobs) == 2
    finally:
        later.store.close()


@pytest.fixture
def stranger(database_dsn: str, queue: Queue) -> Iterator[PostgresStore]:
    """A store of the test's prefix connected as a role that does not own its tables."""
    role = f"venturi_stranger_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(role)))
    dsn = psycopg.conninfo.make_conninfo(database_dsn, user=role)
    instance = PostgresStore.from_dsn(dsn, Prefix(queue.prefix), pool_size=1)
    yield instance
    instance.close()
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))


def test_a_table_another_role_owns_is_left_to_autovacuum(
    store: PostgresStore,
    stranger: PostgresStore,
    probe: Probe,
    caplog: pytest.LogCaptureFixture,
) -> None:
    vacuum = JobsTableVacuum(stranger)
    _kill_versions(probe, store, DUE)
    with caplog.at_level(logging.INFO, logger="venturi.vacuum"):
        assert vacuum.step() == vacuuming.QUIET_LOOK
        assert vacuum.step() == vacuuming.QUIET_LOOK
    assert _vacuums(probe, store.prefix.jobs) == 0
    said = [r.getMessage() for r in caplog.records if r.name == "venturi.vacuum"]
    assert len(said) == 1 and "belongs to another role" in said[0]


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_a_worker_vacuums_the_jobs_table_and_vacuum_false_leaves_it(
    queue: Queue, start_worker: Callable[..., Worker], store: PostgresStore, probe: Probe
) -> None:
    queue.job("vacuum.other")(lambda: None)  # the filled rows are of a kind it does not run
    _kill_versions(probe, store, DUE)
    quiet = start_worker(vacuum=False)
    wait_until(lambda: quiet.listening, what="the worker listening")
    assert not _threads_named("venturi-vacuum")
    assert _vacuums(probe, store.prefix.jobs) == 0
    quiet.stop(timeout=5)
    start_worker()
    wait_until(
        lambda: _vacuums(probe, store.prefix.jobs) == 1, what="the worker's vacuum of the table"
    )
    assert len(_threads_named("venturi-vacuum")) == 1


def test_stopping_cancels_the_statement_under_way_and_every_later_vacuum(
    database_dsn: str, store: PostgresStore, probe: Probe
) -> None:
    vacuum = JobsTableVacuum(store)
    # A VACUUM of a large table runs for minutes; a long statement on the connection the
    # vacuum holds stands in for it here.
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        failed: list[BaseException] = []

        def run() -> None:
            try:
                conn.execute("SELECT pg_sleep(60)")
            except psycopg.errors.QueryCanceled as exc:
                failed.append(exc)

        vacuum._hold(conn)
        sleeping = threading.Thread(target=run)
        sleeping.start()
        wait_until(
            lambda: probe.scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'"
                " AND state = 'active'"
            ),
            what="the long statement under way",
        )
        vacuum.cancel()
        sleeping.join(10)
        assert not sleeping.is_alive() and len(failed) == 1
        vacuum._hold(None)
    _kill_versions(probe, store, DUE)
    assert vacuum.step() == vacuuming.QUIET_LOOK  # stopped: no new vacuum starts
    assert _vacuums(probe, store.prefix.jobs) == 0
