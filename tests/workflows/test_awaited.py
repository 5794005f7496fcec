"""Waiting costs those who do not wait nothing: only a transaction that finishes a job
some waiter marked awaited notifies the channel of finished jobs, and a waiter that
marks its job while the finishing transaction holds the row reads it finished."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from ulid import ULID

from tests.support import Listener, Probe, complete_in, complete_many, wait_until
from venturi import JobRecord, Queue
from venturi.settlements import Claim, Settlement


@pytest.fixture
def finished_channel(database_dsn: str, queue: Queue) -> Iterator[Listener]:
    """A raw LISTEN on the prefix's channel of finished jobs."""
    listener = Listener(database_dsn, f"{queue.prefix}_done")
    yield listener
    listener.close()


def _claim(queue: Queue, kind: str, count: int = 1) -> list[Claim]:
    claims = [Claim.of(job) for job in queue.store.claim("w", {kind: 60.0}, count)]
    assert len(claims) == count
    return claims


def _complete_batch(queue: Queue, awaited: bool) -> None:
    """Three completions in one statement, the first of them awaited or not."""
    ids = queue.enqueue_many([queue.new_job("batch") for _ in range(3)])
    if awaited:
        queue.store.await_job(ids[0])
    claims = _claim(queue, "batch", 3)
    assert (
        len(complete_many(queue.store, [(c, Settlement.complete()) for c in claims]).applied) == 3
    )


def _dead_at_once(queue: Queue, awaited: bool) -> None:
    job_id = queue.enqueue("poison")
    if awaited:
        queue.store.await_job(job_id)
    assert queue.store.settle(_claim(queue, "poison")[0], Settlement.dead("bad")) == "dead"


def _dead_after_its_last_retry(queue: Queue, awaited: bool) -> None:
    job_id = queue.enqueue("flaky", max_attempts=1)
    if awaited:
        queue.store.await_job(job_id)
    assert queue.store.settle(_claim(queue, "flaky")[0], Settlement.retry()) == "dead"


def _cancelled(queue: Queue, awaited: bool) -> None:
    job_id = queue.enqueue("later", delay=3600)
    if awaited:
        queue.store.await_job(job_id)
    assert queue.cancel(job_id)


def _cancelled_by_its_parents_end(queue: Queue, awaited: bool) -> None:
    """The parent nobody awaits; its child and grandchild, cancelled by its end, awaited."""
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", depends_on=[parent])
    grandchild = queue.enqueue("child", depends_on=[child])
    if awaited:
        queue.store.await_job(child)
        queue.store.await_job(grandchild)
    assert queue.cancel(parent)
    record = queue.get(grandchild)
    assert record is not None and record.status == "cancelled"


ENDINGS: dict[str, Callable[[Queue, bool], None]] = {
    "batched completions": _complete_batch,
    "dead at once": _dead_at_once,
    "dead after its last retry": _dead_after_its_last_retry,
    "cancelled": _cancelled,
    "cancelled by its parent's end": _cancelled_by_its_parents_end,
}


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_job_nobody_awaits_finishes_without_a_notification(
    queue: Queue, finished_channel: Listener, ending: str
) -> None:
    ENDINGS[ending](queue, False)
    assert finished_channel.until_marker() == []


@pytest.mark.parametrize("ending", ENDINGS)
def test_an_awaited_job_finishing_notifies_once(
    queue: Queue, finished_channel: Listener, probe: Probe, ending: str
) -> None:
    ENDINGS[ending](queue, True)
    assert finished_channel.until_marker() == [""]
    assert probe.count("jobs", "awaited") >= 1


def test_marking_a_finished_job_reads_it_finished_and_writes_nothing(
    queue: Queue, probe: Probe
) -> None:
    job_id = queue.enqueue("k")
    complete_many(queue.store, [(_claim(queue, "k")[0], Settlement.complete(7))])
    xmin = probe.scalar("SELECT xmin::text FROM {jobs}")
    record = queue.store.await_job(job_id)
    assert record is not None and record.status == "completed"
    assert probe.scalar("SELECT xmin::text FROM {jobs}") == xmin, "the row was rewritten"
    assert queue.result(job_id, timeout=5) == 7
    assert queue.store.await_job(ULID()) is None


def test_a_second_waiter_of_an_awaited_job_reads_it_without_marking_again(
    queue: Queue, probe: Probe
) -> None:
    job_id = queue.enqueue("k")
    first = queue.store.await_job(job_id)
    assert first is not None and first.status == "pending"
    xmin = probe.scalar("SELECT xmin::text FROM {jobs}")
    second = queue.store.await_job(job_id)
    assert second is not None and second.status == "pending"
    assert probe.scalar("SELECT xmin::text FROM {jobs}") == xmin, "the row was rewritten"


def test_a_waiter_marking_while_the_completion_holds_the_row_reads_it_completed(
    queue: Queue, probe: Probe, finished_channel: Listener, database_dsn: str
) -> None:
    job_id = queue.enqueue("k")
    claim = _claim(queue, "k")[0]
    outcome: list[JobRecord | BaseException] = []

    def wait() -> None:
        try:
            outcome.append(queue.wait(job_id, timeout=30))
        except BaseException as exc:
            outcome.append(exc)

    with psycopg.connect(database_dsn) as completing:
        # Completed and the row locked, not committed: the completion cannot see a mark.
        assert complete_in(queue.store, completing, claim, Settlement.complete())
        waiter = threading.Thread(target=wait)
        waiter.start()
        wait_until(
            lambda: (
                probe.scalar(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    "%SET awaited = true%",
                )
                == 1
            ),
            timeout=30,
            what="the waiter's mark waiting for the completion's row lock",
        )
        completing.commit()
    waiter.join(30)
    assert outcome and isinstance(outcome[0], JobRecord), outcome
    assert outcome[0].status == "completed"
    assert probe.count("jobs", "awaited") == 0, "a finished job is left unmarked"
    assert finished_channel.until_marker() == [], "woken by its read, not a notification"


def test_a_job_enqueued_cancelled_by_its_parents_end_notifies_nobody(
    queue: Queue, finished_channel: Listener
) -> None:
    parent = queue.enqueue("parent")
    assert queue.cancel(parent)
    child = queue.enqueue("child", depends_on=[parent])
    record = queue.get(child)
    assert record is not None and record.status == "cancelled"
    assert finished_channel.until_marker() == [], "a job not yet stored has no waiter"
