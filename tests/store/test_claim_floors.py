"""Claims from a floor miss no job: whatever became pending before the floor in claim
order after the floor was found (a transaction that began earlier and committed later,
a job made pending again, a job moved earlier, a higher priority) is claimed in its
place, as a claim from the start would claim it.

Each store here claims from floors whatever the dead row versions, so its claims use
the floors its earlier claims found (they are kept per store, for every connection of
its pool, and dropped when a statement finds itself on another server)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.support import Probe, migrate_before, wait_until
from venturi.models import SMALLINT_MIN, JobRecord, NewJob
from venturi.prefix import Prefix
from venturi.settlements import Claim, Settlement
from venturi.store.floors import FLOORS_AFTER_HELD_DEAD_ROWS, FLOORS_HELD_AGE
from venturi.store.postgres import PostgresStore

LEASE = {"k": 60.0}


@pytest.fixture
def lone(database_dsn: str, store: PostgresStore) -> Iterator[PostgresStore]:
    """A second store of the test's (migrated) prefix, on a single connection."""
    single = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=1, floors_after_dead_rows=0
    )
    yield single
    single.close()


@pytest.fixture
def probe(database_dsn: str, prefix: str) -> Iterator[Probe]:
    reader = Probe(database_dsn, prefix)
    yield reader
    reader.close()


def _names(jobs: list[JobRecord]) -> list[str]:
    return [str(job.payload["name"]) for job in jobs]


def _job(name: str, **options: Any) -> NewJob:
    return NewJob("k", {"name": name}, **options)


def _floor_params(store: PostgresStore) -> dict[str, Any]:
    return store.claim_floors.params(["k"], SMALLINT_MIN)


def test_a_job_of_a_transaction_that_began_before_the_floor_is_claimed_in_its_place(
    database_dsn: str, store: PostgresStore, lone: PostgresStore
) -> None:
    with psycopg.connect(database_dsn) as early:
        store.enqueue(_job("early"), conn=early)  # visible_at: when this transaction began
        lone.enqueue(_job("later-1"))
        lone.enqueue(_job("later-2"))
        assert _names(lone.claim("w", LEASE, 1)) == ["later-1"]  # the floor: later-1
        early.commit()
    assert _names(lone.claim("w", LEASE, 1)) == ["early"]
    assert _names(lone.claim("w", LEASE, 1)) == ["later-2"]
    assert lone.claim("w", LEASE, 1) == []


def test_a_job_made_pending_again_before_the_floor_is_claimed(
    probe: Probe, lone: PostgresStore
) -> None:
    lone.enqueue(_job("first"))
    lone.enqueue(_job("second"))
    lone.enqueue(_job("third"))
    [first] = lone.claim("w", LEASE, 1)
    assert _names(lone.claim("w", LEASE, 1)) == ["second"]  # the floor: second
    probe.rows(
        "UPDATE {jobs} SET status = 'pending', claimed_by = NULL, claim_expires_at = NULL "
        "WHERE id = %s",
        first.id.to_uuid(),
    )
    assert _names(lone.claim("w", LEASE, 1)) == ["first"]
    assert _names(lone.claim("w", LEASE, 1)) == ["third"]


def test_a_pending_job_moved_before_the_floor_is_claimed(probe: Probe, lone: PostgresStore) -> None:
    lone.enqueue(_job("delayed", delay=timedelta(hours=1)))
    lone.enqueue(_job("due-1"))
    lone.enqueue(_job("due-2"))
    assert _names(lone.claim("w", LEASE, 1)) == ["due-1"]  # the floor: due-1
    probe.rows(
        "UPDATE {jobs} SET visible_at = now() - interval '1 day' WHERE payload->>'name' = %s",
        "delayed",
    )
    assert _names(lone.claim("w", LEASE, 1)) == ["delayed"]
    assert _names(lone.claim("w", LEASE, 1)) == ["due-2"]


def test_jobs_moved_by_the_test_clock_are_claimed_in_their_new_order(
    store: PostgresStore, lone: PostgresStore
) -> None:
    lone.enqueue(_job("delayed", delay=timedelta(hours=1)))
    lone.enqueue(_job("due-1"))
    lone.enqueue(_job("due-2"))
    assert _names(lone.claim("w", LEASE, 1)) == ["due-1"]
    store.advance_clock(7200)  # each pending job two hours earlier, before the floor
    assert _names(lone.claim("w", LEASE, 1)) == ["due-2"]
    assert _names(lone.claim("w", LEASE, 1)) == ["delayed"]


def test_a_higher_priority_written_after_the_floor_is_claimed_first(
    lone: PostgresStore,
) -> None:
    for n in range(3):
        lone.enqueue(_job(f"low-{n}"))
    assert _names(lone.claim("w", LEASE, 1)) == ["low-0"]
    lone.enqueue(_job("high", priority=5))
    assert _names(lone.claim("w", LEASE, 2)) == ["high", "low-1"]


def test_each_priority_is_claimed_after_the_one_above_it_drains(lone: PostgresStore) -> None:
    for name, priority in (("a1", 1), ("a0", 0), ("b1", 1), ("b0", 0), ("c2", 2)):
        lone.enqueue(_job(name, priority=priority))
    claimed = [_names(lone.claim("w", LEASE, 1)) for _ in range(6)]
    assert claimed == [["c2"], ["a1"], ["b1"], ["a0"], ["b0"], []]


def test_a_kind_found_empty_then_written_is_claimed(lone: PostgresStore) -> None:
    assert lone.claim("w", LEASE, 5) == []  # the floor: none pending
    lone.enqueue(_job("new"))
    assert _names(lone.claim("w", LEASE, 5)) == ["new"]
    assert lone.seconds_until_visible(["k"]) is None


def test_the_next_due_time_from_floors_sees_what_a_claim_would(
    database_dsn: str, store: PostgresStore, lone: PostgresStore
) -> None:
    lone.enqueue(_job("later", delay=timedelta(hours=1)))
    assert 3500 < (lone.seconds_until_visible(["k"]) or 0) <= 3600  # the floor: later
    with psycopg.connect(database_dsn) as sooner:
        store.enqueue(_job("sooner", delay=timedelta(minutes=1)), conn=sooner)
        assert (lone.seconds_until_visible(["k"]) or 0) > 3500  # not committed yet
        sooner.commit()
    assert 0 < (lone.seconds_until_visible(["k"]) or 0) <= 60
    store.enqueue(_job("now", priority=-1))
    assert lone.seconds_until_visible(["k"]) == 0.0


def test_floors_are_kept_per_priority_floor(lone: PostgresStore) -> None:
    lone.enqueue(_job("low"))
    lone.enqueue(_job("high", priority=5))
    assert _names(lone.claim("w", LEASE, 5, priority_floor=5)) == ["high"]
    assert lone.claim("w", LEASE, 5, priority_floor=5) == []  # nothing at 5 or above
    assert _names(lone.claim("w", LEASE, 5)) == ["low"]  # below that floor's view
    lone.enqueue(_job("high-again", priority=5))
    assert _names(lone.claim("w", LEASE, 5, priority_floor=5)) == ["high-again"]


@pytest.mark.parametrize("elsewhere", [False, True], ids=["same-server", "another-server"])
def test_floors_found_on_another_server_are_ignored(
    probe: Probe, lone: PostgresStore, elsewhere: bool
) -> None:
    """A floor says which jobs its snapshot saw written; on a promoted standby or a
    restored server those transactions are others. Here a floor past a pending job,
    whose snapshot saw that job written, steps over it on its own server, and is
    ignored when it names another."""
    lone.enqueue(_job("first"))
    assert _names(lone.claim("w", LEASE, 1)) == ["first"]  # the server, learnt
    server = _floor_params(lone)["floor_server"]
    assert server
    lone.enqueue(_job("hidden"))
    lone.enqueue(_job("later"))
    ((priority, at, later_id),) = probe.rows(
        "SELECT priority, visible_at, id FROM {jobs} WHERE payload->>'name' = 'later'"
    )
    snapshot = probe.scalar("SELECT pg_current_snapshot()::text")
    found_on = "another server" if elsewhere else server
    lone.claim_floors.learn((["k"], [priority], [at], [later_id], snapshot, found_on), SMALLINT_MIN)
    assert _names(lone.claim("w", LEASE, 1)) == (["hidden"] if elsewhere else ["later"])


def test_jobs_written_before_the_migration_are_claimed_from_floors(
    database_dsn: str, prefix: str, probe: Probe
) -> None:
    assert migrate_before(database_dsn, prefix, "0017") == "0017_claim_floor"
    for n in range(5):
        probe.rows(
            "INSERT INTO {jobs} (id, kind, payload, visible_at) "
            "VALUES (gen_random_uuid(), 'k', %s, now() - make_interval(secs => %s))",
            psycopg.types.json.Jsonb({"name": f"old-{n}"}),
            100 - n,
        )
    single = PostgresStore.from_dsn(
        database_dsn, Prefix(prefix), pool_size=1, floors_after_dead_rows=0
    )
    try:
        assert single.migrate()[0] == "0017_claim_floor"
        assert probe.rows("SELECT count(*) FROM {jobs} WHERE pended_xid IS NULL") == [(5,)]
        single.enqueue(_job("new"))
        claimed = [_names(single.claim("w", LEASE, 1)) for _ in range(7)]
    finally:
        single.close()
    assert claimed == [["old-0"], ["old-1"], ["old-2"], ["old-3"], ["old-4"], ["new"], []]


@pytest.mark.slow
def test_racing_writers_and_claimers_lose_and_double_nothing(
    database_dsn: str, store: PostgresStore, probe: Probe
) -> None:
    """Writers whose transactions stay open a random while (their jobs visible from when
    they began, at random priorities) and release jobs back to pending, against claimers
    sharing one store's floors from a connection each: every job is claimed, and once."""
    writers, per_writer, claimers = 4, 60, 3
    total = writers * per_writer
    claimed: list[str] = []
    claimed_lock = threading.Lock()
    writing = threading.Event()
    writing.set()
    failures: list[BaseException] = []

    def write(w: int) -> None:
        rng = random.Random(w)
        pause = threading.Event()
        try:
            with psycopg.connect(database_dsn) as conn:
                for n in range(per_writer):
                    store.enqueue(_job(f"{w}-{n}", priority=rng.randrange(3)), conn=conn)
                    pause.wait(rng.uniform(0, 0.01))
                    conn.commit()
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    shared = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=claimers, floors_after_dead_rows=0
    )

    def claim(c: int) -> None:
        rng = random.Random(100 + c)
        try:
            while writing.is_set() or len(claimed) < total:
                jobs = shared.claim(f"c{c}", LEASE, rng.randrange(1, 6))
                released = [j for j in jobs if rng.random() < 0.1 and j.run_count == 1]
                for job in released:  # back to pending, visible from before any floor
                    probe.rows(
                        "UPDATE {jobs} SET status = 'pending', claimed_by = NULL, "
                        "claim_expires_at = NULL, visible_at = visible_at - interval '1 hour' "
                        "WHERE id = %s",
                        job.id.to_uuid(),
                    )
                with claimed_lock:
                    claimed.extend(_names([j for j in jobs if j not in released]))
                if not jobs and not writing.is_set():
                    return
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    claiming = [threading.Thread(target=claim, args=(c,)) for c in range(claimers)]
    for thread in threads + claiming:
        thread.start()
    for thread in threads:
        thread.join()
    writing.clear()
    for thread in claiming:
        thread.join(timeout=60)
    shared.close()
    assert not failures, failures
    wait_until(lambda: len(claimed) >= total, timeout=5, what="every job claimed")
    assert sorted(claimed) == sorted(f"{w}-{n}" for w in range(writers) for n in range(per_writer))
    assert probe.rows("SELECT count(*) FROM {jobs} WHERE status = 'pending'") == [(0,)]


def test_claims_start_from_floors_once_dead_row_versions_pile_up(
    database_dsn: str, store: PostgresStore
) -> None:
    switching = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=1, floors_after_dead_rows=40
    )
    try:

        def floors_kept() -> bool:
            return bool(_floor_params(switching)["floor_kinds"])

        switching.enqueue(_job("first"))
        assert _names(switching.claim("w", LEASE, 1)) == ["first"]
        assert not floors_kept()  # a fresh table: claims from the start
        for n in range(60):  # two dead row versions each once completed
            switching.enqueue(_job(f"n{n}"))
        for job in switching.claim("w", LEASE, 100):
            switching.settle(Claim.of(job), Settlement.complete())

        def claimed_from_floors() -> bool:
            switching.enqueue(_job("probe"))
            assert _names(switching.claim("w", LEASE, 1)) == ["probe"]
            return floors_kept()

        wait_until(claimed_from_floors, what="claims from floors, the statistics updated")
    finally:
        switching.close()


@pytest.mark.parametrize("held", [False, True], ids=["vacuum-removes", "horizon-held"])
def test_claims_start_from_floors_sooner_once_a_vacuum_found_the_horizon_held(
    database_dsn: str, store: PostgresStore, probe: Probe, held: bool
) -> None:
    """Past `FLOORS_AFTER_HELD_DEAD_ROWS` dead row versions, and below the usual
    threshold, claims start from floors only once the workers' vacuum found it could
    remove little (its pace counts such vacuums)."""
    switching = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=1, floors_after_dead_rows=10**9
    )
    switching.vacuum_pace.futile = int(held)
    try:
        rows = FLOORS_AFTER_HELD_DEAD_ROWS // 2 + 1
        probe.rows(
            "INSERT INTO {jobs} (id, kind, payload)"
            " SELECT gen_random_uuid(), 'other', '{{}}'"
            " FROM generate_series(1, %s)",
            rows,
        )
        for _ in range(2):
            probe.rows("UPDATE {jobs} SET priority = priority + 1 WHERE kind = 'other'")
        probe.rows("SELECT pg_stat_force_next_flush()")
        wait_until(
            lambda: (
                (dead := switching.dead_rows()) is not None
                and dead.dead >= FLOORS_AFTER_HELD_DEAD_ROWS
            ),
            what="the dead row versions in the statistics",
        )
        switching.enqueue(_job("probe"))
        assert _names(switching.claim("w", LEASE, 1)) == ["probe"]
        assert bool(_floor_params(switching)["floor_kinds"]) == held
    finally:
        switching.close()


@pytest.mark.parametrize("held", [False, True], ids=["nothing-held", "snapshot-held"])
def test_claims_start_from_floors_at_once_while_an_old_snapshot_holds_the_horizon(
    database_dsn: str, store: PostgresStore, held: bool
) -> None:
    """Before the statistics count a dead row version and before any vacuum: a snapshot
    that other transactions have aged by `FLOORS_HELD_AGE` is enough."""
    switching = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=1, floors_after_dead_rows=10**9
    )
    holder = psycopg.connect(database_dsn)
    holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        if held:
            holder.execute("SELECT 1")  # the transaction's snapshot is taken here
        with psycopg.connect(database_dsn, autocommit=True) as other:
            for _ in range(FLOORS_HELD_AGE):
                other.execute("SELECT pg_current_xact_id()")  # one transaction id each
        switching.enqueue(_job("probe"))
        assert _names(switching.claim("w", LEASE, 1)) == ["probe"]
        assert bool(_floor_params(switching)["floor_kinds"]) == held
    finally:
        holder.close()
        switching.close()
