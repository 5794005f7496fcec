"""Tracing covers a workflow's jobs as it covers a plain enqueue: a producer span per
job, its context stored with the job, and each run's consumer span its child."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from venturi import NewJob, Queue
from venturi.contrib.otel import instrument


@pytest.fixture
def queue(database_dsn: str, prefix: str, provider: TracerProvider) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=2)
    instance.migrate()

    @instance.job("step")
    def step(name: str) -> str:
        return name

    instrument(instance, provider)
    yield instance
    instance.close()


def _span_id(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id


@pytest.mark.parametrize("how", ["workflow", "enqueue_many_after"])
def test_workflow_jobs_are_traced_and_their_runs_continue_the_trace(
    queue: Queue, provider: TracerProvider, exporter: InMemorySpanExporter, how: str
) -> None:
    with provider.get_tracer("app").start_as_current_span("POST /report") as request:
        if how == "workflow":
            with queue.workflow() as flow:
                first = flow.add("step", name="first")
                flow.add("step", depends_on=[first], name="second")
            ids = flow.ids
        else:
            parent = queue.enqueue("step", {"name": "first"})
            ids = [
                parent,
                *queue.enqueue_many([NewJob("step", {"name": "2"}, depends_on=[parent])]),
            ]
    sends = [s for s in exporter.get_finished_spans() if s.name == "send step"]
    assert sorted(str((s.attributes or {})["messaging.message.id"]) for s in sends) == sorted(
        str(i) for i in ids
    )
    request_id = request.get_span_context().span_id
    assert all(s.kind is SpanKind.PRODUCER for s in sends)
    assert all(s.parent is not None and s.parent.span_id == request_id for s in sends)
    by_job = {str((s.attributes or {})["messaging.message.id"]): s for s in sends}
    for job_id in ids:
        record = queue.get(job_id)
        assert record is not None and record.trace_context is not None
        trace_id, send_id = _span_id(by_job[str(job_id)])
        assert record.trace_context["traceparent"].startswith(f"00-{trace_id:032x}-{send_id:016x}-")
    assert queue.drain() == 2
    processes = [s for s in exporter.get_finished_spans() if s.name == "process step"]
    assert {s.parent.span_id for s in processes if s.parent} == {_span_id(s)[1] for s in sends}
