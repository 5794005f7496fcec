"""A pool of two connections under sixteen busy handler threads."""

from __future__ import annotations

import logging
import time

import pytest

import venturi
from tests.faults import invariants
from tests.faults.scenario import Watch, prepare
from tests.support import ledger, postgres_store, wait_until

PARENTS = 48
THREADS = 16
LEASE = 0.75  # shorter than a run: only heartbeats keep the claims alive
RUN_SECONDS = 1.0


def _register(queue: venturi.Queue, book: ledger.Ledger, refused: list[str]) -> None:
    @queue.job("pressure.parent", lease=LEASE, context=True)
    def parent(ctx: venturi.JobContext) -> None:
        token = book.started(ctx)
        time.sleep(RUN_SECONDS)  # busy, not listening to `stopping`
        try:
            queue.enqueue("pressure.child", {})  # through the same pool of two
        except venturi.StoreUnavailable as exc:
            refused.append(str(exc))
            raise
        book.finished(ctx, token)

    @queue.job("pressure.child", lease=LEASE, context=True)
    def child(ctx: venturi.JobContext) -> None:
        book.finished(ctx, book.started(ctx))


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_pool_of_two_with_sixteen_handlers(
    database_dsn: str, shared_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = prepare(database_dsn, shared_prefix, pool_size=2)
    book = ledger.Ledger(database_dsn, shared_prefix, "pressure")
    refused: list[str] = []
    _register(queue, book, refused)
    caplog.set_level(logging.WARNING, logger="venturi")
    ids = queue.enqueue_many([venturi.NewJob("pressure.parent") for _ in range(PARENTS)])
    watch = Watch(database_dsn, shared_prefix)
    began = time.monotonic()
    with queue.worker(concurrency=THREADS, poll_interval=1):
        wait_until(lambda: watch.count("completed") == 2 * PARENTS, 120, 0.05, "all to finish")
    elapsed = time.monotonic() - began
    stats = postgres_store(queue).pool.get_stats()
    queue.close()
    book.close()
    figures = invariants.check(database_dsn, shared_prefix, ids, reruns=())
    watch.close()
    warnings = [r.getMessage() for r in caplog.records]
    print(
        f"\npool pressure: pool of 2, {THREADS} handler threads, {PARENTS} {RUN_SECONDS:g}s "
        f"jobs with a {LEASE}s lease, each enqueueing a child through the pool: "
        f"{elapsed:.1f}s; pool waits {stats.get('requests_queued', 0)} "
        f"({stats.get('requests_wait_ms', 0)} ms in all), timeouts "
        f"{stats.get('requests_errors', 0)}; warnings logged {len(warnings)}\n"
        f"  {figures.line()}"
    )
    assert not refused, refused
    assert figures.journal == {"completed": 2 * PARENTS}, "a lease expired or a run failed"
    assert not warnings, warnings
