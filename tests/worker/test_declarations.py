"""Two deployments declaring different limits for one kind (a rolling deploy): the most
recent declaration wins for both, and the database keeps it even for the worker that
declared otherwise."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from tests.support import wait_until
from venturi import Queue, Worker


@pytest.fixture
def old_deploy(database_dsn: str, prefix: str) -> Iterator[Queue]:
    """A second queue on the same prefix: another deployment's code."""
    instance = Queue(database_dsn, prefix=prefix, pool_size=8)
    yield instance
    instance.close()


def test_the_latest_declaration_binds_a_worker_that_declared_none(
    queue: Queue, old_deploy: Queue, start_worker: Callable[..., Worker]
) -> None:
    lock = threading.Lock()
    running: list[str] = []
    overlaps: list[int] = []
    gate = threading.Event()

    def body(who: str) -> None:
        with lock:
            running.append(who)
            overlaps.append(len(running))
        gate.wait(0.02)
        with lock:
            running.remove(who)

    @old_deploy.job("sync")
    def old_sync(n: int) -> None:
        body("old")

    @queue.job("sync", concurrency=1)
    def new_sync(n: int) -> None:
        body("new")

    old_worker = old_deploy.worker(concurrency=8, poll_interval=1.0)
    old_worker.start()
    try:
        new_worker = start_worker(concurrency=8)
        (state,) = queue.kinds()
        assert state.limits.concurrency == 1 and state.declared_by == new_worker.name
        for n in range(40):
            queue.enqueue("sync", {"n": n})
        wait_until(
            lambda: queue.stats().total("completed") == 40, timeout=60, what="40 jobs to run"
        )
    finally:
        old_worker.stop(timeout=5)
    assert max(overlaps) == 1
