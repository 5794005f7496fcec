"""A worker whose claims always start from floors (`venturi.store.floors`) runs every
job once: jobs written by transactions that stay open a while (visible from when they
began, so before the floors later claims found), retries made pending again behind the
floors, and several priorities, while the worker's idle looks for the next due job use
the same floors."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import psycopg
import pytest

from tests.support import Probe, wait_until
from venturi import JobContext, Queue, Retry
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore

WRITERS = 3
PER_WRITER = 40


@pytest.fixture
def floored(database_dsn: str, prefix: str) -> Iterator[Queue]:
    store = PostgresStore.from_dsn(
        database_dsn, Prefix(prefix), pool_size=8, floors_after_dead_rows=0
    )
    queue = Queue(store=store)
    queue.migrate()
    yield queue
    queue.close()
    store.close()


def test_a_worker_claiming_from_floors_runs_every_job_once(
    database_dsn: str, floored: Queue
) -> None:
    runs: dict[str, int] = {}
    lock = threading.Lock()

    @floored.job("k", max_attempts=3, context=True)
    def handle(ctx: JobContext, name: str, fail_first: bool) -> None:
        with lock:
            runs[name] = runs.get(name, 0) + 1
        if fail_first and ctx.attempt == 1:
            raise Retry(after=0)

    def write(w: int) -> None:
        rng = random.Random(w)
        pause = threading.Event()
        with psycopg.connect(database_dsn) as conn:
            for n in range(PER_WRITER):
                floored.enqueue(
                    "k",
                    {"name": f"{w}-{n}", "fail_first": rng.random() < 0.2},
                    priority=rng.randrange(2),
                    conn=conn,
                )
                pause.wait(rng.uniform(0, 0.02))  # open a while: a job from the past
                conn.commit()

    worker = floored.worker(concurrency=4, poll_interval=0.5).start()
    try:
        writers = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        expected = {f"{w}-{n}" for w in range(WRITERS) for n in range(PER_WRITER)}
        probe = Probe(database_dsn, floored.prefix)
        try:
            wait_until(
                lambda: probe.count("jobs", "status = 'completed'") == len(expected),
                what="every job completed",
            )
            assert probe.count("jobs", "status <> 'completed'") == 0
        finally:
            probe.close()
    finally:
        worker.stop(timeout=10)
    assert set(runs) == expected
    retried = {name for name, count in runs.items() if count == 2}
    assert all(count in (1, 2) for count in runs.values())
    assert retried, "some jobs must have been made pending again behind the floors"
