"""Settlement races: many settles of one claim, each pair of racing transitions in both
orders, and the batched transitions skipping (never waiting for) a row another session
holds locked.

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
from tests.support import complete_many, recover
from venturi.models import JobRecord, NewJob, Outcome
from venturi.prefix import Prefix
from venturi.settlements import BatchOutcome, Claim, Settlement
from venturi.store.postgres import PostgresStore

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

    def settle(claim: Claim, i: int) -> Outcome | None:
        barrier.wait(timeout=60)
        return store.settle(claim, SETTLEMENTS[i % len(SETTLEMENTS)](i))

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for number in range(ROUNDS):
            kind = f"{KIND}.{number}"  # a kind per round: released jobs stay out of the way
            job_id = store.enqueue(NewJob(kind))
            [job] = store.claim("racer", {kind: 300}, 1)
            claim = Claim.of(job)
            answers = list(pool.map(partial(settle, claim), range(THREADS)))
            applied = [a for a in answers if a is not None]
            journal = store.reads.journal(job_id)
            assert len(applied) == 1, f"{len(applied)} settlements applied"
            assert len(journal) == 1, journal
            assert applied == [journal[0].outcome], "the winner's answer is not the journal's"
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


def _expire(dsn: str, prefix: str, job: JobRecord) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {} SET claim_expires_at = now() - interval '1 second' WHERE id = %s"
            ).format(sql.Identifier(f"{prefix}_jobs")),
            (job.id.to_uuid(),),
        )


def _claimed(store: PostgresStore) -> JobRecord:
    store.enqueue(NewJob(KIND))
    [job] = store.claim("holder", {KIND: 300}, 1)
    return job


@pytest.mark.parametrize(
    ("first", "second", "results", "status", "journal"),
    [
        ("settle", "reaper", [Outcome.COMPLETED, None], "completed", ["completed"]),
        ("reaper", "settle", [Outcome.RECOVERED, None], "pending", ["recovered"]),
        ("heartbeat", "reaper", [True, None], "claimed", []),
        ("reaper", "heartbeat", [Outcome.RECOVERED, False], "pending", ["recovered"]),
        ("cancel", "reaper", [True, None], "cancelled", ["cancelled"]),
        ("reaper", "cancel", [Outcome.RECOVERED, True], "cancelled", ["recovered", "cancelled"]),
    ],
)
def test_racing_transitions_in_both_orders(  # noqa: PLR0917 (fixtures and parameters)
    store: PostgresStore,
    database_dsn: str,
    prefix: str,
    first: str,
    second: str,
    results: list[Any],
    status: str,
    journal: list[str],
) -> None:
    job = _claimed(store)
    _expire(database_dsn, prefix, job)  # the reaper may take it: the lease ran out
    # The reaper's view, read before either transition: it acts on it after the other
    # one may have committed, as a reaper scanning while a worker settles does.
    [stale] = store.find_stale()
    calls: dict[str, Callable[[], Any]] = {
        "settle": lambda: store.settle(Claim.of(job), Settlement.complete()),
        "reaper": lambda: recover(store, stale),
        "heartbeat": lambda: store.extend_lease([(Claim.of(job), 300.0)]).kept(job.id),
        "cancel": lambda: store.cancel(job.id),
    }
    got = [calls[first](), calls[second]()]
    after = store.reads.get(job.id)
    assert after is not None
    outcomes = [entry.outcome.value for entry in store.reads.journal(job.id)]
    print(f"\n{first} then {second}: results {got}, job {after.status.value}, journal {outcomes}")
    assert got == results
    assert after.status.value == status
    assert outcomes == journal
    invariants.check(database_dsn, prefix, settled=False, stale_after=0)


def test_a_locked_row_is_skipped_never_waited_for(
    store: PostgresStore, database_dsn: str, prefix: str
) -> None:
    job = _claimed(store)
    _expire(database_dsn, prefix, job)
    [stale] = store.find_stale()
    claim = Claim.of(job)
    jobs = sql.Identifier(f"{prefix}_jobs")
    with (
        ThreadPoolExecutor(1) as pool,
        psycopg.connect(database_dsn, autocommit=True) as side,
        side.transaction(),
    ):
        side.execute(
            sql.SQL("SELECT 1 FROM {} WHERE id = %s FOR UPDATE").format(jobs), (job.id.to_uuid(),)
        )
        # Each call must return while the lock is held (a wait would time out here).
        recovered = pool.submit(recover, store, stale).result(timeout=20)
        renewed = pool.submit(store.extend_lease, [(claim, 300.0)]).result(timeout=20)
        completed = pool.submit(complete_many, store, [(claim, Settlement.complete())]).result(
            timeout=20
        )
    assert recovered is None
    assert renewed == BatchOutcome(busy=frozenset({job.id}))
    assert completed == BatchOutcome(busy=frozenset({job.id}))
    assert store.reads.journal(job.id) == []
    # Once the lock is gone, the reaper takes the expired claim back.
    assert recover(store, stale) is Outcome.RECOVERED
    assert [e.outcome.value for e in store.reads.journal(job.id)] == ["recovered"]
