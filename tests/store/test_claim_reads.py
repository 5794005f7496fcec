"""A claim from floors (claim_floored.sql) does not read the claim index's entries of
the jobs claimed before it again.

While a snapshot is held open elsewhere no vacuum can remove those entries. Without a
floor the claim steps over them once (the probe that finds the first pending job; the
range read starts there); from the floor an earlier claim found it steps over only the
entries of the jobs claimed since. The blocks each scan of the claim index reads are
counted with EXPLAIN (ANALYZE, BUFFERS) inside a transaction that is rolled back, with
the plan PostgreSQL makes for a prepared statement (generic) and the one for the values.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import fresh_prefix
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store import sqlfiles
from venturi.store.floors import FLOOR_COLUMNS, ClaimFloors
from venturi.store.postgres import PostgresStore

DRAINED = 3_000
WAITING = 200
NO_FLOOR = ClaimFloors().params([], -(2**15))


@pytest.fixture
def held(database_dsn: str, store: PostgresStore) -> Iterator[None]:
    """``DRAINED`` jobs claimed while a REPEATABLE READ snapshot stays open (their claim
    index entries stay until it ends), then ``WAITING`` jobs pending."""
    with psycopg.connect(database_dsn) as holder:
        holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        holder.execute("SELECT txid_current()")
        store.enqueue_many([NewJob("k", {"n": n}) for n in range(DRAINED)])
        claimed = 0
        while claimed < DRAINED:
            claimed += len(store.claim("drained", {"k": 60}, 500))
        store.enqueue_many([NewJob("k", {"n": n}) for n in range(WAITING)])
        yield
        holder.rollback()


def _index_blocks(plan: dict[str, Any], index: str) -> list[int]:
    """Shared blocks read by each scan of ``index`` in ``plan``."""
    found = []
    if plan.get("Index Name") == index:
        found.append(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"])
    for child in plan.get("Plans", []):
        found.extend(_index_blocks(child, index))
    return found


def _claim_index_reads(
    database_dsn: str,
    store: PostgresStore,
    name: str,
    params: dict[str, Any],
    generic: bool,
    *,
    index: str = "claim_idx",
) -> list[int]:
    """Shared blocks each scan of the prefix's ``index`` reads when ``name`` runs."""
    explain = b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sqlfiles.statement(name, store.prefix)
    with psycopg.connect(database_dsn) as conn:
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        row = conn.execute(explain, params, prepare=generic).fetchone()
        conn.rollback()
    assert row is not None
    return _index_blocks(row[0][0]["Plan"], store.prefix.table(index))


def _reads_of_one_probe(database_dsn: str, store: PostgresStore) -> int:
    """What stepping over the drained jobs' entries once costs: the first pending job."""
    jobs = store.prefix.jobs
    probe = (
        f"SELECT id FROM {jobs} WHERE status = 'pending' AND kind = 'k' "
        "ORDER BY priority DESC, visible_at, id LIMIT 1"
    )
    with psycopg.connect(database_dsn) as conn:
        row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {probe}").fetchone()
    assert row is not None
    (blocks,) = _index_blocks(row[0][0]["Plan"], store.prefix.table("claim_idx"))
    assert blocks > 10, "the drained jobs' entries must still be in the index"
    return int(blocks)


def _claim_params(floors: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kinds": ["k"],
        "leases": [60.0],
        "priority_floor": -(2**15),
        "limit": 16,
        "worker": "w",
        **(floors or {}),
    }


def _floors_of_a_claim(database_dsn: str, store: PostgresStore) -> dict[str, Any]:
    """The floor parameters that one claim (committed) from no floor leaves."""
    floors = ClaimFloors()
    statement = sqlfiles.statement("claim_floored", store.prefix)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        rows = conn.execute(statement, _claim_params(NO_FLOOR)).fetchall()
    [found] = [row for row in rows if row[0] is None]
    assert found[-FLOOR_COLUMNS] == ["k"]
    assert len(floors.job_rows(rows, -(2**15))) == 16
    return floors.params(["k"], -(2**15))


@pytest.mark.usefixtures("held")
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_a_claim_from_a_floor_steps_over_none_of_them(
    database_dsn: str, store: PostgresStore, generic: bool
) -> None:
    once = _reads_of_one_probe(database_dsn, store)
    floors = _floors_of_a_claim(database_dsn, store)
    params = _claim_params(floors)
    reads = _claim_index_reads(database_dsn, store, "claim_floored", params, generic)
    assert sum(reads) < 0.2 * once, (reads, once)


@pytest.mark.usefixtures("held")
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_a_floored_claim_without_a_floor_steps_over_them_once(
    database_dsn: str, store: PostgresStore, generic: bool
) -> None:
    once = _reads_of_one_probe(database_dsn, store)
    params = _claim_params(NO_FLOOR)
    reads = _claim_index_reads(database_dsn, store, "claim_floored", params, generic)
    assert sum(reads) < 1.5 * once, (reads, once)


@pytest.mark.usefixtures("held")
def test_the_next_due_time_from_a_floor_steps_over_none_of_them(
    database_dsn: str, store: PostgresStore
) -> None:
    once = _reads_of_one_probe(database_dsn, store)
    floors = _floors_of_a_claim(database_dsn, store)
    params = {"kinds": ["k"], "priority_floor": -(2**15), **floors}
    reads = _claim_index_reads(database_dsn, store, "next_visible_floored", params, False)
    assert sum(reads) < 0.2 * once, (reads, once)


@pytest.mark.usefixtures("held")
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_a_claim_from_a_floor_reads_only_the_pended_entries_it_needs(
    database_dsn: str, store: PostgresStore, generic: bool
) -> None:
    """The jobs made pending since the floor come from a range of the pended index and
    one lookup per transaction in progress (the holder's, in every snapshot here): each
    scan reads a path from the root to a leaf, never every entry of the kind."""
    floors = _floors_of_a_claim(database_dsn, store)
    params = _claim_params(floors)
    reads = _claim_index_reads(
        database_dsn, store, "claim_floored", params, generic, index="pended_idx"
    )
    assert len(reads) == 2 and max(reads) <= 3, reads


# A burst this large makes the claim index a level deeper than the pended index: with
# no pending job in the statistics the planner then took the smaller one.
BURST = 20_000


@pytest.fixture(scope="module")
def burst_after_analyze(database_dsn: str) -> Iterator[PostgresStore]:
    """``BURST`` jobs claimed, the table analyzed with none pending (as autovacuum's
    analyze finds a queue between two bursts), then ``BURST`` jobs pending."""
    prefix = Prefix(fresh_prefix("burst"))
    store = PostgresStore.from_dsn(database_dsn, prefix, pool_size=2)
    try:
        store.migrate()
        store.enqueue_many([NewJob("k", {"n": n}) for n in range(BURST)])
        while store.claim("drained", {"k": 60}, 1000):
            pass
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(f"ANALYZE {prefix.jobs}")
        store.enqueue_many([NewJob("k", {"n": n}) for n in range(BURST)])
        yield store
    finally:
        store.drop_prefix()
        store.close()


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("name", ["claim", "claim_floored"])
def test_statistics_of_a_drained_queue_never_send_a_claim_through_the_pended_index(
    database_dsn: str, burst_after_analyze: PostgresStore, name: str, generic: bool
) -> None:
    """Analyzed while no job was pending, the table looks as if none ever would be; a
    burst follows. A claim still reads its jobs from the claim index in claim order, not
    every pending job of the kind from the pended index and sorted (10-15 ms a claim
    here): that index serves a claim from a floor with its two lookups only."""
    store = burst_after_analyze
    floors = _floors_of_a_claim(database_dsn, store) if name == "claim_floored" else {}
    params = _claim_params(floors)
    reads = _claim_index_reads(database_dsn, store, name, params, generic, index="pended_idx")
    if name == "claim":
        assert reads == []
    else:
        assert len(reads) == 2 and max(reads) <= 3, reads
