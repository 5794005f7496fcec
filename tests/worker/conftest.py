"""Fixtures for the worker tests: a migrated `Queue` per test, plain-SQL access to its
tables, workers that are always stopped, and worker processes that are always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Probe, ledger
from tests.support.fleet import Fleet
from venturi import Queue, Worker


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    """A migrated queue under this test's prefix."""
    instance = Queue(database_dsn, prefix=prefix, pool_size=8)
    instance.migrate()
    yield instance
    instance.close()


@pytest.fixture
def probe(database_dsn: str, queue: Queue) -> Iterator[Probe]:
    """Plain SQL on this test's tables, behind the queue's back."""
    instance = Probe(database_dsn, queue.prefix)
    yield instance
    instance.close()


@pytest.fixture
def start_worker(queue: Queue) -> Iterator[Callable[..., Worker]]:
    """Start workers on the test's queue with test-friendly intervals; all are stopped
    at teardown (before the queue closes)."""
    started: list[Worker] = []

    def start(**options: Any) -> Worker:
        options.setdefault("poll_interval", 1.0)
        options.setdefault("reaper_interval", 0.2)
        worker = queue.worker(**options)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop(timeout=5)


@pytest.fixture
def fleet(database_dsn: str, queue: Queue, tmp_path: Path) -> Iterator[Fleet]:
    """Worker processes on the test's prefix, recording their runs in its ledger; every
    process is stopped at teardown, before the ledger and the prefix's tables go."""
    ledger.create(database_dsn, queue.prefix)
    processes = Fleet(
        database_dsn,
        queue.prefix,
        tmp_path,
        concurrency=2,
        pool_size=6,
        lease=30,
        reaper_interval=0.2,
        stop_timeout=30,
    )
    yield processes
    processes.close()
    ledger.drop(database_dsn, queue.prefix)
