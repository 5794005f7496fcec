"""Waking up: NOTIFY starts jobs at once, delayed jobs run on time without one, a killed
listener reconnects, and a listener that hears nothing falls back to polling.

Every worker here polls only once a minute, so a job that starts within the waits
below was started by a notification or by the visibility timer, not by polling."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.support import Probe, postgres_store, wait_until
from venturi import Queue, Worker
from venturi.models import JobRecord
from venturi.prefix import Prefix
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore

POLL = 60.0
QUICK = 15.0  # well below POLL: generous for a loaded machine, still proves the point


def completed(queue: Queue, job_id: object) -> Callable[[], bool]:
    def check() -> bool:
        job = queue.get(str(job_id))
        return job is not None and job.status == "completed"

    return check


@pytest.fixture
def listening_worker(queue: Queue, start_worker: Callable[..., Worker]) -> Worker:
    @queue.job("ping")
    def ping(n: int) -> int:
        return n

    worker = start_worker(poll_interval=POLL)
    wait_until(lambda: worker.listening, timeout=QUICK, what="the listener's self-probe")
    return worker


def test_an_enqueue_wakes_an_idle_worker(queue: Queue, listening_worker: Worker) -> None:
    for n in range(3):
        job_id = queue.enqueue("ping", {"n": n})
        wait_until(completed(queue, job_id), timeout=QUICK, what=f"job {n} to run")


def test_a_woken_worker_claims_on_its_listener_connection(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("ping")
    def ping(n: int) -> int:
        return n

    store = postgres_store(queue)
    claimed_on: list[int | None] = []
    plain_claim = store.claim

    def watched_claim(*args: Any, **options: Any) -> list[JobRecord]:
        conn = options.get("conn")
        jobs = plain_claim(*args, **options)
        if jobs:
            claimed_on.append(None if conn is None else conn.info.backend_pid)
        return jobs

    store.claim = watched_claim  # type: ignore[method-assign]
    worker = start_worker(poll_interval=POLL)
    wait_until(lambda: worker.listening, timeout=QUICK, what="the listener's self-probe")
    notifier = worker.notifier
    assert isinstance(notifier, PostgresNotifier)
    job_id = queue.enqueue("ping", {"n": 1})
    wait_until(completed(queue, job_id), timeout=QUICK, what="the job to run")
    assert claimed_on == [notifier.backend_pid()], "claimed on a pooled connection"


def test_a_delayed_job_runs_when_due_without_any_notify(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("later")
    def later() -> None: ...

    # Enqueued before the worker listens: its NOTIFY went nowhere, so only the idle
    # wait's timer (the next visible_at) can start it.
    job_id = queue.enqueue("later", {}, delay=1.0)
    start_worker(poll_interval=POLL)
    wait_until(completed(queue, job_id), timeout=QUICK, what="the delayed job to run")
    assert probe.scalar(
        "SELECT r.recorded_at >= j.visible_at FROM {jobs} j JOIN {journal} r ON r.job_id = j.id"
    ), "the job ran before it was due"


def test_a_job_delayed_while_the_worker_sleeps_runs_on_time(
    queue: Queue, probe: Probe, listening_worker: Worker
) -> None:
    job_id = queue.enqueue("ping", {"n": 1}, delay=1.0)
    wait_until(completed(queue, job_id), timeout=QUICK, what="the delayed job to run")
    assert probe.scalar(
        "SELECT r.recorded_at >= j.visible_at FROM {jobs} j JOIN {journal} r ON r.job_id = j.id"
    )


def test_a_terminated_listener_reconnects_and_misses_nothing(
    queue: Queue, probe: Probe, listening_worker: Worker
) -> None:
    notifier = listening_worker.notifier
    assert isinstance(notifier, PostgresNotifier)
    old_pid = notifier.backend_pid()
    assert old_pid is not None
    assert probe.scalar("SELECT pg_terminate_backend(%s)", old_pid)
    # Enqueued at once, maybe before the listener is back: the claim pass that follows
    # every reconnect must find it.
    first = queue.enqueue("ping", {"n": 1})
    wait_until(completed(queue, first), timeout=QUICK, what="the job enqueued during the outage")
    new_pid = wait_until(
        lambda: (pid := notifier.backend_pid()) not in (None, old_pid) and pid,
        timeout=QUICK,
        what="the listener to reconnect",
    )
    assert probe.scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", new_pid) == 1
    second = queue.enqueue("ping", {"n": 2})
    wait_until(completed(queue, second), timeout=QUICK, what="a job after the reconnect")


class DeafStore(PostgresStore):
    """A store whose listener hears another channel, like LISTEN behind a transaction-
    pooling proxy: the worker's self-probe never comes back."""

    def notifier(self) -> PostgresNotifier:
        conninfo, kwargs = (self.connections.target.text, self.connections.keywords())
        return PostgresNotifier(conninfo, kwargs, Prefix(self.prefix.name + "_deaf"))


def test_without_notifications_the_worker_says_so_once_and_polls(
    queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    @queue.job("polled")
    def polled() -> None: ...

    deaf = DeafStore.from_pool(queue.store.connections.source, queue.store.prefix)
    worker = Worker(deaf, queue.definitions, poll_interval=0.3)
    with caplog.at_level(logging.WARNING, logger="venturi"):
        worker.start()
        try:
            job_id = queue.enqueue("polled", {})
            wait_until(completed(queue, job_id), timeout=QUICK, what="the polling worker")
            again = queue.enqueue("polled", {})
            wait_until(completed(queue, again), timeout=QUICK, what="a second poll")
        finally:
            worker.stop(timeout=5)
    assert not worker.listening
    notifier = worker.notifier
    assert notifier is not None and notifier.polling and not notifier.connected
    fallbacks = [r for r in caplog.records if "falling back to polling" in r.getMessage()]
    assert len(fallbacks) == 1
    assert fallbacks[0].name == "venturi.worker"


class LateNotifier(PostgresNotifier):
    """A listener whose first connection attempt fails, as when the server is briefly
    unreachable at the moment the worker starts."""

    attempts = 0

    def connect(self) -> None:
        LateNotifier.attempts += 1
        if LateNotifier.attempts == 1:
            raise psycopg.OperationalError("listener refused at start")
        super().connect()


class LateListeningStore(PostgresStore):
    def notifier(self) -> PostgresNotifier:
        conninfo, kwargs = (self.connections.target.text, self.connections.keywords())
        return LateNotifier(conninfo, kwargs, self.prefix)


def test_a_listener_down_at_start_is_probed_once_it_connects(queue: Queue) -> None:
    @queue.job("late")
    def late() -> None: ...

    LateNotifier.attempts = 0
    store = LateListeningStore.from_pool(queue.store.connections.source, queue.store.prefix)
    worker = Worker(store, queue.definitions, poll_interval=POLL)
    worker.start()
    try:
        wait_until(lambda: worker.listening, timeout=QUICK, what="the probe after reconnecting")
        job_id = queue.enqueue("late", {})
        wait_until(completed(queue, job_id), timeout=QUICK, what="a job woken by NOTIFY")
    finally:
        worker.stop(timeout=5)
    assert LateNotifier.attempts >= 2
