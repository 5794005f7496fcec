"""One row locked by a user stalls nothing else (issue 10, item 4).

A user's ``SELECT ... FOR UPDATE`` on one running job's row, in a transaction left open,
must cost that one job its lease renewal and nothing more: the worker's other leases
still renew, its other runs' batched completions still land, and the reapers (its own
and another worker's) still take back other stale claims instead of waiting on the row.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Final

import psycopg
import pytest
from psycopg import sql
from ulid import ULID

import venturi
from tests.faults import invariants
from tests.faults.scenario import Watch, prepare
from tests.faults.workload import MIX_KIND, register_mix
from tests.support import ledger, wait_until
from venturi.models import NewJob

LEASE: Final = 3.0  # a heartbeat a second
RERUNS: Final = invariants.INTERRUPTED
ORPHAN_KIND: Final = "fault.orphan"


@pytest.fixture
def queue(database_dsn: str, shared_prefix: str) -> Iterator[venturi.Queue]:
    queue = prepare(database_dsn, shared_prefix)
    book = ledger.Ledger(database_dsn, shared_prefix, "inproc")
    register_mix(queue, book, lease=LEASE)
    yield queue
    book.close()
    queue.close()


def _lease(watch: Watch, job_id: ULID) -> datetime | None:
    """When the job's lease ends (None once it is not claimed)."""
    query = sql.SQL("SELECT claim_expires_at FROM {} WHERE id = %s").format(watch.jobs)
    value: datetime | None = watch.rows(query, (job_id.to_uuid(),))[0][0]
    return value


def _renewed(watch: Watch, job_id: ULID, since: datetime | None) -> bool:
    now = _lease(watch, job_id)
    return now is not None and since is not None and now > since


def _lapsed(watch: Watch, job_id: ULID) -> bool:
    lease = _lease(watch, job_id)
    return lease is not None and lease < watch.clock()


def _outcomes(watch: Watch, job_id: ULID) -> list[str]:
    query = sql.SQL("SELECT outcome FROM {} WHERE job_id = %s ORDER BY id").format(watch.journal)
    return [row[0] for row in watch.rows(query, (job_id.to_uuid(),))]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_one_locked_row_stalls_no_other_job(
    queue: venturi.Queue, database_dsn: str, shared_prefix: str
) -> None:
    watch = Watch(database_dsn, shared_prefix)
    runner = queue.worker(concurrency=4, prefetch=0, reaper_interval=0.3)
    user = psycopg.connect(database_dsn)  # the user's transaction, left open
    other: venturi.Worker | None = None
    runner.start()
    try:
        # The locked job is claimed last, so a heartbeat that updates the batch in claim
        # order would hold the other rows while it waits for this one.
        *others, locked = queue.enqueue_many(
            [NewJob(MIX_KIND, {"ms": 4_000}) for _ in range(3)] + [NewJob(MIX_KIND, {"ms": 60_000})]
        )
        wait_until(lambda: len(watch.executions()) == 4, 10, what="all four jobs to start")
        user.execute(
            sql.SQL("SELECT id FROM {} WHERE id = %s FOR UPDATE").format(watch.jobs),
            (locked.to_uuid(),),
        )
        leases = {job_id: _lease(watch, job_id) for job_id in others}
        other = queue.worker(concurrency=1, reaper_interval=0.3).start()

        wait_until(
            lambda: all(_renewed(watch, j, leases[j]) for j in others),
            3 * LEASE,
            what="the other jobs' leases to renew while one row is locked",
        )
        wait_until(
            lambda: all(_outcomes(watch, j) == ["completed"] for j in others),
            3 * LEASE,
            what="the other jobs' completions to land while one row is locked",
        )
        # The locked job's lease cannot be renewed: it lapses, and the reapers must pass
        # over its locked row to reach the next stale claim.
        wait_until(lambda: _lapsed(watch, locked), 3 * LEASE, what="the lease to lapse")
        # A kind no worker here runs, so only a reaper takes it (back to pending).
        vanished = queue.store.enqueue(NewJob(ORPHAN_KIND, {}))
        [claim] = queue.store.claim("vanished", {ORPHAN_KIND: 0.05}, 1)
        assert claim.id == vanished
        wait_until(
            lambda: "recovered" in _outcomes(watch, vanished),
            5.0,
            what="a reaper to recover a stale claim past the locked row",
        )
        assert runner.healthy and other.healthy
    finally:
        user.rollback()
        user.close()
        runner.stop(5)
        if other is not None:
            other.stop(5)
        watch.close()
    invariants.check(database_dsn, shared_prefix, settled=False, reruns=RERUNS)
