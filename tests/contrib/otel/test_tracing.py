"""OpenTelemetry tracing with the SDK's in-memory exporter, across real enqueues and
runs: in a worker thread, in drain, and in another process (the trace context travels
through the database)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.contrib.otel.jobs import register
from tests.support import wait_until
from venturi import JobStatus, NewJob, Queue
from venturi.contrib.otel import OpenRuns, instrument

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def queue(database_dsn: str, prefix: str, provider: TracerProvider) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=4)
    instance.migrate()
    register(instance)
    instrument(instance, provider)
    yield instance
    instance.close()


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _ids(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id


def test_runs_in_a_worker_thread_continue_the_enqueuing_trace(
    queue: Queue, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("app").start_as_current_span("POST /checkout") as request:
        job_id = queue.enqueue("shop.flaky", {"order": 7})
    with queue.worker(concurrency=2, poll_interval=0.2):
        wait_until(lambda: len(_spans(exporter, "process shop.flaky")) == 2, what="two traced runs")
    [send] = _spans(exporter, "send shop.flaky")
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "venturi",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "shop.flaky",
        "messaging.message.id": str(job_id),
    }
    record = queue.get(job_id)
    assert record is not None and record.trace_context is not None
    trace_id, send_id = _ids(send)
    assert record.trace_context["traceparent"].startswith(f"00-{trace_id:032x}-{send_id:016x}-")

    first, second = sorted(_spans(exporter, "process shop.flaky"), key=lambda s: s.start_time or 0)
    for run, span in enumerate((first, second), start=1):
        assert span.kind is SpanKind.CONSUMER
        assert _ids(span)[0] == trace_id  # every run belongs to the request's trace
        assert span.parent is not None and span.parent.span_id == send_id
        attributes = dict(span.attributes or {})
        assert attributes["messaging.operation.type"] == "process"
        assert attributes["messaging.destination.name"] == "shop.flaky"
        assert attributes["messaging.message.id"] == str(job_id)
        assert attributes["venturi.job.run"] == run
    assert first.attributes is not None and first.attributes["venturi.job.outcome"] == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert [e.name for e in first.events] == ["exception", "retry"]
    exception = first.events[0].attributes or {}
    assert exception["exception.type"] == "RuntimeError"
    assert "payment service timed out" in str(exception["exception.message"])
    assert second.attributes is not None and second.attributes["venturi.job.outcome"] == "completed"
    assert second.status.status_code is StatusCode.UNSET and not second.events


def test_runs_whose_places_pass_on_end_their_spans(
    queue: Queue, exporter: InMemorySpanExporter
) -> None:
    queue.enqueue_many([NewJob("shop.limited", {"n": n}) for n in range(3)])
    with queue.worker(concurrency=2, poll_interval=0.2):
        wait_until(lambda: len(_spans(exporter, "process shop.limited")) == 3, what="3 runs")
    outcomes = [
        (s.attributes or {}).get("venturi.job.outcome")
        for s in exporter.get_finished_spans()
        if s.name == "process shop.limited"
    ]
    assert outcomes == ["completed"] * 3


def test_pause_dead_and_fenced_runs_in_drain(queue: Queue, exporter: InMemorySpanExporter) -> None:
    paused = queue.enqueue("shop.pausing")
    queue.enqueue("shop.poison")
    queue.enqueue("shop.cancelling")
    queue.drain()
    pausing = sorted(_spans(exporter, "process shop.pausing"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["venturi.job.outcome"] for s in pausing] == ["paused", "completed"]
    assert [e.name for e in pausing[0].events] == ["pause"]
    assert {_ids(s)[0] for s in pausing} == {_ids(_spans(exporter, "send shop.pausing")[0])[0]}
    record = queue.get(paused)
    assert record is not None and record.status is JobStatus.COMPLETED

    [poison] = _spans(exporter, "process shop.poison")
    assert (poison.attributes or {})["venturi.job.outcome"] == "dead"
    assert poison.status.status_code is StatusCode.ERROR
    assert [e.name for e in poison.events] == ["exception"]

    [cancelling] = _spans(exporter, "process shop.cancelling")
    assert (cancelling.attributes or {})["venturi.job.outcome"] == "fenced"
    assert [e.name for e in cancelling.events] == ["fenced"]


def test_enqueue_many_gives_each_job_a_sibling_producer_span(
    queue: Queue, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("app").start_as_current_span("batch") as batch:
        ids = queue.enqueue_many([NewJob("shop.noop"), NewJob("shop.noop")])
    sends = _spans(exporter, "send shop.noop")
    assert sorted(str((s.attributes or {})["messaging.message.id"]) for s in sends) == sorted(
        str(i) for i in ids
    )
    batch_id = batch.get_span_context().span_id
    assert all(s.parent is not None and s.parent.span_id == batch_id for s in sends)
    queue.drain()
    processes = _spans(exporter, "process shop.noop")
    assert {s.parent.span_id for s in processes if s.parent} == {_ids(s)[1] for s in sends}


def test_a_worker_in_another_process_continues_the_trace_from_the_database(
    queue: Queue,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    database_dsn: str,
    tmp_path: Path,
) -> None:
    with provider.get_tracer("app").start_as_current_span("POST /checkout"):
        job_id = queue.enqueue("shop.flaky", {"order": 9})
    trace_id, send_id = _ids(_spans(exporter, "send shop.flaky")[0])
    out = tmp_path / "spans.jsonl"
    worker = ["-m", "tests.contrib.otel.worker_main", database_dsn, queue.prefix, str(job_id)]
    subprocess.run(
        [sys.executable, *worker, str(out)],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    spans = [json.loads(line) for line in out.read_text().splitlines()]
    runs = sorted(
        (s for s in spans if s["name"] == "process shop.flaky"),
        key=lambda s: int(s["attributes"]["venturi.job.run"]),
    )
    assert [s["attributes"]["venturi.job.outcome"] for s in runs] == ["retried", "completed"]
    assert all(s["trace_id"] == trace_id and s["parent_id"] == send_id for s in runs)
    assert runs[0]["events"] == ["exception", "retry"] and runs[0]["status"] == "ERROR"


def test_an_uninstrumented_queue_stores_no_context(database_dsn: str, prefix: str) -> None:
    with Queue(database_dsn, prefix=prefix, pool_size=2) as plain:
        plain.migrate()
        register(plain)
        job_id = plain.enqueue("shop.noop")
        record = plain.get(job_id)
        assert record is not None and record.trace_context is None
        assert type(plain.store).__name__ == "PostgresStore"


def test_instrument_is_idempotent_and_handlers_stay_plain_functions(
    queue: Queue, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = queue.store
    assert instrument(queue, provider) is queue and queue.store is store
    queue.enqueue("shop.noop")
    queue.drain()
    assert len(_spans(exporter, "send shop.noop")) == 1
    assert len(_spans(exporter, "process shop.noop")) == 1

    @queue.job("shop.later")
    def later() -> str:
        return "registered after instrument"

    assert later() == "registered after instrument"  # outside a run: no span
    queue.enqueue("shop.later")
    queue.drain()
    assert len(_spans(exporter, "process shop.later")) == 1


def test_a_run_never_settled_is_ended_as_abandoned_by_the_next_run(
    queue: Queue, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A run let go (its settlement could not be written) leaves its span open; the job's
    next run ends it, so spans never pile up."""
    job_id = queue.enqueue("shop.noop")
    tracer = provider.get_tracer("test")
    runs = OpenRuns()
    [first] = queue.store.claim("w", {"shop.noop": 30.0}, 1)
    runs.add(first, tracer.start_span("process shop.noop"))
    assert _spans(exporter, "process shop.noop") == []
    second = attrs.evolve(first, run_count=2)
    runs.add(second, tracer.start_span("process shop.noop"))
    [ended] = [s for s in exporter.get_finished_spans() if s.name == "process shop.noop"]
    assert (ended.attributes or {})["venturi.job.outcome"] == "abandoned"
    assert runs.take(job_id, 1) is None and runs.take(job_id, 2) is not None


def test_a_transactional_run_ends_its_span_completed_or_fenced(
    queue: Queue, exporter: InMemorySpanExporter
) -> None:
    queue.enqueue("shop.transactional")
    queue.enqueue("shop.transactional", {"cancel": True})
    assert queue.drain() == 2
    spans = _spans(exporter, "process shop.transactional")
    outcomes = sorted(str((s.attributes or {})["venturi.job.outcome"]) for s in spans)
    assert outcomes == ["completed", "fenced"]
