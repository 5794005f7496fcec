"""A worker through PgBouncer in transaction mode: with ``listen_dsn`` straight to the
server it wakes by NOTIFY; without one it polls, says so once, and leaves no LISTEN on a
pooled server connection (PgBouncer would log each NOTIFY for it as "not linked")."""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
import pytest

import venturi
from tests.pooler.pgbouncer import PgBouncer
from tests.support import Probe, postgres_store, wait_until

JOBS = 300
NOTIFIES = 20


@pytest.fixture(autouse=True)
def _no_listen_dsn_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VENTURI_LISTEN_DSN", raising=False)


def _run_jobs(queue: venturi.Queue, probe: Probe) -> None:
    """Enqueue ``JOBS`` jobs through the pooler (one batch, and some one by one); each
    completes on its first claim, journaled once."""
    queue.enqueue_many([venturi.NewJob("pooled", {"n": n}) for n in range(JOBS - 20)])
    for n in range(JOBS - 20, JOBS):
        queue.enqueue("pooled", {"n": n})
    wait_until(
        lambda: probe.count("jobs", "status = 'completed'") == JOBS,
        timeout=60,
        what=f"{JOBS} jobs completed through the pooler",
    )
    assert probe.count("jobs", "run_count = 1") == JOBS
    assert probe.scalar("SELECT count(DISTINCT job_id) FROM {journal}") == JOBS
    assert probe.count("journal") == JOBS


def _notifies_on_pooled_connections(pgbouncer: PgBouncer, probe: Probe, channel: str) -> int:
    """Send NOTIFYs on ``channel`` straight to the server; how many PgBouncer logged as
    arriving on a server connection no client is linked to (a LISTEN left there)."""
    since = pgbouncer.log_size()
    for n in range(NOTIFIES):
        probe.rows("SELECT pg_notify(%s, %s)", channel, f"n{n}")
    # A client login logged after the NOTIFYs: PgBouncer read their messages by then.
    marker = pgbouncer.log_size()
    with psycopg.connect(pgbouncer.dsn) as conn:
        conn.execute("SELECT 1")
    wait_until(lambda: "login attempt" in pgbouncer.log_tail(marker), what="the login marker")
    return pgbouncer.not_linked(since)


def test_with_a_direct_listen_dsn_the_worker_wakes_by_notify(
    pooled_dsn: str, database_dsn: str, prefix: str, probe: Probe, pgbouncer: PgBouncer
) -> None:
    queue = venturi.Queue(pooled_dsn, prefix=prefix, pool_size=8, listen_dsn=database_dsn)
    queue.migrate()

    @queue.job("pooled")
    def pooled(n: int) -> int:
        return n

    # A poll interval far beyond the waits below: only a NOTIFY can wake it in time.
    worker = queue.worker(concurrency=8, poll_interval=120)
    try:
        worker.start()
        wait_until(lambda: worker.listening, timeout=20, what="the worker's LISTEN self-probe")
        first = queue.enqueue("pooled", {"n": -1})
        wait_until(
            lambda: probe.count("jobs", "id = %s AND status = 'completed'", first.to_uuid()),
            timeout=20,
            what="a NOTIFY to wake the idle worker",
        )
        probe.rows("DELETE FROM {jobs}")
        _run_jobs(queue, probe)
        assert worker.listening
    finally:
        worker.stop(timeout=10)
        queue.close()
    assert _notifies_on_pooled_connections(pgbouncer, probe, probe.prefix.channel) == 0


def test_without_listen_dsn_the_worker_polls_and_leaves_no_listen_behind(
    pooled_queue: venturi.Queue,
    probe: Probe,
    pgbouncer: PgBouncer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @pooled_queue.job("pooled")
    def pooled(n: int) -> int:
        return n

    worker = pooled_queue.worker(concurrency=8, poll_interval=0.2)
    with caplog.at_level(logging.WARNING, logger="venturi"):
        try:
            worker.start()
            _run_jobs(pooled_queue, probe)
            leaked = _notifies_on_pooled_connections(pgbouncer, probe, probe.prefix.channel)
            assert leaked == 0, f"{leaked} NOTIFYs reached a pooled server connection"
            notifier = worker.notifier
            assert notifier is not None and notifier.polling and not notifier.connected
        finally:
            worker.stop(timeout=10)
    assert not worker.listening
    said = [r.getMessage() for r in caplog.records if "falling back to polling" in r.getMessage()]
    assert len(said) == 1, said
    assert "transaction-pooling proxy" in said[0] and "listen_dsn" in said[0]


def test_a_listen_through_the_pooler_stays_on_a_pooled_server_connection(
    pooled_dsn: str, probe: Probe, pgbouncer: PgBouncer
) -> None:
    """What the two tests above rule out, staged: a LISTEN sent through the pooler stays
    on the server connection after its client leaves, and PgBouncer logs the NOTIFYs
    that reach it."""
    channel = f"{probe.prefix.channel}_staged"
    with psycopg.connect(pooled_dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
    try:
        assert _notifies_on_pooled_connections(pgbouncer, probe, channel) > 0
    finally:
        pgbouncer.reconnect()  # the server connection holding the LISTEN goes


def test_the_notifier_recognises_the_pooler(pooled_queue: venturi.Queue, database_dsn: str) -> None:
    through = pooled_queue.store.notifier()
    direct = venturi.Queue(database_dsn, prefix=pooled_queue.prefix, pool_size=1)
    straight = direct.store.notifier()
    try:
        through.connect()
        straight.connect()
        assert through.polling and not through.connected
        assert not straight.polling and straight.connected
    finally:
        through.close()
        straight.close()
        direct.close()


def test_a_limited_kind_passes_its_places_on_through_the_pooler(
    pooled_dsn: str, database_dsn: str, prefix: str, probe: Probe
) -> None:
    """Completing a run and claiming the next go through PgBouncer as one transaction
    ended by one Sync (no BEGIN or COMMIT of their own), and the limited claim's lock
    holds across its first reply: the limit holds and every job runs once."""
    jobs, limit = 60, 2
    queue = venturi.Queue(pooled_dsn, prefix=prefix, pool_size=8, listen_dsn=database_dsn)
    queue.migrate()
    store = postgres_store(queue)
    passed: list[int] = []
    lock = threading.Lock()
    running: list[int] = []
    highest = 0
    settle_and_pass = store.settle_and_pass

    def counted(*args: Any, **kwargs: Any) -> Any:
        written, claimed = settle_and_pass(*args, **kwargs)
        passed.append(len(claimed))
        return written, claimed

    store.settle_and_pass = counted  # type: ignore[method-assign]

    @queue.job("limited", concurrency=limit)
    def limited(n: int) -> None:
        nonlocal highest
        with lock:
            running.append(n)
            highest = max(highest, len(running))
        threading.Event().wait(0.002)
        with lock:
            running.remove(n)

    queue.enqueue_many([venturi.NewJob("limited", {"n": n}) for n in range(jobs)])
    try:
        with queue.worker(concurrency=8, poll_interval=120):
            wait_until(
                lambda: probe.count("jobs", "status = 'completed'") == jobs,
                timeout=60,
                what=f"{jobs} limited jobs completed through the pooler",
            )
    finally:
        queue.close()
    assert probe.count("jobs", "status = 'completed' AND run_count = 1") == jobs
    assert probe.count("journal") == jobs
    assert highest <= limit
    assert sum(passed) > 0, "no place was passed on"
