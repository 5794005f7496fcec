"""Every way a run can end, checked in the job row, its counters and the journal.

Runs go through `Queue.drain`, which uses the same execution path as the worker's
handler threads (tests in test_worker_runtime.py cover the threaded path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import venturi
from tests.support import Probe
from venturi import Fail, JobContext, Pause, Queue, Retry


def outcomes(queue: Queue, job_id: Any) -> list[tuple[str, int]]:
    return [(row.outcome.value, row.run_no) for row in queue.journal(job_id)]


def test_return_completes_and_keeps_the_value_as_attachment(queue: Queue) -> None:
    @queue.job("add")
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    job_id = add.enqueue(a=2, b=3)
    assert queue.drain() == 1
    job = queue.get(job_id)
    assert job is not None
    assert job.status == "completed"
    assert (job.run_count, job.failure_count) == (1, 0)
    assert job.finished_at is not None and job.claim_expires_at is None
    (entry,) = queue.journal(job_id)
    assert (entry.outcome, entry.run_no, entry.attachment) == ("completed", 1, {"sum": 5})


def test_a_value_that_is_not_json_completes_with_a_note_instead(queue: Queue) -> None:
    @queue.job("odd")
    def odd() -> object:
        return {1, 2}

    job_id = odd.enqueue()
    queue.drain()
    (entry,) = queue.journal(job_id)
    assert entry.outcome == "completed" and entry.attachment is None
    assert entry.note is not None and "return value not kept" in entry.note


def test_notes_and_attach_reach_the_journal(queue: Queue) -> None:
    @queue.job("report", context=True)
    def report(ctx: JobContext, rows: int) -> None:
        ctx.note(f"read {rows} rows")
        ctx.note("wrote summary")
        ctx.attach({"rows": rows})

    job_id = report.enqueue(rows=7)
    queue.drain()
    (entry,) = queue.journal(job_id)
    assert entry.note == "read 7 rows\nwrote summary"
    assert entry.attachment == {"rows": 7}


def test_retry_counts_a_failure_and_waits_its_after(queue: Queue, probe: Probe) -> None:
    @queue.job("flaky", max_attempts=5, context=True)
    def flaky(ctx: JobContext) -> None:
        raise Retry(after=timedelta(minutes=10), carry={"cursor": 40}, note="upstream busy")

    job_id = flaky.enqueue()
    assert queue.drain() == 1
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("pending", 1, 1)
    assert job.carry == {"cursor": 40}
    (entry,) = queue.journal(job_id)
    assert (entry.outcome, entry.note) == ("retried", "upstream busy")
    wait = probe.scalar(
        "SELECT extract(epoch FROM j.visible_at - r.recorded_at)::float8 FROM {jobs} j "
        "JOIN {journal} r ON r.job_id = j.id"
    )
    assert 595 <= wait <= 605
    assert queue.drain() == 0, "a retry is not due before its after"


def test_retry_without_after_uses_the_kind_backoff(queue: Queue, probe: Probe) -> None:
    @queue.job("later", backoff=venturi.constant(300))
    def later() -> None:
        raise Retry()

    later.enqueue()
    queue.drain()
    wait = probe.scalar(
        "SELECT extract(epoch FROM j.visible_at - r.recorded_at)::float8 FROM {jobs} j "
        "JOIN {journal} r ON r.job_id = j.id"
    )
    assert 295 <= wait <= 305


def test_pause_repends_without_counting_a_failure(queue: Queue, probe: Probe) -> None:
    @queue.job("snooze", max_attempts=1)
    def snooze() -> None:
        raise Pause(after=120, carry={"page": 3}, note="rate limited")

    job_id = snooze.enqueue()
    queue.drain()
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("pending", 1, 0)
    assert job.carry == {"page": 3}
    (entry,) = queue.journal(job_id)
    assert (entry.outcome, entry.note) == ("paused", "rate limited")
    wait = probe.scalar(
        "SELECT extract(epoch FROM j.visible_at - r.recorded_at)::float8 FROM {jobs} j "
        "JOIN {journal} r ON r.job_id = j.id"
    )
    assert 115 <= wait <= 125


def test_pause_until_sets_the_visible_time(queue: Queue) -> None:
    until = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)

    @queue.job("tomorrow")
    def tomorrow() -> None:
        raise Pause(until=until)

    job_id = tomorrow.enqueue()
    queue.drain()
    job = queue.get(job_id)
    assert job is not None and job.visible_at == until


def test_pauses_never_use_up_attempts(queue: Queue) -> None:
    @queue.job("patient", max_attempts=1, context=True)
    def patient(ctx: JobContext) -> int:
        if ctx.attempt < 4:
            raise Pause()
        return ctx.attempt

    job_id = patient.enqueue()
    assert queue.drain() == 4
    assert outcomes(queue, job_id) == [
        ("paused", 1),
        ("paused", 2),
        ("paused", 3),
        ("completed", 4),
    ]


def test_fail_is_dead_at_once(queue: Queue) -> None:
    @queue.job("poison", max_attempts=5)
    def poison(n: int) -> None:
        raise Fail(f"cannot parse {n}")

    job_id = poison.enqueue(n=9)
    assert queue.drain() == 1
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.failure_count) == ("dead", 0)
    assert job.finished_at is not None
    (entry,) = queue.journal(job_id)
    assert (entry.outcome, entry.note) == ("dead", "cannot parse 9")


def test_other_exceptions_retry_with_type_message_and_traceback(queue: Queue) -> None:
    @queue.job("broken", backoff=venturi.constant(60))
    def broken(key: str) -> None:
        raise KeyError(f"no such key {key}")

    job_id = broken.enqueue(key="k1")
    queue.drain()
    job = queue.get(job_id)
    assert job is not None and (job.status, job.failure_count) == ("pending", 1)
    (entry,) = queue.journal(job_id)
    assert entry.outcome == "retried" and entry.note is not None
    assert "Traceback (most recent call last)" in entry.note
    assert "KeyError: 'no such key k1'" in entry.note
    assert "in broken" in entry.note


def test_dead_after_max_attempts(queue: Queue) -> None:
    @queue.job("doomed", max_attempts=3, backoff=venturi.constant(0))
    def doomed() -> None:
        raise RuntimeError("still broken")

    job_id = doomed.enqueue()
    assert queue.drain() == 3
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("dead", 3, 3)
    assert outcomes(queue, job_id) == [("retried", 1), ("retried", 2), ("dead", 3)]
    assert queue.drain() == 0


def test_max_attempts_per_enqueue_overrides_the_kind(queue: Queue) -> None:
    @queue.job("once_only", max_attempts=5, backoff=venturi.constant(0))
    def once_only() -> None:
        raise Retry()

    job_id = queue.enqueue("once_only", {}, max_attempts=1)
    queue.drain()
    assert outcomes(queue, job_id) == [("dead", 1)]


def test_carry_survives_retry_and_pause_and_is_kept_when_not_given(queue: Queue) -> None:
    seen: list[Any] = []

    @queue.job("resumable", max_attempts=5, backoff=venturi.constant(0), context=True)
    def resumable(ctx: JobContext) -> Any:
        seen.append(ctx.carry)
        if ctx.attempt == 1:
            raise Retry(carry={"done": 10})
        if ctx.attempt == 2:
            raise Pause(carry={"done": 20})
        if ctx.attempt == 3:
            raise Retry()  # no carry given: the checkpoint stays
        if ctx.attempt == 4:
            raise Pause(carry=None)  # an explicit None clears it
        return "finished"

    job_id = resumable.enqueue()
    assert queue.drain() == 5
    assert seen == [None, {"done": 10}, {"done": 20}, {"done": 20}, None]
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("completed", 5, 2)
    assert [o for o, _ in outcomes(queue, job_id)] == [
        "retried",
        "paused",
        "retried",
        "paused",
        "completed",
    ]


def test_job_context_fields_and_current_job(queue: Queue) -> None:
    seen: dict[str, Any] = {}

    @queue.job("inspect", backoff=venturi.constant(0), context=True)
    def inspect_run(ctx: JobContext, label: str) -> None:
        assert venturi.current_job() is ctx
        seen[f"run{ctx.attempt}"] = (
            ctx.job.kind,
            ctx.job.payload,
            ctx.attempt,
            ctx.failures,
            ctx.stopping.is_set(),
            ctx.extend_lease(),
        )
        if ctx.attempt == 1:
            raise ValueError("first run fails")

    @queue.job("plain")
    def plain() -> str:
        ctx = venturi.current_job()
        assert ctx is not None
        return ctx.job.kind

    inspect_run.enqueue(label="x")
    plain_id = plain.enqueue()
    assert venturi.current_job() is None
    queue.drain()
    assert venturi.current_job() is None
    assert seen == {
        "run1": ("inspect", {"label": "x"}, 1, 0, False, True),
        "run2": ("inspect", {"label": "x"}, 2, 1, False, True),
    }
    assert queue.journal(plain_id)[0].attachment == "plain"


def test_a_payload_that_no_longer_fits_the_handler_is_dead(queue: Queue) -> None:
    @queue.job("renamed")
    def renamed(new_name: str) -> None:
        raise AssertionError("must not run")

    # A deploy renamed the handler's argument after the job was queued (the store takes
    # any payload; the queue's enqueue would have refused this one).
    job_id = queue.store.enqueue(venturi.NewJob("renamed", {"old_name": "x"}))
    assert queue.drain() == 1
    job = queue.get(job_id)
    assert job is not None and job.status == "dead"
    (entry,) = queue.journal(job_id)
    assert entry.note is not None and "old_name" in entry.note


@pytest.mark.parametrize(
    ("raised", "outcome"),
    [
        (Retry(), "retried"),
        (Pause(after=600), "paused"),
        (Fail("no"), "dead"),
        (OSError(), "retried"),
    ],
)
def test_threaded_worker_maps_outcomes_like_drain(
    queue: Queue, start_worker: Any, raised: Exception, outcome: str
) -> None:
    from tests.support import wait_until

    @queue.job("raiser", backoff=venturi.constant(600))
    def raiser() -> None:
        raise raised

    job_id = raiser.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: queue.journal(job_id), timeout=20, what="the run to settle")
    assert [o for o, _ in outcomes(queue, job_id)] == [outcome]
