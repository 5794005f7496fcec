"""venturi.testing against the real tables: the assertions and their messages, the
inline and manual modes, and `advance`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.string import TextLoader

import venturi
from venturi import JobStatus, Pause, Queue, Retry
from venturi.testing import (
    QueueFactory,
    advance,
    assert_enqueued,
    enqueued,
    inline,
    is_inline,
    manual,
    refute_enqueued,
    set_mode,
)

Calls = list[tuple[str, object]]


@pytest.fixture
def calls() -> Calls:
    return []


@pytest.fixture
def app(venturi_dsn: str, calls: Calls) -> Iterator[Queue]:
    """An application's queue; `venturi_queue(app)` points it at a fresh prefix."""
    queue = app_queue(venturi_dsn, calls)
    yield queue
    queue.close()


def app_queue(dsn: str, calls: Calls) -> Queue:
    queue = Queue(dsn, prefix="app_not_migrated", pool_size=1)

    @queue.job("emails.send")
    def send(to: str, subject: str = "hi") -> None:
        calls.append(("send", to))

    @queue.job("flaky", max_attempts=3)
    def flaky(n: int) -> None:
        calls.append(("flaky", n))
        raise RuntimeError(f"flaky {n}")

    @queue.job("retry.soon", max_attempts=3)
    def retry_soon() -> None:
        calls.append(("retry.soon", None))
        raise Retry(after=60)

    @queue.job("pause.once", context=True)
    def pause_once(ctx: venturi.JobContext) -> str:
        calls.append(("pause.once", ctx.attempt))
        if ctx.carry is None:
            raise Pause(after=0, carry="second")
        return str(ctx.carry)

    @queue.job("fan.out")
    def fan_out(count: int) -> None:
        calls.append(("fan.out", count))
        for n in range(count):
            send.enqueue(to=f"user{n}@example.com")

    return queue


def test_assert_enqueued_matches_payload_subset_priority_and_delay(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    queue.enqueue("emails.send", {"to": "a@example.com", "subject": "x"}, priority=5)
    queue.enqueue("emails.send", {"to": "b@example.com"}, delay=timedelta(minutes=30))
    at = datetime.now(UTC) + timedelta(hours=2)
    queue.enqueue("emails.send", {"to": "c@example.com"}, at=at)

    assert len(assert_enqueued(queue, "emails.send")) == 3
    assert_enqueued(queue, "emails.send", count=3)
    [job] = assert_enqueued(queue, "emails.send", {"to": "a@example.com"}, priority=5)
    assert job.payload == {"to": "a@example.com", "subject": "x"}
    assert_enqueued(queue, "emails.send", {"to": "b@example.com"}, delay=1800)
    assert_enqueued(queue, "emails.send", {"to": "c@example.com"}, at=at)
    assert_enqueued(queue, "emails.send", delay=timedelta(minutes=30), count=1)
    refute_enqueued(queue, "emails.send", {"to": "a@example.com"}, priority=0)
    refute_enqueued(queue, "emails.send", {"to": "b@example.com"}, delay=60)
    refute_enqueued(queue, "flaky")
    assert [j.payload["to"] for j in enqueued(queue, "emails.send")] == [
        "a@example.com",
        "b@example.com",
        "c@example.com",
    ]


def test_failure_messages_list_what_was_enqueued(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    with pytest.raises(AssertionError, match="Nothing is enqueued"):
        assert_enqueued(queue, "emails.send")
    queue.enqueue("emails.send", {"to": "a@example.com"}, priority=3)
    with pytest.raises(AssertionError) as failure:
        assert_enqueued(queue, "emails.send", {"to": "z@example.com"})
    text = str(failure.value)
    assert "expected job of kind 'emails.send' with payload containing" in text
    assert "found none" in text
    assert 'emails.send {"to": "a@example.com"} priority=3' in text
    with pytest.raises(AssertionError, match=r"expected 2 job of kind 'emails.send'; found 1"):
        assert_enqueued(queue, "emails.send", count=2)
    with pytest.raises(AssertionError, match=r"expected no job of kind 'emails.send'; found 1"):
        refute_enqueued(queue, "emails.send")


def test_assertions_refuse_bad_terms(venturi_queue: QueueFactory, app: Queue, calls: Calls) -> None:
    queue = venturi_queue()
    with pytest.raises(ValueError, match="delay or at"):
        assert_enqueued(queue, "k", delay=1, at=datetime.now(UTC))
    with pytest.raises(ValueError, match="count"):
        assert_enqueued(queue, "k", count=-1)
    with pytest.raises(ValueError, match="kind"):
        assert_enqueued(queue, "")
    with pytest.raises(TypeError, match="payload must be a mapping"):
        assert_enqueued(queue, "k", ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(venturi.InvalidJob, match="at"):
        assert_enqueued(queue, "k", at=datetime(2030, 1, 1))


def test_a_transaction_sees_its_own_enqueues(
    venturi_queue: QueueFactory, venturi_dsn: str, app: Queue
) -> None:
    queue = venturi_queue(app)
    with psycopg.connect(venturi_dsn) as conn:
        queue.enqueue("emails.send", {"to": "tx@example.com"}, conn=conn)
        assert_enqueued(queue, "emails.send", {"to": "tx@example.com"}, conn=conn)
        refute_enqueued(queue, "emails.send")  # other sessions do not see it yet
        conn.rollback()
    refute_enqueued(queue, "emails.send")


def test_reads_decode_json_on_a_connection_that_loads_it_as_text(
    venturi_queue: QueueFactory, venturi_dsn: str, app: Queue
) -> None:
    """Django's connections load jsonb as text; the store's reads on them still decode."""
    queue = venturi_queue(app)
    with psycopg.connect(venturi_dsn) as conn:
        conn.adapters.register_loader("jsonb", TextLoader)
        queue.enqueue("emails.send", {"to": "tx@example.com"}, conn=conn)
        [job] = assert_enqueued(queue, "emails.send", {"to": "tx@example.com"}, conn=conn)
        assert job.payload == {"to": "tx@example.com"}
        assert conn.execute("SELECT '{}'::jsonb").fetchone() == ("{}",)  # its loader is kept


def test_inline_runs_each_job_as_it_is_enqueued(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    with inline(queue):
        assert is_inline(queue)
        job_id = queue.enqueue("fan.out", {"count": 2})
        assert calls == [
            ("fan.out", 2),
            ("send", "user0@example.com"),
            ("send", "user1@example.com"),
        ]
        record = queue.get(job_id)
        assert record is not None and record.status is JobStatus.COMPLETED
        with manual(queue):
            assert not is_inline(queue)
            queue.enqueue("emails.send", {"to": "later@example.com"})
            assert_enqueued(queue, "emails.send", {"to": "later@example.com"})
        # Leaving the manual block does not run it; the next enqueue runs every due job.
        assert_enqueued(queue, "emails.send")
        queue.enqueue("emails.send", {"to": "now@example.com"})
        refute_enqueued(queue, "emails.send")
    assert not is_inline(queue)
    queue.enqueue("emails.send", {"to": "manual@example.com"})
    assert_enqueued(queue, "emails.send", {"to": "manual@example.com"})


def test_inline_raises_handler_failures_after_recording_them(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    with inline(queue), pytest.raises(RuntimeError, match="flaky 1"):
        queue.enqueue("flaky", {"n": 1})
    [job] = assert_enqueued(queue, "flaky", {"n": 1})  # its retry waits out the backoff
    assert job.failure_count == 1
    assert [e.outcome for e in queue.journal(job.id)] == [venturi.Outcome.RETRIED]
    with inline(queue, raise_failures=False):
        queue.enqueue("flaky", {"n": 2})
        [second] = assert_enqueued(queue, "flaky", {"n": 2})
        assert second.failure_count == 1


def test_inline_pause_and_retry_behave_as_in_drain(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    with inline(queue):
        job_id = queue.enqueue("pause.once")
        assert calls == [("pause.once", 1), ("pause.once", 2)]
        journal = queue.journal(job_id)
        assert [e.outcome for e in journal] == [venturi.Outcome.PAUSED, venturi.Outcome.COMPLETED]
        assert journal[-1].attachment == "second"

        retried = queue.enqueue("retry.soon")
        assert_enqueued(queue, "retry.soon", delay=60)
        advance(queue, "59s")
        assert calls.count(("retry.soon", None)) == 1
        advance(queue, "1s")  # due now: inline runs it at once
        assert calls.count(("retry.soon", None)) == 2
        advance(queue, "1m")
        record = queue.get(retried)
        assert record is not None and record.status is JobStatus.DEAD


def test_advance_makes_scheduled_jobs_due_for_drain(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue(app)
    queue.enqueue("emails.send", {"to": "tomorrow@example.com"}, delay=timedelta(days=1))
    assert queue.drain() == 0
    advance(queue, "23h59m")
    assert queue.drain() == 0
    assert_enqueued(queue, "emails.send", delay=86400)  # as enqueued, a day ahead
    advance(queue, timedelta(minutes=1))
    assert queue.drain() == 1
    assert calls == [("send", "tomorrow@example.com")]


def test_advance_refuses_what_is_not_a_forward_duration(
    venturi_queue: QueueFactory, app: Queue, calls: Calls
) -> None:
    queue = venturi_queue()
    for bad in ("soon", "1x", "", "-1h", "h"):
        with pytest.raises(ValueError, match="not a duration"):
            advance(queue, bad)
    with pytest.raises(ValueError, match="positive"):
        advance(queue, 0)
    with pytest.raises(venturi.InvalidJob, match="advance"):
        advance(queue, -5)


def test_factory_copies_registrations_and_refuses_bad_sources(
    venturi_queue: QueueFactory, app: Queue
) -> None:
    own = app.prefix
    queue = venturi_queue(app)
    assert queue is app and queue.prefix.startswith("t_test_factory_co")
    other = venturi_queue()
    assert other.definitions == {} and other.prefix != queue.prefix
    venturi_queue.close()
    assert app.prefix == own
    with pytest.raises(venturi.ConfigurationError, match="holds 0 venturi Queues"):
        venturi_queue("tests.support")
    with pytest.raises(venturi.ConfigurationError, match="is not a venturi Queue"):
        venturi_queue("tests.support:wait_until")
    with pytest.raises(TypeError, match="source"):
        venturi_queue(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        venturi_queue(mode="eager")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="testing mode must be 'inline' or 'manual'"):
        set_mode(queue, "eager")


def test_advance_moves_claims_toward_expiry_and_leaves_finished_jobs(
    venturi_queue: QueueFactory, app: Queue
) -> None:
    queue = venturi_queue(app)
    running = queue.enqueue("emails.send", {"to": "running@example.com"})
    done = queue.enqueue("flaky", {"n": 1}, delay=10)
    [claimed] = queue.store.claim("a-worker", {"emails.send": 60.0}, 1)
    assert claimed.id == running
    assert queue.cancel(done)
    finished = queue.get(done)
    advance(queue, "59s")
    assert queue.store.find_stale() == []
    advance(queue, "2s")
    assert [job.id for job in queue.store.find_stale()] == [running]
    assert queue.get(done) == finished  # a finished job is not moved
