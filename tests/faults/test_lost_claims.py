"""A claim that committed although its worker got an error (issue 38): the server ended
the session while the commit waited for a synchronous standby, so the claim committed
locally and the worker heard only 57P01. The job is claimed in the worker's name; the
worker must find and run it, not leave it invisible for its whole lease."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Final

import psycopg
import pytest

from tests.faults import invariants
from tests.faults.scenario import Watch, prepare
from tests.faults.server import ThrowawayServer
from tests.support import ledger, wait_until

# Far longer than the test waits: a job left to its lease would fail it.
LEASE: Final = 120.0
# How a claim pass's statement (sql/claim.sql) begins in pg_stat_activity, which shows
# only its first kilobyte: its header comment.
CLAIM_TEXT: Final = "-- Claims up to %"
DUE_IN: Final = 2.0


@pytest.fixture
def waiting_for_a_standby(own_server: ThrowawayServer) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit session of the private server; `hold_commits` on it makes every
    commit wait for a synchronous standby that never comes, and the fixture lets them go
    on the way out."""
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        try:
            yield conn
        finally:
            release_commits(conn)


def hold_commits(conn: psycopg.Connection[Any]) -> None:
    conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    conn.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
    conn.execute("SELECT pg_reload_conf()")


def release_commits(conn: psycopg.Connection[Any]) -> None:
    conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
    conn.execute("ALTER SYSTEM RESET synchronous_commit")
    conn.execute("SELECT pg_reload_conf()")


def end_a_waiting_claim(conn: psycopg.Connection[Any]) -> int:
    """Wait until a claim's commit waits for the standby, then end its session (its claim
    is committed here, and its client gets 57P01); returns the process ended."""

    def waiting_claim() -> int | None:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE %s",
            (CLAIM_TEXT,),
        ).fetchone()
        return None if row is None else int(row[0])

    pid = wait_until(waiting_claim, 30, 0.01, "a claim waiting for the synchronous standby")
    conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    return pid


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_claim_whose_answer_was_lost_is_run_by_its_worker(
    own_server: ThrowawayServer,
    own_prefix: str,
    waiting_for_a_standby: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = own_server.dsn
    queue = prepare(dsn, own_prefix)
    book = ledger.Ledger(dsn, own_prefix, "inproc")
    ledger.register(queue, book, lease=LEASE, max_attempts=5)
    caplog.set_level(logging.INFO, logger="venturi")
    watch = Watch(dsn, own_prefix)
    with queue.worker(concurrency=2, poll_interval=1.0, name="lost-claims") as worker:
        wait_until(lambda: worker.listening, 30, what="the worker's self-probe")
        # Due shortly, so that its claim comes after every commit waits for the standby.
        job_id = queue.enqueue(ledger.WORK_KIND, {}, delay=DUE_IN)
        hold_commits(waiting_for_a_standby)
        end_a_waiting_claim(waiting_for_a_standby)
        release_commits(waiting_for_a_standby)
        wait_until(
            lambda: watch.count("completed") == 1, 30, 0.05, "the job claimed unknowingly to run"
        )
    queue.close()
    book.close()
    figures = invariants.check(dsn, own_prefix)
    watch.close()
    adopted = [r for r in caplog.records if "whose answer was lost" in r.getMessage()]
    print(
        f"\nlost claim answer: {figures.line()}\n  {adopted[0].getMessage() if adopted else None}"
    )
    assert figures.statuses == {"completed": 1}
    assert figures.runs == 1, "the job was run under a second claim, not the lost one"
    assert adopted, "the job completed, but not as the lost claim's"
    assert str(job_id) in adopted[0].getMessage()
