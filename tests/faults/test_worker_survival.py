"""A worker meets database errors that are not outages (issue 10, one test per bullet).

Each scene is the issue's own reproduction: a statement or lock timeout set for the
worker's connections in its DSN while a side session holds the jobs table, or a failing
statement from the injection harness. The worker must keep every thread, settle or let
go of every run, and go on claiming.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import psycopg
import pytest
from psycopg import sql
from ulid import ULID

import venturi
from tests.faults import invariants
from tests.faults.injection import ErrorClass, Faults, InjectingStore, TableLock, with_setting
from tests.faults.scenario import Watch, prepare
from tests.faults.workload import (
    enqueue_mix,
    missing_threads,
    register_mix,
    settled,
    threads_before,
)
from tests.support import ledger, wait_until

RERUNS: Final = invariants.INTERRUPTED | {"retried", "paused"}


@pytest.fixture
def watch(database_dsn: str, shared_prefix: str) -> Iterator[Watch]:
    prepare(database_dsn, shared_prefix).close()
    watch = Watch(database_dsn, shared_prefix)
    yield watch
    watch.close()


def _status_and_outcomes(watch: Watch, job_id: ULID) -> tuple[str, list[str]]:
    status = watch.rows(
        sql.SQL("SELECT status FROM {} WHERE id = %s").format(watch.jobs), (job_id.to_uuid(),)
    )[0][0]
    outcomes = watch.rows(
        sql.SQL("SELECT outcome FROM {} WHERE job_id = %s ORDER BY id").format(watch.journal),
        (job_id.to_uuid(),),
    )
    return str(status), [row[0] for row in outcomes]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_completion_that_cannot_be_written_is_never_left_held(
    database_dsn: str, shared_prefix: str, watch: Watch
) -> None:
    """The issue's reproduction: the handler locks the table for 1 s and returns, so the
    completion flush meets a 50 ms statement timeout. The run must end completed, or be
    let go and recovered, and never stay claimed under a renewed lease."""
    lease = 3.0
    queue = venturi.Queue(
        with_setting(database_dsn, "statement_timeout", "50"), prefix=shared_prefix
    )

    @queue.job("fault.locker", lease=lease, context=True, backoff=venturi.constant(0.1))
    def locker(ctx: venturi.JobContext) -> None:
        if ctx.attempt == 1:
            TableLock(database_dsn, shared_prefix, 1.0)

    job_id = queue.enqueue("fault.locker")
    worker = queue.worker(concurrency=1, reaper_interval=0.5)
    worker.start()
    try:
        wait_until(
            lambda: _status_and_outcomes(watch, job_id)[1][-1:] in (["completed"], ["recovered"]),
            8.0,
            0.05,
            "the run to complete or to be recovered",
        )
        # Settled or let go: either way the worker holds it no more (nor renews its lease).
        wait_until(lambda: not len(worker.held), 5, 0.05, "the worker to stop holding the run")
    finally:
        worker.stop(5)
        queue.close()
    live = sql.SQL(
        "SELECT count(*) FROM {} WHERE status = 'claimed' AND claim_expires_at > now()"
    ).format(watch.jobs)
    assert watch.rows(live)[0][0] == 0, _status_and_outcomes(watch, job_id)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_handler_threads_survive_settlement_errors(
    database_dsn: str, shared_prefix: str, watch: Watch
) -> None:
    """lock_timeout=50ms and four 2 s table locks while retries, pauses and failures
    settle: every handler thread lives and every job settles."""
    concurrency = 8
    queue = venturi.Queue(with_setting(database_dsn, "lock_timeout", "50"), prefix=shared_prefix)
    book = ledger.Ledger(database_dsn, shared_prefix, "inproc")
    register_mix(queue, book, lease=10.0)
    outcomes = ["retry", "pause", "fail"] * 16
    ids = enqueue_mix(queue, [(outcome, 150) for outcome in outcomes])
    worker = queue.worker(concurrency=concurrency, reaper_interval=0.5, poll_interval=0.5)
    before = threads_before()
    worker.start()
    try:
        for _ in range(4):
            TableLock(database_dsn, shared_prefix, 2.0).join()
            assert not missing_threads(before, concurrency), "handler threads died"
        wait_until(lambda: settled(watch, ids), 30, 0.05, "every job to settle")
        assert not missing_threads(before, concurrency), "handler threads died"
        assert worker.healthy, f"worker unhealthy: {worker.failure!r}"
    finally:
        worker.stop(5)
        book.close()
        queue.close()
    invariants.check(database_dsn, shared_prefix, ids, reruns=RERUNS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("error", [ErrorClass.STATEMENT_TIMEOUT, ErrorClass.LOCK_TIMEOUT])
def test_the_dispatcher_survives_a_failing_idle_query(
    database_dsn: str, shared_prefix: str, watch: Watch, error: ErrorClass
) -> None:
    """``next_visible_at`` (the idle wait's query) fails: the dispatcher must live on and
    claim what is enqueued next."""
    faults = Faults()
    store = InjectingStore.open(database_dsn, shared_prefix, faults, pool_size=4)
    queue = venturi.Queue(store=store)
    book = ledger.Ledger(database_dsn, shared_prefix, "inproc")
    register_mix(queue, book, lease=10.0)
    faults.arm("next_visible_at", error, times=2)
    worker = queue.worker(concurrency=2, poll_interval=0.5)
    before = threads_before()
    worker.start()
    try:
        wait_until(lambda: faults.count == 2, 10, what="the idle query to fail twice")
        ids = enqueue_mix(queue, [("complete", 0)] * 3)
        wait_until(lambda: settled(watch, ids), 10, 0.05, "the dispatcher to claim new work")
        assert not missing_threads(before, 2), "worker threads died"
        assert worker.healthy, f"worker unhealthy: {worker.failure!r}"
    finally:
        worker.stop(5)
        book.close()
        queue.close()


@pytest.mark.timeout(60)
def test_a_timeout_stops_the_run_on_time_whatever_the_lease(
    database_dsn: str, shared_prefix: str, watch: Watch
) -> None:
    """``timeout=1`` at the default 60 s lease sets ``stopping`` 1-3 s after the start
    (generous slack for a loaded machine: the heartbeat, a third of the lease apart,
    used to set it up to 20 s late)."""
    queue = venturi.Queue(database_dsn, prefix=shared_prefix)
    waited: list[float] = []

    @queue.job("fault.deadline", timeout=1, context=True)
    def deadline(ctx: venturi.JobContext) -> None:
        began = time.monotonic()
        ctx.stopping.wait(10.0)
        waited.append(time.monotonic() - began)

    queue.enqueue("fault.deadline")
    with queue.worker(concurrency=1):
        wait_until(lambda: waited, 10, what="the run to end")
    queue.close()
    # The deadline counts from the worker's start of the run, a moment before the
    # handler's own clock reading: the lower bound allows for that moment.
    assert 0.9 <= waited[0] <= 3.0, f"stopping was set {waited[0]:.2f}s after the start"


def _drop_when(condition: Callable[[], bool], dsn: str, prefix: str) -> threading.Thread:
    """Drop the prefix's tables once ``condition`` holds (a permanent database error)."""

    def drop() -> None:
        wait_until(condition, 30, what="the worker to run a job")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(f"{prefix}_jobs")))

    thread = threading.Thread(target=drop, name="test-drop-schema", daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(90)
def test_a_permanent_error_stops_the_worker_loudly(
    database_dsn: str, shared_prefix: str, watch: Watch
) -> None:
    """The jobs table is dropped under a running worker: it stops itself, says why in
    ``failure``, and ``run()`` raises `WorkerFailed` from that failure."""
    queue = venturi.Queue(database_dsn, prefix=shared_prefix)
    book = ledger.Ledger(database_dsn, shared_prefix, "inproc")
    register_mix(queue, book, lease=10.0)
    first = enqueue_mix(queue, [("complete", 0)])
    worker = queue.worker(concurrency=2, poll_interval=0.5)
    dropper = _drop_when(lambda: settled(watch, first), database_dsn, shared_prefix)
    # If the worker never stops itself, stop it from here so the test ends (and fails).
    guard = threading.Timer(30.0, worker.stop)
    guard.start()
    raised: BaseException | None = None
    try:
        worker.run(timeout=5)
    except Exception as exc:  # what run() raised, checked below
        raised = exc
    finally:
        guard.cancel()
        dropper.join(30)
        book.close()
        queue.close()
    assert isinstance(raised, venturi.WorkerFailed), f"run() ended with {raised!r}"
    failure = worker.failure
    assert isinstance(failure, venturi.StoreError), repr(failure)
    assert not isinstance(failure, venturi.StoreUnavailable), repr(failure)
    assert raised.__cause__ is failure
    assert not worker.healthy


APP: Final = """\
import os

import venturi

queue = venturi.Queue(os.environ["VENTURI_DSN"], prefix=os.environ["APP_PREFIX"])


@queue.job("fault.noop")
def noop() -> None:
    pass
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_cli_worker_exits_1_on_a_permanent_error(
    database_dsn: str, shared_prefix: str, watch: Watch, tmp_path: Path
) -> None:
    """``venturi worker`` whose jobs table is dropped stops itself and exits 1."""
    (tmp_path / "permapp.py").write_text(APP)
    log = tmp_path / "worker.log"
    env = {**os.environ, "VENTURI_DSN": database_dsn, "APP_PREFIX": shared_prefix}
    code = "from venturi.cli import main; main()"
    args = [sys.executable, "-c", code, "worker", "--app", "permapp", "--poll-interval", "1s"]
    with venturi.Queue(database_dsn, prefix=shared_prefix) as queue:
        first = queue.enqueue("fault.noop")
    with log.open("wb") as out:
        process = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=out, stderr=out)
    try:
        _drop_when(lambda: settled(watch, [first]), database_dsn, shared_prefix).join(60)
        exit_code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert exit_code == 1, log.read_text()
