"""Job registration, payloads checked against the handler's signature, and the Queue's
own options; bad input is refused with a clear error and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from ulid import ULID

import venturi
from tests.support import Probe
from venturi import ConfigurationError, InvalidJob, JobContext, NewJob, Queue, UnknownKind


@pytest.fixture
def strict_queue(database_dsn: str, queue: Queue) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=queue.prefix, pool_size=2, strict=True)
    yield instance
    instance.close()


def test_decorated_function_stays_callable_and_gains_enqueue(queue: Queue, probe: Probe) -> None:
    @queue.job("mail.send", priority=3, max_attempts=2)
    def send(to: str, subject: str = "hi") -> str:
        """Send one mail."""
        return f"{to}:{subject}"

    assert send("a@example.com") == "a@example.com:hi"
    assert (send.kind, send.__name__, send.__doc__) == ("mail.send", "send", "Send one mail.")
    job_id = send.enqueue(to="a@example.com")
    assert isinstance(job_id, ULID)
    job = queue.get(str(job_id))
    assert job is not None
    assert (job.payload, job.priority, job.max_attempts) == ({"to": "a@example.com"}, 3, 2)


def test_enqueue_with_takes_the_enqueue_options(queue: Queue) -> None:
    @queue.job("report")
    def report(day: str) -> None: ...

    job_id = report.enqueue_with(
        {"day": "mon"}, priority=-4, delay=timedelta(hours=1), dedup_key="mon"
    )
    again = report.enqueue_with({"day": "mon"}, dedup_key="mon")
    job = queue.get(job_id)
    assert job is not None and again == job_id
    assert (job.priority, job.dedup_key) == (-4, "mon")
    assert job.visible_at > job.created_at + timedelta(minutes=59)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"to": "x", "cc": "y"}, "unexpected keys 'cc'"),
        ({}, "missing required keys 'to'"),
        ({"subject": "s", "bcc": 1}, "unexpected keys 'bcc'; missing required keys 'to'"),
    ],
)
def test_payload_must_fit_the_signature_and_nothing_is_written(
    queue: Queue, probe: Probe, payload: dict[str, Any], expected: str
) -> None:
    @queue.job("mail")
    def mail(to: str, subject: str = "") -> None: ...

    with pytest.raises(InvalidJob, match=expected) as caught:
        queue.enqueue("mail", payload)
    assert "payload for 'mail' does not fit" in str(caught.value)
    with pytest.raises(InvalidJob, match=expected):
        mail.enqueue(**payload)
    with pytest.raises(InvalidJob, match=expected):
        queue.enqueue_many([NewJob("mail", {"to": "ok"}), NewJob("mail", payload)])
    assert probe.count("jobs") == 0


def test_context_parameter_is_not_part_of_the_payload(queue: Queue) -> None:
    @queue.job("ctx", context=True)
    def with_ctx(ctx: JobContext, n: int) -> None: ...

    with_ctx.enqueue(n=1)
    with pytest.raises(InvalidJob, match="unexpected keys 'ctx'"):
        with_ctx.enqueue(ctx=1, n=1)


def test_var_keyword_handlers_take_any_keys(queue: Queue) -> None:
    received: list[dict[str, Any]] = []

    @queue.job("anything")
    def anything(**fields: Any) -> None:
        received.append(fields)

    @queue.job("some_named")
    def some_named(n: int, **rest: Any) -> None:
        received.append({"n": n, **rest})

    first = anything.enqueue(a=1, b=[2])
    second = queue.enqueue("some_named", {"n": 3, "extra": {"deep": True}})
    assert [getattr(queue.get(i), "payload", None) for i in (first, second)] == [
        {"a": 1, "b": [2]},
        {"n": 3, "extra": {"deep": True}},
    ]
    assert queue.drain() == 2
    assert received == [{"a": 1, "b": [2]}, {"n": 3, "extra": {"deep": True}}]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"lease": 0}, "lease"),
        ({"lease": -3}, "lease"),
        ({"timeout": 0}, "timeout"),
        ({"priority": 40_000}, "priority"),
        ({"backoff": 5}, "backoff"),
    ],
)
def test_registration_refuses_bad_options(
    queue: Queue, options: dict[str, Any], field: str
) -> None:
    with pytest.raises((ConfigurationError, InvalidJob), match=field):
        queue.job("bad", **options)(lambda: None)
    assert "bad" not in queue.definitions


def test_registration_refuses_bad_kinds_and_handlers(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="kind"):
        queue.job("")(lambda: None)
    with pytest.raises(ConfigurationError, match="first parameter"):
        queue.job("no_ctx_param", context=True)(lambda: None)

    def positional_only(n: int, /) -> None: ...

    with pytest.raises(ConfigurationError, match="positional-only"):
        queue.job("posonly")(positional_only)

    queue.job("once")(lambda: None)
    with pytest.raises(ConfigurationError, match="already registered"):
        queue.job("once")(lambda: None)


def test_a_strict_queue_refuses_unregistered_kinds(strict_queue: Queue, probe: Probe) -> None:
    with pytest.raises(UnknownKind, match=r"nobody\.home"):
        strict_queue.enqueue("nobody.home", {})
    with pytest.raises(UnknownKind, match=r"nobody\.home"):
        strict_queue.enqueue_many([NewJob("nobody.home")])
    assert probe.count("jobs") == 0


def test_a_lenient_queue_enqueues_kinds_another_process_handles(queue: Queue) -> None:
    job_id = queue.enqueue("handled.elsewhere", {"x": 1}, priority=2)
    job = queue.get(job_id)
    assert job is not None and job.kind == "handled.elsewhere"


def test_enqueue_many_refuses_anything_but_new_jobs(queue: Queue) -> None:
    with pytest.raises(TypeError, match="NewJob"):
        queue.enqueue_many([{"kind": "x"}])  # type: ignore[list-item]


def test_queue_reads_venturi_dsn(
    database_dsn: str, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VENTURI_DSN", database_dsn)
    with Queue(prefix=queue.prefix, pool_size=1) as from_env:
        assert from_env.stats().kinds == ()


def test_from_pool_shares_and_never_closes_the_pool(database_dsn: str, queue: Queue) -> None:
    with ConnectionPool(database_dsn, min_size=1, max_size=2, open=True) as pool:
        shared = Queue.from_pool(pool, prefix=queue.prefix)

        @shared.job("shared")
        def job() -> int:
            return 1

        job_id = job.enqueue()
        assert shared.drain() == 1
        shared.close()
        assert not pool.closed
        assert queue.get(job_id) is not None


def test_enqueue_joins_the_callers_transaction(database_dsn: str, queue: Queue) -> None:
    @queue.job("tx")
    def tx(n: int) -> None: ...

    with psycopg.connect(database_dsn) as conn:
        kept = queue.enqueue("tx", {"n": 1}, conn=conn)
        conn.commit()
        dropped = queue.enqueue("tx", {"n": 2}, conn=conn)
        conn.rollback()
    assert queue.get(kept) is not None
    assert queue.get(dropped) is None


def test_inspection_and_housekeeping_round_trip(queue: Queue) -> None:
    @queue.job("house", max_attempts=1)
    def house(fail: bool) -> None:
        if fail:
            raise venturi.Fail("asked to")

    ok = house.enqueue(fail=False)
    bad = house.enqueue(fail=True)
    waiting = queue.enqueue("house", {"fail": False}, delay=3600)
    queue.drain()
    assert [j.id for j in queue.history(kind="house", status="dead")] == [bad]
    (kind_stats,) = queue.stats().kinds
    assert (kind_stats.kind, kind_stats.completed, kind_stats.dead) == ("house", 1, 1)
    assert queue.cancel(str(waiting)) and not queue.cancel(waiting)
    assert queue.requeue(bad) and not queue.requeue(bad)
    assert queue.drain() == 1
    assert [e.outcome for e in queue.journal(bad)] == ["dead", "requeued", "dead"]
    assert queue.cancel(ULID()) is False and queue.get(ULID()) is None
    later = queue.store.now() + timedelta(seconds=1)
    assert queue.cleanup(finished_before=later, status="completed") == 1
    assert queue.get(ok) is None and queue.get(bad) is not None


def test_bad_worker_options_are_refused(queue: Queue) -> None:
    @queue.job("w")
    def w() -> None: ...

    cases: list[tuple[dict[str, Any], str]] = [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"priority_floor": 99_999}, "priority_floor"),
        ({"kinds": ["nope"]}, "nope"),
        ({"heartbeat_interval": 30}, "heartbeat_interval"),
        ({"heartbeat_interval": -1}, "heartbeat_interval"),
        ({"prefetch": -1}, "prefetch"),
    ]
    for options, field in cases:
        with pytest.raises((ConfigurationError, InvalidJob), match=field):
            queue.worker(**options).start()
