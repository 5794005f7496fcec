"""`complete_in`: a completion written inside a caller's transaction, fenced by owner, run
epoch, status and the lease, committing or rolling back with that transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.support import Probe, complete_in, complete_many, wait_until
from venturi.models import JobRecord, JobStatus, NewJob, Outcome
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


def _claimed(store: PostgresStore, lease: float = 30) -> JobRecord:
    store.enqueue(NewJob("k"))
    [claimed] = store.claim("w", {"k": lease}, 1)
    return claimed


def _status(store: PostgresStore, job: JobRecord) -> JobStatus:
    after = store.reads.get(job.id)
    assert after is not None
    return after.status


@pytest.fixture
def effects(probe: Probe) -> Iterator[sql.Identifier]:
    """A table of the handler's effects, beside the prefix's tables."""
    name = sql.Identifier(f"{probe.prefix.name}_effects")
    probe.conn.execute(sql.SQL("CREATE TABLE {} (job_id uuid)").format(name))
    yield name
    probe.conn.execute(sql.SQL("DROP TABLE {}").format(name))


def test_a_completion_commits_with_the_transactions_writes(
    store: PostgresStore, probe: Probe, effects: sql.Identifier
) -> None:
    job = _claimed(store)
    with store.transaction() as conn:
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(effects), [job.id.to_uuid()])
        assert complete_in(store, conn, Claim.of(job), Settlement.complete({"n": 1}, note="x"))
        # Nothing is visible outside before the commit.
        assert _status(store, job) is JobStatus.CLAIMED
    assert _status(store, job) is JobStatus.COMPLETED
    [entry] = store.reads.journal(job.id)
    assert (entry.outcome, entry.attachment, entry.note) == (Outcome.COMPLETED, {"n": 1}, "x")
    assert probe.scalar("SELECT count(*) FROM " + effects.as_string(probe.conn)) == 1


def test_a_rolled_back_completion_leaves_the_run_claimed(
    store: PostgresStore, database_dsn: str
) -> None:
    job = _claimed(store)
    with psycopg.connect(database_dsn) as conn:
        assert complete_in(store, conn, Claim.of(job), Settlement.complete())
        conn.rollback()
    assert _status(store, job) is JobStatus.CLAIMED
    assert store.reads.journal(job.id) == []


def test_a_run_that_lost_its_claim_is_fenced(store: PostgresStore, database_dsn: str) -> None:
    job = _claimed(store)
    stale = Claim(job.id, "w", job.run_count + 1)
    other_owner = Claim(job.id, "someone-else", job.run_count)
    with psycopg.connect(database_dsn) as conn:
        assert not complete_in(store, conn, stale, Settlement.complete())
        assert not complete_in(store, conn, other_owner, Settlement.complete())
    assert store.cancel(job.id)
    with psycopg.connect(database_dsn) as conn:
        assert not complete_in(store, conn, Claim.of(job), Settlement.complete())
    assert _status(store, job) is JobStatus.CANCELLED


def test_a_lapsed_lease_is_fenced_even_before_the_reaper_comes(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    job = _claimed(store)
    probe.rows(
        "UPDATE {jobs} SET claim_expires_at = now() - interval '1 second' WHERE id = %s",
        job.id.to_uuid(),
    )
    with psycopg.connect(database_dsn) as conn:
        assert not complete_in(store, conn, Claim.of(job), Settlement.complete())
    # The batched completion keeps its old fence: a run still holding its claim applies.
    assert complete_many(store, [(Claim.of(job), Settlement.complete())]).applied == {job.id}


def test_the_lease_is_judged_when_the_completion_is_written_not_when_the_transaction_began(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    job = _claimed(store, lease=1)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("SELECT 1")  # the transaction (and its now()) begins here
        wait_until(
            lambda: probe.scalar(
                "SELECT claim_expires_at < clock_timestamp() FROM {jobs} WHERE id = %s",
                job.id.to_uuid(),
            ),
            timeout=10,
            what="the one-second lease to lapse",
        )
        assert not complete_in(store, conn, Claim.of(job), Settlement.complete())


def test_a_row_locked_by_another_session_is_waited_for(
    store: PostgresStore, database_dsn: str
) -> None:
    job = _claimed(store)
    started = threading.Event()
    done: list[bool] = []

    def complete() -> None:
        with store.transaction() as conn:
            started.set()
            done.append(complete_in(store, conn, Claim.of(job), Settlement.complete()))

    with psycopg.connect(database_dsn) as locker:
        locker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE id = %s FOR UPDATE").format(
                sql.Identifier(f"{store.prefix.name}_jobs")
            ),
            [job.id.to_uuid()],
        )
        thread = threading.Thread(target=complete)
        thread.start()
        assert started.wait(10)
        thread.join(0.5)  # held back by the lock, not fenced out
        assert thread.is_alive() and done == []
        locker.rollback()
    thread.join(10)
    assert done == [True]
    assert _status(store, job) is JobStatus.COMPLETED
