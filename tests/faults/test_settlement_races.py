"""Settlement races: many settles of one claim, and each pair of racing transitions in
both orders, the order forced by a row lock held from a side connection.

(tests/store/test_races.py runs 32 threads x 50 rounds and cancel vs complete; this is
the 64 x 200 run the fault suite promises, plus the reaper's races.)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.faults import invariants
from tests.faults.server import ThrowawayServer
from tests.support import wait_until
from venturi.models import Claim, JobRecord, NewJob, Settlement
from venturi.pgstore import PostgresStore
from venturi.prefix import Prefix
from venturi.reaper import Reaper

THREADS = 64
ROUNDS = 200
KIND = "race"
SETTLEMENTS: list[Callable[[int], Settlement]] = [
    lambda i: Settlement.complete(attachment={"by": i}),
    lambda i: Settlement.retry(0, note=f"retry {i}"),
    lambda i: Settlement.pause(timedelta(hours=1), carry={"by": i}),
    lambda i: Settlement.dead(note=f"dead {i}"),
    lambda i: Settlement.release(note=f"release {i}"),
]


@pytest.fixture
def race_store(own_server: ThrowawayServer, own_prefix: str) -> Iterator[PostgresStore]:
    store = PostgresStore.from_dsn(own_server.dsn, Prefix(own_prefix), pool_size=THREADS + 2)
    store.migrate()
    yield store
    store.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_64_concurrent_settles_of_one_claim_200_times(
    race_store: PostgresStore, own_server: ThrowawayServer, own_prefix: str
) -> None:
    store = race_store
    barrier = threading.Barrier(THREADS)
    winners: Counter[str] = Counter()
    started = time.monotonic()

    def settle(claim: Claim, i: int) -> bool:
        barrier.wait(timeout=60)
        return store.settle(claim, SETTLEMENTS[i % len(SETTLEMENTS)](i))

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for number in range(ROUNDS):
            kind = f"{KIND}.{number}"  # a kind per round: released jobs stay out of the way
            job_id = store.enqueue(NewJob(kind))
            [job] = store.claim("racer", {kind: 300}, 1)
            claim = Claim.of(job)
            applied = list(pool.map(partial(settle, claim), range(THREADS)))
            journal = store.journal(job_id)
            assert applied.count(True) == 1, f"{applied.count(True)} settlements applied"
            assert len(journal) == 1, journal
            winners[journal[0].outcome.value] += 1
    elapsed = time.monotonic() - started
    figures = invariants.check(
        own_server.dsn, own_prefix, settled=False, reruns=invariants.RUN_ENDINGS
    )
    print(
        f"\nsettlement race: {ROUNDS} rounds x {THREADS} concurrent settles of one claim "
        f"(complete/retry/pause/dead/release) in {elapsed:.1f}s: exactly one applied and one "
        f"journal row every round; winners {dict(winners)}\n  {figures.line()}"
    )
    assert sum(winners.values()) == ROUNDS


class Interleaving:
    """Two store calls racing for one job row, forced into a chosen order.

    A side connection locks the row; the first call starts and blocks on it, then the
    second starts and queues behind the first; releasing the lock lets them run in that
    order (PostgreSQL grants a row to its waiters first come, first served).
    """

    def __init__(self, dsn: str, prefix: str) -> None:
        self.dsn = dsn
        self.prefix = prefix
        self.jobs = sql.Identifier(f"{prefix}_jobs")

    def _waiting(self, observer: psycopg.Connection[Any]) -> int:
        row = observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s AND pid <> pg_backend_pid()",
            (f"%{self.prefix}_jobs%",),
        ).fetchone()
        return int(row[0]) if row else 0

    def run(self, job: JobRecord, first: Callable[[], Any], second: Callable[[], Any]) -> list[Any]:
        results: list[Any] = [None, None]
        threads = []
        # Watched from a connection outside the lock's transaction: a transaction reads
        # pg_stat_activity once and then keeps that snapshot.
        observer = psycopg.connect(self.dsn, autocommit=True)
        with observer, psycopg.connect(self.dsn, autocommit=True) as side, side.transaction():
            side.execute(
                sql.SQL("SELECT 1 FROM {} WHERE id = %s FOR UPDATE").format(self.jobs),
                (job.id.to_uuid(),),
            )
            for index, call in enumerate((first, second)):

                def target(i: int = index, c: Callable[[], Any] = call) -> None:
                    results[i] = c()

                thread = threading.Thread(target=target)
                thread.start()
                threads.append(thread)
                wait_until(lambda n=index + 1: self._waiting(observer) == n, 30, 0.01, "a waiter")  # type: ignore[misc]
        for thread in threads:
            thread.join(30)
        return results

    def expire(self, job: JobRecord) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {} SET claim_expires_at = now() - interval '1 second' WHERE id = %s"
                ).format(self.jobs),
                (job.id.to_uuid(),),
            )


def _claimed(store: PostgresStore) -> JobRecord:
    store.enqueue(NewJob(KIND))
    [job] = store.claim("holder", {KIND: 300}, 1)
    return job


@pytest.mark.parametrize(
    ("first", "second", "results", "status", "journal"),
    [
        ("settle", "reaper", [True, 0], "completed", ["completed"]),
        ("reaper", "settle", [1, False], "pending", ["recovered"]),
        ("heartbeat", "reaper", [True, 0], "claimed", []),
        ("reaper", "heartbeat", [1, False], "pending", ["recovered"]),
        ("cancel", "reaper", [True, 0], "cancelled", ["cancelled"]),
        ("reaper", "cancel", [1, True], "cancelled", ["recovered", "cancelled"]),
    ],
)
def test_forced_interleaving(  # noqa: PLR0917 (fixtures and parameters)
    store: PostgresStore,
    database_dsn: str,
    prefix: str,
    first: str,
    second: str,
    results: list[Any],
    status: str,
    journal: list[str],
) -> None:
    race = Interleaving(database_dsn, prefix)
    job = _claimed(store)
    race.expire(job)  # the reaper may take it: the lease ran out
    reaper = Reaper(store, {})
    calls: dict[str, Callable[[], Any]] = {
        "settle": lambda: store.settle(Claim.of(job), Settlement.complete()),
        "reaper": reaper.run_once,
        "heartbeat": lambda: job.id in store.extend_lease([(Claim.of(job), 300.0)]).applied,
        "cancel": lambda: store.cancel(job.id),
    }
    got = race.run(job, calls[first], calls[second])
    after = store.get(job.id)
    assert after is not None
    outcomes = [entry.outcome.value for entry in store.journal(job.id)]
    print(f"\n{first} then {second}: results {got}, job {after.status.value}, journal {outcomes}")
    assert got == results
    assert after.status.value == status
    assert outcomes == journal
    invariants.check(database_dsn, prefix, settled=False, stale_after=0)
