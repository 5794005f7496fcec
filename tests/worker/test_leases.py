"""Leases: the heartbeat keeps long runs alive, a lost lease stops the run and fences
its late settlement, and a per-job timeout lets the lease lapse."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

import venturi
from tests.support import Probe, wait_until
from venturi import JobContext, JobRecord, Queue, Worker
from venturi.errors import ConfigurationError

WAIT = 30.0


class LostLeases(venturi.WorkerEvents):
    def __init__(self) -> None:
        self.lost: list[JobRecord] = []

    def lease_lost(self, job: JobRecord) -> None:
        self.lost.append(job)


def outcomes(queue: Queue, job_id: object) -> list[tuple[str, int]]:
    return [(e.outcome.value, e.run_no) for e in queue.journal(str(job_id))]


def test_a_run_three_times_its_lease_completes_once_never_reaped(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    stopped: list[bool] = []

    @queue.job("long", lease=1.0, context=True)
    def long(ctx: JobContext) -> str:
        stopped.append(ctx.stopping.wait(3.5))
        return "done"

    job_id = long.enqueue()
    # The worker's own reaper scans every 0.1 s: a missed renewal would be taken back.
    start_worker(concurrency=1, reaper_interval=0.1)
    wait_until(lambda: queue.journal(job_id), timeout=WAIT, what="the long run to settle")
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("completed", 1, 0)
    assert outcomes(queue, job_id) == [("completed", 1)]
    assert stopped == [False]


def test_heartbeat_interval_must_be_at_most_a_third_of_the_lease(queue: Queue) -> None:
    @queue.job("leased", lease=3.0)
    def leased() -> None: ...

    with pytest.raises(ConfigurationError, match=r"heartbeat_interval 1\.5s .* third"):
        queue.worker(heartbeat_interval=1.5).start()
    worker = queue.worker(heartbeat_interval=1.0).start()
    worker.stop(timeout=5)


@pytest.fixture
def watcher(queue: Queue) -> tuple[threading.Event, list[bool]]:
    """A kind whose handler runs until told to stop and reports that it was told."""
    running = threading.Event()
    told: list[bool] = []

    @queue.job("watch", lease=1.0, context=True)
    def watch(ctx: JobContext) -> str:
        running.set()
        told.append(ctx.stopping.wait(WAIT))
        told.append(ctx.extend_lease())
        return "finished late"

    return running, told


def test_a_cancelled_run_is_told_to_stop_and_its_completion_is_fenced(
    queue: Queue,
    start_worker: Callable[..., Worker],
    watcher: tuple[threading.Event, list[bool]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    running, told = watcher
    events = LostLeases()
    caplog.set_level(logging.WARNING, logger="venturi")
    job_id = queue.enqueue("watch", {})
    worker = start_worker(concurrency=1, events=events)
    assert running.wait(WAIT)
    assert queue.cancel(job_id)
    wait_until(lambda: len(told) == 2, timeout=WAIT, what="the handler to be told to stop")
    assert told == [True, False], "stopping set, and the lease can no longer be extended"
    wait_until(lambda: not len(worker.held), timeout=WAIT, what="the late settlement")
    job = queue.get(job_id)
    assert job is not None and job.status == "cancelled"
    assert outcomes(queue, job_id) == [("cancelled", 1)]
    assert [j.id for j in events.lost] == [job_id]
    fenced = [r for r in caplog.records if r.getMessage().startswith("fenced")]
    assert len(fenced) == 1 and fenced[0].levelno == logging.WARNING
    assert "complete" in fenced[0].getMessage()
    assert fenced[0].__dict__["job_id"] == str(job_id)
    assert fenced[0].__dict__["attempt"] == 1


def test_a_stolen_claim_stops_the_run_and_its_late_settlement_changes_nothing(
    queue: Queue,
    probe: Probe,
    start_worker: Callable[..., Worker],
    watcher: tuple[threading.Event, list[bool]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    running, told = watcher
    caplog.set_level(logging.WARNING, logger="venturi")
    job_id = queue.enqueue("watch", {})
    worker = start_worker(concurrency=1)
    assert running.wait(WAIT)
    # Another worker took the job over (as after a reap and re-claim): same epoch here,
    # so only the owner fence tells the runs apart.
    probe.rows("UPDATE {jobs} SET claimed_by = 'thief', claim_expires_at = now() + '1 hour'")
    wait_until(lambda: len(told) == 2, timeout=WAIT, what="the handler to be told to stop")
    assert told == [True, False]
    wait_until(lambda: not len(worker.held), timeout=WAIT, what="the late settlement")
    assert probe.rows("SELECT status, claimed_by, finished_at FROM {jobs}") == [
        ("claimed", "thief", None)
    ]
    assert queue.journal(job_id) == []
    messages = [r.getMessage() for r in caplog.records]
    assert any("lost its lease" in m for m in messages)
    assert any(m.startswith("fenced") for m in messages)


def test_a_timed_out_run_is_told_to_stop_and_its_lease_lapses(
    queue: Queue, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    told: list[bool] = []
    let_go = threading.Event()

    @queue.job("slowpoke", lease=1.0, timeout=0.3, backoff=venturi.constant(0), context=True)
    def slowpoke(ctx: JobContext) -> str:
        if ctx.attempt == 1:
            told.append(ctx.stopping.wait(WAIT))
            let_go.wait(WAIT)  # ignore the request: the lease must lapse anyway
            return "first run, too late"
        return "second run"

    caplog.set_level(logging.WARNING, logger="venturi")
    job_id = slowpoke.enqueue()
    start_worker(concurrency=2, reaper_interval=0.1)
    wait_until(
        lambda: outcomes(queue, job_id) == [("recovered", 1), ("completed", 2)],
        timeout=WAIT,
        what="the lapsed run to be recovered and run again",
    )
    assert told == [True]
    let_go.set()
    wait_until(
        lambda: any(
            m.startswith("fenced") and "run 1" in m
            for m in (r.getMessage() for r in caplog.records)
        ),
        timeout=WAIT,
        what="the first run's late completion to be fenced and logged",
    )
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("completed", 2, 1)
    assert outcomes(queue, job_id) == [("recovered", 1), ("completed", 2)]
    assert any("passed its 0.3s timeout" in r.getMessage() for r in caplog.records)
