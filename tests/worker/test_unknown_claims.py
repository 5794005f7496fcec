"""Jobs claimed in a worker's name that the worker does not hold: a claim whose answer was
lost may have committed. After one, the dispatcher adopts them at its next claim pass and
runs them under that claim; it leaves alone a run it let go (its settlement could not be
written; the reaper takes it back) and waits while a claim outside a pass (a place passed
on) may be committing a job not yet held."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from tests.support import wait_until
from venturi import JobContext, JobRecord, JobStatus, Queue, Worker
from venturi.worker.dispatcher import Dispatcher

LEASE = 60.0  # far longer than any wait here: a job left to its lease fails the test
NAME = "unknown-claims"


def _dispatcher(worker: Worker) -> Dispatcher:
    parts = worker._parts
    assert parts is not None
    return parts.dispatcher


def _claimed_unknowingly(queue: Queue, runs: list[int]) -> JobRecord:
    """A job of kind "k" claimed in the worker's name behind its back: as a claim pass
    whose answer never came back would have left it."""

    @queue.job("k", lease=LEASE, context=True)
    def k(ctx: JobContext) -> None:
        runs.append(ctx.attempt)

    job_id = queue.enqueue("k", {})
    (job,) = queue.store.claim(NAME, {"k": LEASE}, 1)
    assert job.id == job_id and job.claimed_by == NAME
    return job


def test_jobs_claimed_by_a_lost_claim_are_run_under_it(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    runs: list[int] = []
    job = _claimed_unknowingly(queue, runs)
    worker = start_worker(name=NAME, kinds=["k"])
    wait_until(lambda: worker.listening, what="the worker to listen")
    _dispatcher(worker).claim_failed(psycopg.OperationalError("server closed the connection"))
    wait_until(
        lambda: (r := queue.get(job.id)) is not None and r.status is JobStatus.COMPLETED,
        what="the unknown claim's job to run",
    )
    record = queue.get(job.id)
    assert record is not None and record.run_count == 1  # under the lost claim, not a new one
    assert runs == [1]


def test_a_run_let_go_is_left_to_the_reaper(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    runs: list[int] = []
    job = _claimed_unknowingly(queue, runs)
    worker = start_worker(name=NAME, kinds=["k"])
    parts = worker._parts
    assert parts is not None
    held = parts.held.hold(job)  # held, then let go: its settlement could not be written
    parts.held.let_go(held)
    assert _dispatcher(worker).adopt_unknown_claims() == 0
    record = queue.get(job.id)
    assert record is not None and record.status is JobStatus.CLAIMED and runs == []


def test_no_adoption_while_a_claim_outside_a_pass_is_in_flight(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    runs: list[int] = []
    _claimed_unknowingly(queue, runs)
    worker = start_worker(name=NAME, kinds=["k"])
    dispatcher = _dispatcher(worker)
    inside, leave = threading.Event(), threading.Event()

    def passing_a_place() -> None:
        with dispatcher.claiming_outside():
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=passing_a_place, daemon=True)
    thread.start()
    inside.wait(10)
    # Its job may be committed and not yet held: the claimed job may be that one.
    assert dispatcher.adopt_unknown_claims() == 0
    leave.set()
    thread.join(10)
    assert dispatcher.adopt_unknown_claims() == 1
    wait_until(lambda: runs == [1], what="the adopted job to run")
