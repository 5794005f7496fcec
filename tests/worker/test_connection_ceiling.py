"""A worker's connections do not grow with its concurrency: at concurrency 16, draining
every kind of outcome, it holds at most four backends (claims, settlements, heartbeat and
reaper, LISTEN), counted in pg_stat_activity by the worker's application_name."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Final

import pytest
from psycopg.conninfo import make_conninfo

import venturi
from tests.support import Probe, wait_until
from venturi import Queue
from venturi.bench.support import BackendPeak

CEILING: Final = 4
CONCURRENCY: Final = 16
# Each tenth job ends as: retried once, paused once, dead at once, dead out of attempts.
OUTCOMES: Final = ["complete"] * 6 + ["retry", "pause", "fail", "always"]


@pytest.fixture
def named(database_dsn: str, prefix: str) -> Iterator[tuple[Queue, str]]:
    """A migrated queue with the default pool whose connections all carry one
    application_name (its pool, the worker's side pool and its LISTEN connection)."""
    name = f"venturi-{prefix}"
    queue = Queue(make_conninfo(database_dsn, application_name=name), prefix=prefix)
    queue.migrate()
    yield queue, name
    queue.close()


@pytest.fixture
def producer(database_dsn: str, prefix: str, named: tuple[Queue, str]) -> Iterator[Queue]:
    """The test's own queue on the same tables, under no application_name."""
    queue = Queue(database_dsn, prefix=prefix, pool_size=1)
    yield queue
    queue.close()


def _unfinished(probe: Probe) -> int:
    return probe.count("jobs", "status IN ('pending', 'claimed')")


def _register(queue: Queue, hold: threading.Event | None = None) -> None:
    @queue.job("ceiling.mix", max_attempts=2, backoff=venturi.constant(0.01), context=True)
    def mix(ctx: venturi.JobContext, outcome: str) -> None:
        if hold is not None:
            with queue.store.transaction():  # the handler's own use of the queue's pool
                hold.wait(10)
        first = ctx.attempt == 1
        if outcome == "retry" and first:
            raise venturi.Retry(after=0.01)
        if outcome == "pause" and first:
            raise venturi.Pause(after=0.01)
        if outcome == "fail":
            raise venturi.Fail("dead at once")
        if outcome == "always":
            raise RuntimeError("dead once out of attempts")


def test_a_worker_at_concurrency_16_holds_at_most_four_backends(
    database_dsn: str, named: tuple[Queue, str], producer: Queue, probe: Probe
) -> None:
    queue, name = named
    _register(queue)
    jobs = [venturi.NewJob("ceiling.mix", {"outcome": OUTCOMES[n % 10]}) for n in range(300)]
    producer.enqueue_many(jobs)
    # No retention: a worker whose turn it is to prune holds one more connection meanwhile
    # (once a minute per prefix, documented), and a minute may turn during the test.
    worker = queue.worker(concurrency=CONCURRENCY, retention=None)
    with BackendPeak(database_dsn, name, interval=0.002) as sampler, worker:
        wait_until(lambda: _unfinished(probe) == 0, 60, what="the batch to settle")
        # The worker's connections while it idles, as well as while it drained.
        samples = sampler.samples
        wait_until(lambda: sampler.samples > samples + 10, 5, what="more samples")
    statuses = dict(probe.rows("SELECT status, count(*) FROM {jobs} GROUP BY status"))
    assert statuses == {"completed": 240, "dead": 60}, statuses
    print(f"\nconcurrency {CONCURRENCY}: peak {sampler.peak} backends in {sampler.samples} samples")
    assert sampler.samples > 20, "too few samples to see the drain"
    assert 3 <= sampler.peak <= CEILING, f"{sampler.peak} backends at concurrency {CONCURRENCY}"


def test_the_sampler_sees_handlers_that_use_the_pool_themselves(
    database_dsn: str, named: tuple[Queue, str], producer: Queue, probe: Probe
) -> None:
    queue, name = named
    hold = threading.Event()
    _register(queue, hold)
    producer.enqueue_many([venturi.NewJob("ceiling.mix", {"outcome": "complete"})] * 4)
    with (
        BackendPeak(database_dsn, name, interval=0.002) as sampler,
        queue.worker(concurrency=CONCURRENCY),
    ):
        try:
            # Four handlers each hold a pooled connection: the worker's own four plus
            # theirs, less the pool's connections they share with the dispatcher.
            wait_until(lambda: sampler.peak > CEILING, 10, what="more than the ceiling seen")
        finally:
            hold.set()
        wait_until(lambda: _unfinished(probe) == 0, 20, what="the jobs to finish")
    assert sampler.peak > CEILING
