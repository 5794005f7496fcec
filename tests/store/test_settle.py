"""Settle: the five ways a run ends, each fenced by owner + run epoch + status, journaled
in the same statement only when it applied, and NOTIFY when the job is claimable again."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import Listener, Probe, complete_many, recover
from venturi.models import JobRecord, JobStatus, NewJob, Outcome
from venturi.prefix import Prefix
from venturi.settlements import BatchOutcome, Claim, Settlement
from venturi.store.postgres import PostgresStore

ALL_SETTLEMENTS: dict[str, Callable[[], Settlement]] = {
    "complete": lambda: Settlement.complete(attachment={"sent": True}),
    "retry": lambda: Settlement.retry(0, carry={"step": 2}),
    "pause": lambda: Settlement.pause(delay=0, carry={"step": 3}),
    "dead": lambda: Settlement.dead("poison"),
    "release": Settlement.release,
}


def _claimed(store: PostgresStore, max_attempts: int = 5, **job: Any) -> JobRecord:
    store.enqueue(NewJob("k", max_attempts=max_attempts, **job))
    [claimed] = store.claim("w", {"k": 30}, 1)
    return claimed


def test_complete(store: PostgresStore, listener: Listener) -> None:
    job = _claimed(store)
    listener.until_marker()
    assert store.settle(Claim.of(job), Settlement.complete({"ok": [1, 2]}, note="done")) is (
        Outcome.COMPLETED
    )
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.COMPLETED
    assert after.finished_at is not None and after.claim_expires_at is None
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.run_no, entry.note, entry.attachment) == (
        Outcome.COMPLETED,
        1,
        "done",
        {"ok": [1, 2]},
    )
    assert entry.kind == "k" and entry.job_id == job.id
    assert listener.until_marker() == []


def test_complete_many_applies_only_the_runs_still_held(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("k") for _ in range(4)])
    jobs = store.claim("w", {"k": 30}, 4)
    claims = [Claim.of(j) for j in jobs]
    stale = Claim(claims[3].job_id, "w", claims[3].run_count + 1)
    applied = complete_many(
        store,
        [
            (claims[0], Settlement.complete()),
            (claims[1], Settlement.complete(attachment=[1])),
            (claims[2], Settlement.complete(note="n")),
            (stale, Settlement.complete()),
        ],
    )
    assert applied == BatchOutcome(applied=frozenset(c.job_id for c in claims[:3]))
    last = store.reads.get(claims[3].job_id)
    assert last is not None and last.status is JobStatus.CLAIMED
    assert store.reads.journal(claims[3].job_id) == []
    assert complete_many(store, []) == BatchOutcome()


def test_retry_counts_a_failure_and_repends_after_the_delay(
    store: PostgresStore, listener: Listener
) -> None:
    job = _claimed(store)
    listener.until_marker()
    before = store.now()
    assert store.settle(Claim.of(job), Settlement.retry(120, carry={"page": 4}, note="boom"))
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.PENDING and after.failure_count == 1
    assert after.carry == {"page": 4}
    assert after.claim_expires_at is None and after.finished_at is None
    assert (
        before + timedelta(seconds=120) <= after.visible_at <= store.now() + timedelta(seconds=120)
    )
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.run_no, entry.note) == (Outcome.RETRIED, 1, "boom")
    assert listener.until_marker() == ["k"]


@pytest.mark.parametrize("action", list(ALL_SETTLEMENTS))
def test_settle_returns_the_outcome_its_journal_row_records(
    store: PostgresStore, action: str
) -> None:
    job = _claimed(store)
    outcome = store.settle(Claim.of(job), ALL_SETTLEMENTS[action]())
    [entry] = store.reads.journal(job.id)
    assert outcome is entry.outcome is ALL_SETTLEMENTS[action]().requested


def test_retry_keeps_the_carry_unless_given(store: PostgresStore) -> None:
    job = _claimed(store)
    assert store.settle(Claim.of(job), Settlement.retry(0, carry={"a": 1}))
    [job] = store.claim("w", {"k": 30}, 1)
    assert job.carry == {"a": 1} and job.run_count == 2
    assert store.settle(Claim.of(job), Settlement.retry(0))
    after = store.reads.get(job.id)
    assert after is not None and after.carry == {"a": 1} and after.failure_count == 2
    [job] = store.claim("w", {"k": 30}, 1)
    assert store.settle(Claim.of(job), Settlement.retry(0, carry=None))
    after = store.reads.get(job.id)
    assert after is not None and after.carry is None


def test_retry_at_max_attempts_is_dead(store: PostgresStore, listener: Listener) -> None:
    job = _claimed(store, max_attempts=2)
    assert store.settle(Claim.of(job), Settlement.retry(0)) is Outcome.RETRIED
    [job] = store.claim("w", {"k": 30}, 1)
    listener.until_marker()
    # The database decides retried-or-dead, and its answer is what settle returns.
    assert store.settle(Claim.of(job), Settlement.retry(0, note="again")) is Outcome.DEAD
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.DEAD and after.failure_count == 2
    assert after.finished_at is not None
    assert [(e.outcome, e.run_no) for e in store.reads.journal(job.id)] == [
        (Outcome.RETRIED, 1),
        (Outcome.DEAD, 2),
    ]
    assert listener.until_marker() == []


def test_pause_repends_without_counting_a_failure(store: PostgresStore, listener: Listener) -> None:
    job = _claimed(store, max_attempts=1)
    listener.until_marker()
    until = datetime(2033, 3, 3, tzinfo=UTC)
    assert store.settle(Claim.of(job), Settlement.pause(at=until, carry=[1, 2], note="wait"))
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.PENDING and after.failure_count == 0
    assert after.visible_at == until and after.carry == [1, 2]
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.note) == (Outcome.PAUSED, "wait")
    assert listener.until_marker() == ["k"]


def test_pause_with_a_delay_uses_database_time(store: PostgresStore) -> None:
    job = _claimed(store)
    before = store.now()
    assert store.settle(Claim.of(job), Settlement.pause(delay=timedelta(minutes=2)))
    after = store.reads.get(job.id)
    assert after is not None
    assert before + timedelta(minutes=2) <= after.visible_at <= store.now() + timedelta(minutes=2)


def test_dead_finishes_at_once(store: PostgresStore, listener: Listener) -> None:
    job = _claimed(store, max_attempts=10)
    listener.until_marker()
    assert store.settle(Claim.of(job), Settlement.dead("bad input"))
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.DEAD and after.finished_at is not None
    assert after.failure_count == 0
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.note) == (Outcome.DEAD, "bad input")
    assert listener.until_marker() == []


def test_release_hands_the_job_back_untouched(store: PostgresStore, listener: Listener) -> None:
    old = store.now() - timedelta(seconds=30)
    job = _claimed(store, at=old)
    listener.until_marker()
    assert store.settle(Claim.of(job), Settlement.release(note="stopping"))
    after = store.reads.get(job.id)
    assert after is not None
    assert after.status is JobStatus.PENDING and after.failure_count == 0
    assert after.claimed_by is None and after.claim_expires_at is None
    assert after.visible_at == old
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.note) == (Outcome.RELEASED, "stopping")
    assert listener.until_marker() == ["k"]


# --- fencing ------------------------------------------------------------------------------


def _fence(kind: str, store: PostgresStore, job: JobRecord) -> Claim:
    claim = Claim.of(job)
    if kind == "other owner":
        return Claim(claim.job_id, "someone-else", claim.run_count)
    if kind == "old epoch":
        return Claim(claim.job_id, claim.claimed_by, claim.run_count - 1)
    if kind == "newer epoch":
        return Claim(claim.job_id, claim.claimed_by, claim.run_count + 1)
    if kind == "already settled":
        assert store.settle(claim, Settlement.dead("first"))
        return claim
    if kind == "cancelled":
        assert store.cancel(job.id)
        return claim
    raise AssertionError(kind)


@pytest.mark.parametrize("action", list(ALL_SETTLEMENTS))
@pytest.mark.parametrize(
    "fence", ["other owner", "old epoch", "newer epoch", "already settled", "cancelled"]
)
def test_a_fenced_out_settlement_returns_none_and_writes_nothing(
    store: PostgresStore, probe: Probe, listener: Listener, action: str, fence: str
) -> None:
    job = _claimed(store)
    claim = _fence(fence, store, job)
    listener.until_marker()
    row_before = probe.rows("SELECT * FROM {jobs}")
    journal_before = probe.rows("SELECT * FROM {journal}")
    assert store.settle(claim, ALL_SETTLEMENTS[action]()) is None
    assert probe.rows("SELECT * FROM {jobs}") == row_before
    assert probe.rows("SELECT * FROM {journal}") == journal_before
    assert listener.until_marker() == []


def test_a_settlement_from_a_recovered_run_is_fenced_out(store: PostgresStore) -> None:
    store.enqueue(NewJob("k"))
    [first] = store.claim("w", {"k": 0.01}, 1)
    [stale] = _wait_stale(store)
    assert recover(store, stale)
    [second] = store.claim("w", {"k": 30}, 1)
    assert second.id == first.id and second.run_count == 2 and second.claimed_by == "w"
    assert store.settle(Claim.of(first), Settlement.complete()) is None
    assert store.settle(Claim.of(second), Settlement.complete()) is Outcome.COMPLETED
    assert [e.outcome for e in store.reads.journal(first.id)] == [
        Outcome.RECOVERED,
        Outcome.COMPLETED,
    ]


def _wait_stale(store: PostgresStore) -> list[JobRecord]:
    from tests.support import wait_until

    return wait_until(store.find_stale, timeout=10, what="the lease to expire")


def _prepared_completions(store: PostgresStore) -> int:
    with store.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ("-- Settles a batch%",),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("batch", [2, 17, 100])
def test_completion_batches_of_any_size_become_one_prepared_statement(
    database_dsn: str, prefix: str, batch: int
) -> None:
    """On a connection straight to the server ("auto"), a completion is prepared once it
    has run five times, whatever its batch's size: its plan finds each run by primary key
    (tests/store/test_batch_plans.py), so the generic plan serves any size."""
    store = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=1)
    try:
        store.migrate()
        store.enqueue_many([NewJob("k") for _ in range(6 * batch)])
        for _ in range(6):
            jobs = store.claim("w", {"k": 60.0}, batch)
            assert len(jobs) == batch
            outcome = complete_many(store, [(Claim.of(j), Settlement.complete()) for j in jobs])
            assert outcome.applied == {j.id for j in jobs}
        assert _prepared_completions(store) == 1
    finally:
        store.drop_prefix()
        store.close()
