"""`Queue.wait` / `Queue.result` / `enqueue_and_wait`: woken by the notification a
finishing transaction sends, through one LISTEN connection per queue."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.support import Probe, wait_until
from venturi import (
    InvalidJob,
    JobCancelled,
    JobFailed,
    Queue,
    UnknownJob,
    Worker,
)
from venturi.store.ids import new_id


def _listeners(probe: Probe, queue: Queue) -> int:
    """Sessions whose last statement LISTENed on the prefix's channel of finished jobs."""
    return int(
        probe.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s",
            f'%LISTEN "{queue.prefix}_done"%',
        )
    )


def test_result_returns_the_handlers_return_value(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("double")
    def double(n: int) -> dict[str, int]:
        return {"n": n * 2}

    start_worker(concurrency=2)
    assert double.enqueue_and_wait(n=21, timeout=20) == {"n": 42}
    job_id = double.enqueue(n=1)
    record = queue.wait(job_id, timeout=20)
    assert record.status == "completed"
    assert queue.result(job_id) == {"n": 2}, "a finished job answers at once"


def test_result_raises_job_failed_with_the_last_note_and_job_cancelled(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("boom", max_attempts=1)
    def boom() -> None:
        raise RuntimeError("kaput")

    start_worker()
    job_id = boom.enqueue()
    with pytest.raises(JobFailed, match="kaput") as failed:
        queue.result(job_id, timeout=20)
    assert failed.value.job_id == job_id and "kaput" in (failed.value.note or "")
    later = queue.enqueue("boom", delay=3600)
    threading.Timer(0.2, queue.cancel, [later]).start()
    with pytest.raises(JobCancelled):
        queue.result(later, timeout=20)


def test_wait_times_out_and_refuses_unknown_ids_and_bad_timeouts(queue: Queue) -> None:
    job_id = queue.enqueue("never", delay=3600)
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.3s"):
        queue.wait(job_id, timeout=0.3)
    with pytest.raises(UnknownJob):
        queue.wait(new_id(), timeout=5)
    with pytest.raises(InvalidJob, match="timeout"):
        queue.wait(job_id, timeout=-1)
    with pytest.raises(InvalidJob):
        queue.wait("not an id", timeout=1)


def test_a_queue_that_never_waits_opens_no_listener(queue: Queue, probe: Probe) -> None:
    queue.enqueue("k")
    assert _listeners(probe, queue) == 0


def test_thousands_of_waiters_in_one_process_share_one_listen_connection(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("echo")
    def echo(n: int) -> int:
        return n

    count = 2000
    ids = queue.enqueue_many([queue.new_job("echo", {"n": n}, delay=3600) for n in range(count)])
    answers: dict[int, object] = {}
    errors: list[BaseException] = []

    def waiter(n: int) -> None:
        try:
            answers[n] = queue.result(ids[n], timeout=300)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    waiters = queue._waiters
    wait_until(lambda: waiters is not None and waiters.waiting == count, timeout=120)
    wait_until(lambda: _listeners(probe, queue) == 1, 120, what="one LISTEN for every waiter")
    assert waiters is not None
    notifier = waiters._notifier
    probe.rows("UPDATE {jobs} SET visible_at = now()")
    start_worker(concurrency=8)
    for thread in threads:
        thread.join(300)
    assert not errors
    assert answers == {n: n for n in range(count)}
    assert waiters._notifier is notifier and getattr(notifier, "reconnects", None) == 0


def test_one_waiter_per_job_from_many_threads_as_jobs_finish_one_by_one(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("echo")
    def echo(n: int) -> int:
        return n

    start_worker(concurrency=4)
    results: list[object] = []
    lock = threading.Lock()

    def request(n: int) -> None:
        value = echo.enqueue_and_wait(n=n, timeout=60)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=request, args=(n,)) for n in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert sorted(results) == list(range(64))  # type: ignore[type-var]


def test_a_waiter_is_woken_again_after_its_listener_reconnects(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    job_id = queue.enqueue("late", delay=3600)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(queue.wait(job_id, timeout=60)))
    thread.start()
    wait_until(lambda: _listeners(probe, queue) == 1)
    # Finished with no notification, as one sent while nobody listened is lost; then the
    # listener is cut off. Only the reconnect's read of the waited-for jobs can wake the
    # waiter. (Finishing after the cut raced the reconnect, which is immediate: a read
    # before the UPDATE committed left the waiter asleep.)
    probe.rows("UPDATE {jobs} SET status = 'cancelled', finished_at = now()")
    probe.rows(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s",
        f'%LISTEN "{queue.prefix}_done"%',
    )
    thread.join(60)
    assert outcome and getattr(outcome[0], "status", None) == "cancelled"
