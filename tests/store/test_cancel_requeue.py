"""Cancel (pending or claimed jobs) and requeue (finished jobs), each journaled."""

from __future__ import annotations

import pytest

from tests.support import Listener, Probe
from venturi.errors import ConfigurationError
from venturi.models import JobRecord, JobStatus, NewJob, Outcome
from venturi.settlements import BatchOutcome, Claim, Settlement
from venturi.store.postgres import PostgresStore


def _finished(store: PostgresStore, how: str) -> JobRecord:
    job_id = store.enqueue(NewJob("k", max_attempts=1))
    if how == "cancelled":
        assert store.cancel(job_id)
    else:
        [job] = store.claim("w", {"k": 30}, 1)
        settlement = Settlement.complete() if how == "completed" else Settlement.retry(0)
        assert store.settle(Claim.of(job), settlement)
    finished = store.reads.get(job_id)
    assert finished is not None and finished.status.value == how
    return finished


def test_cancel_a_pending_job(store: PostgresStore, probe: Probe) -> None:
    job_id = store.enqueue(NewJob("k"))
    assert store.cancel(job_id, note="not needed") is True
    job = store.reads.get(job_id)
    assert job is not None
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    [entry] = store.reads.journal(job_id)
    assert (entry.outcome, entry.note, entry.run_no) == (Outcome.CANCELLED, "not needed", 0)
    assert store.claim("w", {"k": 30}, 5) == []


def test_cancel_a_claimed_job_fences_out_its_run(store: PostgresStore) -> None:
    store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 30}, 1)
    assert store.cancel(str(job.id)) is True
    after = store.reads.get(job.id)
    assert after is not None and after.status is JobStatus.CANCELLED
    assert after.claim_expires_at is None
    assert store.extend_lease([(Claim.of(job), 60)]) == BatchOutcome()
    assert store.settle(Claim.of(job), Settlement.complete()) is None
    assert store.find_stale() == []
    assert [e.outcome for e in store.reads.journal(job.id)] == [Outcome.CANCELLED]


@pytest.mark.parametrize("how", ["completed", "dead", "cancelled"])
def test_cancel_a_finished_job_changes_nothing(
    store: PostgresStore, probe: Probe, how: str
) -> None:
    job = _finished(store, how)
    rows = probe.rows("SELECT * FROM {jobs}"), probe.rows("SELECT * FROM {journal}")
    assert store.cancel(job.id) is False
    assert (probe.rows("SELECT * FROM {jobs}"), probe.rows("SELECT * FROM {journal}")) == rows


@pytest.mark.parametrize("how", ["completed", "dead", "cancelled"])
def test_requeue_a_finished_job(store: PostgresStore, listener: Listener, how: str) -> None:
    job = _finished(store, how)
    listener.until_marker()
    before = store.now()
    assert store.requeue(job.id, note="try again") is True
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.PENDING
    assert after.failure_count == 0 and after.finished_at is None
    assert after.claimed_by is None and after.claim_expires_at is None
    assert before <= after.visible_at <= store.now()
    last = store.reads.journal(job.id)[-1]
    assert (last.outcome, last.note) == (Outcome.REQUEUED, "try again")
    assert listener.until_marker() == ["k"]
    [again] = store.claim("w", {"k": 30}, 1)
    assert again.id == job.id and again.run_count == job.run_count + 1


def test_requeue_of_a_pending_or_claimed_job_changes_nothing(
    store: PostgresStore, probe: Probe
) -> None:
    store.enqueue_many([NewJob("k"), NewJob("k")])
    [claimed] = store.claim("w", {"k": 30}, 1)
    rows = probe.rows("SELECT * FROM {jobs} ORDER BY id")
    for job_id in probe.rows("SELECT id FROM {jobs}"):
        assert store.requeue(job_id[0]) is False
    assert store.requeue(claimed.id) is False
    assert probe.rows("SELECT * FROM {jobs} ORDER BY id") == rows
    assert probe.count("journal") == 0


def test_requeue_dead_takes_every_dead_job_in_batches(store: PostgresStore) -> None:
    dead = [_finished(store, "dead") for _ in range(5)]
    _finished(store, "completed")
    assert store.requeue_dead(batch=2) == 5
    for job in dead:
        after = store.reads.get(job.id)
        assert after is not None and after.status is JobStatus.PENDING
        assert store.reads.journal(job.id)[-1].outcome is Outcome.REQUEUED
    assert store.requeue_dead() == 0


@pytest.mark.parametrize("batch", [0, -1])
def test_requeue_dead_refuses_a_batch_that_could_never_finish(
    store: PostgresStore, batch: int
) -> None:
    with pytest.raises(ConfigurationError, match="batch"):
        store.requeue_dead(batch=batch)


def test_last_notes_reads_each_jobs_latest_note_in_one_statement(store: PostgresStore) -> None:
    noted = store.enqueue(NewJob("k", {}))
    quiet = store.enqueue(NewJob("k", {}))
    assert store.cancel(noted, note="first")
    assert store.requeue(noted, note="second")
    assert store.cancel(quiet)
    assert store.reads.last_notes([noted, quiet]) == {noted: "second"}
    assert store.reads.last_notes([]) == {}
