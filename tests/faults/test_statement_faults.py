"""Every statement a worker runs, failing with every transient error class (issue 10, 5).

Each case arms one (statement, error class) pair for two runs of that statement, lets an
in-process worker drain a mixed batch (completions, a retry, a pause, a failure, long
runs the heartbeat renews, and a stale claim of a vanished worker for the reaper), then
checks in SQL that nothing was lost or left claimed, that every worker thread is alive,
and that the worker still drains new work after the fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import attrs
import pytest
from psycopg import sql
from ulid import ULID

import venturi
from tests.faults import invariants
from tests.faults.injection import ErrorClass, Faults, InjectingStore
from tests.faults.scenario import Watch, prepare
from tests.faults.workload import (
    MIX_KIND,
    enqueue_mix,
    missing_threads,
    register_mix,
    settled,
    threads_before,
)
from tests.support import ledger, wait_until
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore

LEASE: Final = 1.2  # a heartbeat every 0.4 s: the batch's long runs see one or two
CONCURRENCY: Final = 4
STATEMENTS: Final = (
    "claim",
    # Every run's end (complete, retry, pause, dead, release, the reaper's recovery) is
    # this one statement; the batch makes the worker write each of them through it.
    "settle",
    "extend_lease",
    "find_stale",
    "next_visible_at",
    "notify",
)
# The batch's retry and pause run their jobs again by design.
RERUNS: Final = invariants.INTERRUPTED | {"retried", "paused"}


@attrs.define
class Scene:
    queue: venturi.Queue
    faults: Faults
    watch: Watch
    book: ledger.Ledger
    plain: PostgresStore  # the test's own store: no faults


@pytest.fixture
def scene(database_dsn: str, shared_prefix: str) -> Iterator[Scene]:
    faults = Faults()
    store = InjectingStore.open(database_dsn, shared_prefix, faults, pool_size=6)
    queue = prepare(database_dsn, shared_prefix, store=store)
    book = ledger.Ledger(database_dsn, shared_prefix, "inproc")
    register_mix(queue, book, lease=LEASE)
    plain = PostgresStore.from_dsn(database_dsn, Prefix(shared_prefix), pool_size=1)
    watch = Watch(database_dsn, shared_prefix)
    yield Scene(queue, faults, watch, book, plain)
    watch.close()
    plain.close()
    book.close()
    queue.close()


def _stale_claim(plain: PostgresStore) -> ULID:
    """A job claimed by a worker that vanished: its lease lapses at once, for the reaper."""
    job_id = plain.enqueue(venturi.NewJob(MIX_KIND, {}))
    [job] = plain.claim("vanished", {MIX_KIND: 0.05}, 1)
    assert job.id == job_id
    return job_id


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("error", list(ErrorClass), ids=lambda e: e.name.lower())
@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_failing_statement_leaves_the_worker_whole_and_draining(
    scene: Scene, database_dsn: str, statement: str, error: ErrorClass
) -> None:
    ids = [_stale_claim(scene.plain), *enqueue_mix(scene.queue)]
    scene.faults.arm(statement, error, times=2)
    worker = scene.queue.worker(concurrency=CONCURRENCY, reaper_interval=0.2, poll_interval=0.5)
    before = threads_before()
    worker.start()
    try:
        wait_until(lambda: scene.faults.count, 15, what=f"{statement} to fail with {error.name}")
        wait_until(lambda: settled(scene.watch, ids), 20, 0.05, "the batch to be settled")
        figures = invariants.check(database_dsn, scene.queue.prefix, ids, reruns=RERUNS)
        # A run stays held only while its settlement is pending or in flight.
        wait_until(lambda: not len(worker.held), 5, 0.05, "the held set to empty")
        assert not missing_threads(before, CONCURRENCY), "worker threads died"
        assert worker.healthy, f"worker unhealthy: {worker.failure!r}"
        more = enqueue_mix(scene.queue, [("complete", 0)] * 3)
        wait_until(lambda: settled(scene.watch, more), 10, 0.05, "new work after the fault")
        assert figures.statuses.get("completed", 0) >= len(ids) - 2
        print(f"{statement} x {error.name}: failed {scene.faults.count}x; {figures.line()}")
    finally:
        worker.stop(5)
    invariants.check(database_dsn, scene.queue.prefix, ids + more, reruns=RERUNS)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("error", list(ErrorClass), ids=lambda e: e.name.lower())
def test_a_failing_release_at_stop_lets_the_claim_go(
    scene: Scene, database_dsn: str, error: ErrorClass
) -> None:
    batch = [venturi.NewJob(MIX_KIND, {"ms": 1500, "cooperative": False}) for _ in range(2)]
    ids = scene.queue.enqueue_many(batch)
    worker = scene.queue.worker(concurrency=2, prefetch=0)
    worker.start()
    try:
        wait_until(lambda: len(scene.watch.executions()) == 2, 10, what="both jobs to start")
        scene.faults.arm("settle", error, times=1)
    finally:
        worker.stop(0.05)  # both runs are still going: stop releases them
    assert scene.faults.count == 1
    held = sql.SQL(
        "SELECT count(*) FROM {} WHERE status = 'claimed' AND claim_expires_at > now()"
    ).format(scene.watch.jobs)
    wait_until(lambda: int(scene.watch.rows(held)[0][0]) == 0, LEASE + 2, what="no live claim left")
    invariants.check(database_dsn, scene.queue.prefix, ids, settled=False)
