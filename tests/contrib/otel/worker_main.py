"""A worker in its own process for the tracing tests: it instruments its own queue,
runs jobs until the given job completes, then writes its finished spans to a file as
JSON lines. Nothing but the database connects it to the test process.

    python -m tests.contrib.otel.worker_main DSN PREFIX JOB_ID OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.contrib.otel.jobs import register
from tests.support import wait_until
from venturi import JobStatus, Queue
from venturi.contrib.otel import instrument


def as_json(span: ReadableSpan) -> dict[str, object]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": context.trace_id,
        "span_id": context.span_id,
        "parent_id": span.parent.span_id if span.parent else None,
        "attributes": dict(span.attributes or {}),
        "events": [event.name for event in span.events],
        "status": span.status.status_code.name,
    }


def main(dsn: str, prefix: str, job_id: str, out: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Queue(dsn, prefix=prefix, pool_size=4) as queue:
        register(queue)
        instrument(queue, provider)
        with queue.worker(concurrency=2, poll_interval=0.2):
            wait_until(
                lambda: (record := queue.get(job_id)) and record.status is JobStatus.COMPLETED,
                timeout=60,
                what=f"job {job_id} to complete",
            )
    lines = [json.dumps(as_json(span)) for span in exporter.get_finished_spans()]
    Path(out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
