"""Races that prove the store's guarantees under real concurrency (threads, one database).

Each prints its figures (elapsed time, counts) for the record; timing is never asserted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import pytest
from ulid import ULID

from tests.support import Probe
from venturi.models import JobRecord, JobStatus, NewJob, Outcome
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore

T = TypeVar("T")


def _together(count: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(i)`` in ``count`` threads released at the same moment by a barrier."""
    barrier = threading.Barrier(count)

    def run(i: int) -> T:
        barrier.wait(timeout=60)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_eight_threads_claim_two_thousand_jobs_each_exactly_once(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    store = make_store(prefix, pool_size=8)
    store.migrate()
    kinds = ["a", "b", "c", "d"]
    store.enqueue_many([NewJob(kinds[i % 4], {"i": i}, priority=i % 5) for i in range(2000)])
    limit = 10

    def claimer(worker: int) -> list[JobRecord]:
        mine: list[JobRecord] = []
        while batch := store.claim(f"w{worker}", dict.fromkeys(kinds, 300.0), limit):
            assert len(batch) <= limit
            mine.extend(batch)
        return mine

    started = time.monotonic()
    per_thread = _together(8, claimer)
    elapsed = time.monotonic() - started
    claimed = [job.id for jobs in per_thread for job in jobs]
    counts = [len(jobs) for jobs in per_thread]
    print(
        f"8 threads claimed {len(claimed)} of 2000 jobs in {elapsed:.2f}s "
        f"({len(claimed) / elapsed:.0f} jobs/s); per thread {counts}"
    )
    assert len(claimed) == 2000
    assert len(set(claimed)) == 2000, "a job was claimed twice"
    assert sum(1 for c in counts if c > 0) > 1, "no concurrency happened"
    probe = Probe(database_dsn, prefix)
    try:
        summary = probe.rows("SELECT status, run_count, count(*) FROM {jobs} GROUP BY 1, 2")
        assert summary == [("claimed", 1, 2000)]
        owners = dict(probe.rows("SELECT claimed_by, count(*) FROM {jobs} GROUP BY 1"))
        assert owners == {f"w{i}": n for i, n in enumerate(counts) if n}
    finally:
        probe.close()


SETTLEMENTS: list[Callable[[], Settlement]] = [
    lambda: Settlement.complete(attachment={"ok": True}),
    lambda: Settlement.retry(0, carry={"r": 1}),
    lambda: Settlement.pause(delay=0, carry={"p": 1}),
    lambda: Settlement.dead("poison"),
    Settlement.release,
]
EXPECTED = {
    Outcome.COMPLETED: JobStatus.COMPLETED,
    Outcome.RETRIED: JobStatus.PENDING,
    Outcome.PAUSED: JobStatus.PENDING,
    Outcome.DEAD: JobStatus.DEAD,
    Outcome.RELEASED: JobStatus.PENDING,
}


def test_thirty_two_threads_settling_one_claim_exactly_one_applies(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    store = make_store(prefix, pool_size=32)
    store.migrate()
    probe = Probe(database_dsn, prefix)
    rounds, winners = 50, Counter[Outcome]()
    started = time.monotonic()
    try:
        for _ in range(rounds):
            job_id = store.enqueue(NewJob("k"))
            [job] = store.claim("w", {"k": 300}, 1)
            claim = Claim.of(job)
            settle: Callable[[int], bool] = partial(_settle_one, store, claim)
            applied = _together(32, settle)
            assert applied.count(True) == 1, f"{applied.count(True)} settlements applied"
            [entry] = store.reads.journal(job_id)
            winners[entry.outcome] += 1
            after = store.reads.get(job_id)
            assert after is not None and after.status is EXPECTED[entry.outcome]
            assert probe.count("journal", "job_id = %s", job_id.to_uuid()) == 1
            assert store.cancel(job_id) or after.status.terminal
    finally:
        probe.close()
    elapsed = time.monotonic() - started
    print(
        f"{rounds} rounds x 32 threads settling one claim: exactly one applied and one "
        f"journal row every round ({elapsed:.2f}s); winners {dict(winners)}"
    )
    assert sum(winners.values()) == rounds


def _settle_one(store: PostgresStore, claim: Claim, i: int) -> bool:
    return store.settle(claim, SETTLEMENTS[i % 5]()) is not None


def _sum(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {"n": old["n"] + new["n"], "from": sorted({*old["from"], *new["from"]})}


@pytest.mark.parametrize(
    "on_duplicate", ["keep", "replace", _sum], ids=["keep", "replace", "merge"]
)
def test_sixteen_threads_enqueueing_one_dedup_key_make_one_job(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str, on_duplicate: Any
) -> None:
    store = make_store(prefix, pool_size=16)
    store.migrate()

    def enqueue(i: int) -> ULID:
        job = NewJob("k", {"n": 1, "from": [i]}, dedup_key="user:1", on_duplicate=on_duplicate)
        return store.enqueue(job)

    started = time.monotonic()
    ids = _together(16, enqueue)
    elapsed = time.monotonic() - started
    assert len(set(ids)) == 1, "threads were told different ids"
    probe = Probe(database_dsn, prefix)
    try:
        assert probe.count("jobs") == 1
        assert probe.count("jobs", "status = 'pending'") == 1
        merged = probe.count("journal", "outcome = 'merged'")
        assert merged == 15
        assert probe.count("journal") == 15
        notes = {row[0] for row in probe.rows("SELECT note FROM {journal}")}
    finally:
        probe.close()
    job = store.reads.get(ids[0])
    assert job is not None
    if on_duplicate is _sum:
        assert job.payload == {"n": 16, "from": list(range(16))}, "a merge was lost"
    else:  # one thread's payload, whole: the first one's (keep) or the last one's (replace)
        assert job.payload in [{"n": 1, "from": [i]} for i in range(16)], job.payload
        verb = {"keep": "kept the pending job", "replace": "replaced the payload"}[on_duplicate]
        assert notes == {f"duplicate enqueue {verb}"}, notes
    name = getattr(on_duplicate, "__name__", on_duplicate)
    print(
        f"16 threads enqueueing one dedup key ({name}): 1 pending job, {merged} 'merged' "
        f"journal rows, in {elapsed:.3f}s; payload {job.payload}"
    )


def test_cancel_racing_settlements_one_transition_wins(
    make_store: Callable[..., PostgresStore], prefix: str
) -> None:
    store = make_store(prefix, pool_size=8)
    store.migrate()
    cancels = 0
    for _ in range(20):
        job_id = store.enqueue(NewJob("k"))
        [job] = store.claim("w", {"k": 300}, 1)
        claim = Claim.of(job)

        def act(i: int, claim: Claim = claim, job_id: ULID = job_id) -> bool:
            if i % 2:
                return store.cancel(job_id)
            return store.settle(claim, Settlement.complete()) is not None

        results = _together(8, act)
        assert results.count(True) == 1
        assert len(store.reads.journal(job_id)) == 1
        cancels += store.reads.journal(job_id)[0].outcome is Outcome.CANCELLED
    print(f"20 rounds of cancel vs complete: one winner each; cancel won {cancels} times")
