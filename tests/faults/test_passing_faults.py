"""The transaction that passes a completed run's place on (settle_and_pass) failing with
every transient error class: the run is then completed the usual way, nothing is lost,
run twice or left claimed, and the kind's limit holds."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import venturi
from tests.faults.injection import ErrorClass, Faults, InjectingStore
from tests.support import Probe, wait_until

JOBS = 40
LIMIT = 2


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def queue(database_dsn: str, prefix: str, faults: Faults) -> Iterator[venturi.Queue]:
    store = InjectingStore.open(database_dsn, prefix, faults, pool_size=6)
    instance = venturi.Queue(database_dsn, prefix=prefix, store=store)
    yield instance
    instance.close()


@pytest.mark.parametrize("error", list(ErrorClass), ids=lambda e: e.name.lower())
def test_a_failed_pass_completes_the_run_the_usual_way(
    queue: venturi.Queue, faults: Faults, database_dsn: str, error: ErrorClass
) -> None:
    runs: dict[int, int] = {}
    running: list[int] = []
    highest = 0
    lock = threading.Lock()
    gate = threading.Event()

    @queue.job("capture", concurrency=LIMIT)
    def capture(n: int) -> None:
        nonlocal highest
        with lock:
            runs[n] = runs.get(n, 0) + 1
            running.append(n)
            highest = max(highest, len(running))
        gate.wait(0.005)
        with lock:
            running.remove(n)

    faults.arm("settle_and_pass", error, times=2)
    queue.enqueue_many([venturi.NewJob("capture", {"n": n}) for n in range(JOBS)])
    probe = Probe(database_dsn, queue.prefix)
    try:
        with queue.worker(concurrency=4, poll_interval=0.5, reaper_interval=0.2):
            wait_until(
                lambda: probe.count("jobs", "status = 'completed'") == JOBS,
                timeout=60,
                what=f"{JOBS} jobs to complete",
            )
        assert faults.count == 2
        assert probe.count("jobs", "status = 'completed' AND run_count = 1") == JOBS
        assert probe.count("journal") == JOBS
        assert probe.count("jobs", "status = 'claimed'") == 0
        assert runs == dict.fromkeys(range(JOBS), 1)
        assert highest <= LIMIT
    finally:
        probe.close()
