"""Pausing a kind while workers run: claims stop at once, running jobs finish, other
kinds go on, and resuming wakes the workers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.support import wait_until
from venturi import Queue, Worker


def test_pause_stops_claims_within_a_second_and_resume_restarts_them(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    release = threading.Event()
    ran: list[int] = []

    @queue.job("emails.send")
    def send(n: int) -> None:
        ran.append(n)
        if n == 0:
            release.wait(30)

    @queue.job("other")
    def other() -> None:
        pass

    start_worker(concurrency=2, poll_interval=5.0)
    queue.enqueue("emails.send", {"n": 0})
    wait_until(lambda: ran == [0], timeout=10, what="the first job to start")
    queue.pause("emails.send")
    paused_at = time.monotonic()
    for n in range(1, 4):
        queue.enqueue("emails.send", {"n": n})  # accepted while paused
    other_id = queue.enqueue("other", {})
    wait_until(
        lambda: (job := queue.get(other_id)) is not None and job.status == "completed",
        timeout=10,
        what="another kind to keep running",
    )
    release.set()  # the running job finishes normally
    wait_until(
        lambda: queue.stats().total("completed") == 2, timeout=10, what="the running job's end"
    )
    assert ran == [0] and queue.stats().total("pending") == 3
    assert time.monotonic() - paused_at < 5.0  # waited for other work, not a poll
    resumed_at = time.monotonic()
    queue.resume("emails.send")
    wait_until(lambda: len(ran) == 4, timeout=10, what="the paused jobs to run after resume")
    assert time.monotonic() - resumed_at < 1.0  # woken by NOTIFY, not the 5 s poll


def test_a_paused_kind_stays_paused_for_a_new_worker(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    ran: list[int] = []

    @queue.job("k")
    def k(n: int) -> None:
        ran.append(n)

    queue.pause("k")
    first = start_worker(concurrency=1)
    first.stop()
    queue.enqueue("k", {"n": 1})
    start_worker(concurrency=1)
    assert queue.drain() == 0 and queue.paused() == {"k"}
    queue.resume("k")
    wait_until(lambda: ran == [1], timeout=10, what="the job to run once resumed")


def test_a_worker_declares_its_limits_and_keeps_them(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    running: list[int] = []
    highest = 0
    lock = threading.Lock()
    gate = threading.Event()

    @queue.job("capture", concurrency=2)
    def capture(n: int) -> None:
        nonlocal highest
        with lock:
            running.append(n)
            highest = max(highest, len(running))
        gate.wait(0.05)
        with lock:
            running.remove(n)

    worker = start_worker(concurrency=8)
    (state,) = queue.kinds()
    assert state.limits.concurrency == 2 and state.declared_by == worker.name
    for n in range(20):
        queue.enqueue("capture", {"n": n})
    wait_until(lambda: queue.stats().total("completed") == 20, timeout=30, what="20 limited jobs")
    assert highest == 2
