"""`Queue.drain`: every due job run inline in the calling thread (tests and scripts)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

import venturi
from tests.support import Probe
from venturi import ConfigurationError, JobContext, Queue, Retry


def test_drain_runs_every_due_job_in_the_calling_thread(queue: Queue) -> None:
    threads: set[int] = set()

    @queue.job("count")
    def count(n: int) -> int:
        threads.add(threading.get_ident())
        return n

    ids = [count.enqueue(n=n) for n in range(5)]
    later = queue.enqueue("count", {"n": 99}, delay=3600)
    assert queue.drain() == 5
    assert threads == {threading.get_ident()}
    assert all(queue.journal(i)[0].attachment == n for n, i in enumerate(ids))
    job = queue.get(later)
    assert job is not None and job.status == "pending", "not due yet, so not run"
    assert queue.drain() == 0


def test_drain_runs_retries_that_are_due_at_once(queue: Queue) -> None:
    @queue.job("twice", backoff=venturi.constant(0), context=True)
    def twice(ctx: JobContext) -> int:
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return ctx.attempt

    job_id = twice.enqueue()
    assert queue.drain() == 3
    assert [e.outcome for e in queue.journal(job_id)] == ["retried", "retried", "completed"]


def test_wait_for_lets_drain_run_retries_that_come_due(queue: Queue, probe: Probe) -> None:
    @queue.job("soon", context=True)
    def soon(ctx: JobContext) -> str:
        if ctx.attempt == 1:
            raise Retry(after=0.3)
        return "second run"

    job_id = soon.enqueue()
    assert queue.drain() == 1, "without wait_for the retry is left for later"
    assert queue.drain(wait_for=timedelta(seconds=20)) == 1
    job = queue.get(job_id)
    assert job is not None and job.status == "completed"
    ran_after = probe.scalar(
        "SELECT extract(epoch FROM max(recorded_at) - min(recorded_at))::float8 FROM {journal}"
    )
    assert ran_after >= 0.3, "the retry ran before its delay passed"


def test_wait_for_does_not_wait_for_jobs_due_after_it(queue: Queue) -> None:
    @queue.job("far")
    def far() -> None: ...

    job_id = queue.enqueue("far", {}, delay=3600)
    assert queue.drain(wait_for=0.2) == 0
    job = queue.get(job_id)
    assert job is not None and job.status == "pending"


def test_drain_takes_only_the_given_kinds(queue: Queue) -> None:
    @queue.job("a")
    def a() -> None: ...

    @queue.job("b")
    def b() -> None: ...

    a.enqueue()
    b_id = b.enqueue()
    orphan = queue.enqueue("nobody", {})
    assert queue.drain(["a"]) == 1
    assert queue.drain() == 1, "b runs; the kind with no handler is never claimed"
    assert queue.get(b_id) is not None
    orphan_job = queue.get(orphan)
    assert orphan_job is not None and (orphan_job.status, orphan_job.run_count) == ("pending", 0)
    with pytest.raises(ConfigurationError, match="nobody"):
        queue.drain(["nobody"])


def test_a_handler_interrupting_drain_hands_its_job_back(queue: Queue) -> None:
    @queue.job("interrupt", context=True)
    def interrupt(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise KeyboardInterrupt

    job_id = interrupt.enqueue()
    with pytest.raises(KeyboardInterrupt):
        queue.drain()
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.failure_count, job.claimed_by) == ("pending", 0, None)
    assert [e.outcome for e in queue.journal(job_id)] == ["released"]
    assert queue.drain() == 1


def test_extend_lease_in_drain_renews_the_claim(queue: Queue, probe: Probe) -> None:
    seen: list[bool] = []

    @queue.job("renew", lease=600, context=True)
    def renew(ctx: JobContext) -> None:
        probe.rows("UPDATE {jobs} SET claim_expires_at = now()")
        seen.append(ctx.extend_lease())
        seen.append(
            probe.scalar("SELECT claim_expires_at > now() + interval '500 seconds' FROM {jobs}")
        )

    renew.enqueue()
    queue.drain()
    assert seen == [True, True]
