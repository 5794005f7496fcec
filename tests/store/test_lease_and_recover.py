"""Leases: extend_lease (fenced), find_stale, and recover (fenced by epoch and expiry;
counts a failure; dead at max_attempts)."""

from __future__ import annotations

from datetime import timedelta

from tests.support import Listener, Probe, recover, wait_until
from venturi.models import JobRecord, JobStatus, NewJob, Outcome
from venturi.settlements import BatchOutcome, Claim, Settlement
from venturi.store.postgres import PostgresStore


def _expired(store: PostgresStore, max_attempts: int = 5) -> JobRecord:
    """A job whose claim has run out: claimed with a tiny lease, seen by find_stale."""
    job_id = store.enqueue(NewJob("k", max_attempts=max_attempts))
    [job] = store.claim("w", {"k": 0.001}, 1)
    assert job.id == job_id
    stale = wait_until(store.find_stale, timeout=10, what="the lease to expire")
    assert [s.id for s in stale] == [job_id]
    return stale[0]


def test_extend_lease_moves_the_expiry_in_database_time(store: PostgresStore) -> None:
    ids = store.enqueue_many([NewJob("k"), NewJob("k")])
    jobs = store.claim("w", {"k": 5}, 2)
    assert sorted(j.id for j in jobs) == sorted(ids)
    before = store.now()
    held = store.extend_lease([(Claim.of(j), 600) for j in jobs])
    assert held == BatchOutcome(applied=frozenset(j.id for j in jobs))
    for job in jobs:
        after = store.reads.get(job.id)
        assert after is not None and after.claim_expires_at is not None
        assert before + timedelta(seconds=600) <= after.claim_expires_at
        assert after.claim_expires_at <= store.now() + timedelta(seconds=600)
    assert store.extend_lease([]) == BatchOutcome()


def test_extend_lease_is_fenced(store: PostgresStore, probe: Probe) -> None:
    store.enqueue_many([NewJob("k") for _ in range(4)])
    a, b, c, d = store.claim("w", {"k": 30}, 4)
    assert store.settle(Claim.of(c), Settlement.complete())
    assert store.cancel(d.id)
    before = probe.rows("SELECT id, claim_expires_at FROM {jobs} ORDER BY id")
    held = store.extend_lease(
        [
            (Claim(a.id, "intruder", a.run_count), 600),
            (Claim(b.id, "w", b.run_count + 1), 600),
            (Claim.of(c), 600),
            (Claim.of(d), 600),
        ]
    )
    assert held == BatchOutcome()
    assert probe.rows("SELECT id, claim_expires_at FROM {jobs} ORDER BY id") == before


def test_find_stale_lists_only_expired_claims_oldest_first(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("short"), NewJob("long"), NewJob("idle")])
    store.claim("w", {"long": 600}, 1)
    [short] = store.claim("w", {"short": 0.001}, 1)
    stale = wait_until(store.find_stale, timeout=10, what="the short lease to expire")
    assert [s.id for s in stale] == [short.id]
    assert store.find_stale(limit=0) == []


def test_recover_counts_a_failure_repends_and_notifies(
    store: PostgresStore, listener: Listener
) -> None:
    stale = _expired(store)
    listener.until_marker()
    before = store.now()
    assert recover(store, stale, delay=30) is Outcome.RECOVERED
    job = store.reads.get(stale.id)
    assert job is not None
    assert job.status is JobStatus.PENDING and job.failure_count == 1
    assert job.claim_expires_at is None and job.finished_at is None
    assert job.visible_at >= before + timedelta(seconds=30)
    [entry] = store.reads.journal(stale.id)
    assert entry.outcome is Outcome.RECOVERED and entry.run_no == 1
    assert "lease held by w expired" in (entry.note or "")
    assert listener.until_marker() == ["k"]
    assert store.find_stale() == []


def test_recover_goes_dead_at_max_attempts(store: PostgresStore, listener: Listener) -> None:
    stale = _expired(store, max_attempts=2)
    assert recover(store, stale)
    [job] = store.claim("w", {"k": 0.001}, 1)
    assert job.run_count == 2
    [stale] = wait_until(store.find_stale, timeout=10, what="the second lease to expire")
    listener.until_marker()
    assert recover(store, stale) is Outcome.DEAD
    dead = store.reads.get(stale.id)
    assert dead is not None
    assert dead.status is JobStatus.DEAD and dead.failure_count == 2
    assert dead.finished_at is not None
    outcomes = [(e.outcome, e.run_no) for e in store.reads.journal(stale.id)]
    assert outcomes == [(Outcome.RECOVERED, 1), (Outcome.DEAD, 2)]
    assert "max_attempts" in (store.reads.journal(stale.id)[-1].note or "")
    assert listener.until_marker() == []
    assert store.claim("w", {"k": 30}, 1) == []


def test_recover_is_fenced_by_the_epoch(store: PostgresStore, probe: Probe) -> None:
    stale = _expired(store)
    assert recover(store, stale)
    store.claim("w2", {"k": 600}, 1)
    rows = probe.rows("SELECT * FROM {jobs}")
    assert recover(store, stale) is None  # the old run's record: epoch 1, now 2
    assert probe.rows("SELECT * FROM {jobs}") == rows
    assert [e.outcome for e in store.reads.journal(stale.id)] == [Outcome.RECOVERED]


def test_recover_is_fenced_by_the_expiry(store: PostgresStore, probe: Probe) -> None:
    stale = _expired(store)
    # A heartbeat got there first: the lease is live again, so the reaper's view is stale.
    assert store.extend_lease([(Claim.of(stale), 600)]).applied == {stale.id}
    rows = probe.rows("SELECT * FROM {jobs}")
    assert recover(store, stale) is None
    assert probe.rows("SELECT * FROM {jobs}") == rows
    assert store.reads.journal(stale.id) == []


def test_recover_is_fenced_by_the_status(store: PostgresStore) -> None:
    stale = _expired(store)
    assert store.settle(Claim.of(stale), Settlement.complete())
    assert recover(store, stale) is None
    job = store.reads.get(stale.id)
    assert job is not None and job.status is JobStatus.COMPLETED and job.failure_count == 0
    assert [e.outcome for e in store.reads.journal(stale.id)] == [Outcome.COMPLETED]


def test_a_recovered_run_loses_its_lease(store: PostgresStore) -> None:
    stale = _expired(store)
    assert recover(store, stale)
    assert store.extend_lease([(Claim.of(stale), 600)]) == BatchOutcome()
