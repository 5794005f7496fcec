"""OpenTelemetry tracing (extra ``otel``): a producer span per enqueue, a consumer span
per run, joined through the W3C trace context stored with the job.

`instrument(queue)` adds a hook to the queue's store (every enqueue, also of many jobs
and of a workflow, and every settlement) and wraps its job handlers; a queue that is
not instrumented runs none of this code.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import psycopg
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from ulid import ULID

from venturi import __version__
from venturi.client import Queue
from venturi.context import current_job
from venturi.models import JobRecord, NewJob, Outcome
from venturi.outcomes import Pause, Retry
from venturi.registry import JobDefinition
from venturi.settlements import Claim, Settlement
from venturi.store.hooks import EnqueueWrite, Settled, StoreHook

SYSTEM = "venturi"
RUN = "venturi.job.run"
OUTCOME = "venturi.job.outcome"
# Runs whose span waits for its settlement; a run that is never settled (let go after a
# database failure) gives way to the newer ones past this many.
MAX_OPEN_RUNS = 10_000

_w3c = TraceContextTextMapPropagator()


def instrument(queue: Queue, tracer_provider: TracerProvider | None = None) -> Queue:
    """Trace ``queue``'s enqueues and runs (idempotent); returns the queue.

    Call it before starting workers (a worker keeps the store and handlers it was made
    with) and, like any setup, in each process. ``tracer_provider`` defaults to the
    global one. Spans follow OpenTelemetry's messaging conventions: ``send KIND``
    (producer) around each enqueue, whose context is stored with the job, and
    ``process KIND`` (consumer) around each run, a child of it: every run of a job,
    retries included, belongs to the enqueuing request's trace.
    """
    if any(isinstance(hook, TracingHook) for hook in queue.hooks):
        return queue
    tracer = trace.get_tracer("venturi", __version__, tracer_provider=tracer_provider)
    runs = OpenRuns()
    queue.add_hook(TracingHook(tracer, runs))
    queue.definitions = TracedDefinitions(tracer, runs, queue.prefix, queue.definitions)
    return queue


def _common(kind: str, operation: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": kind,
    }


class OpenRuns:
    """The consumer span of each run in flight, by (job id, run number), until the run's
    settlement ends it."""

    def __init__(self) -> None:
        self._spans: OrderedDict[tuple[ULID, int], Span] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, job: JobRecord, span: Span) -> None:
        with self._lock:
            earlier = [k for k in self._spans if k[0] == job.id]
            abandoned = [self._spans.pop(k) for k in earlier]
            self._spans[(job.id, job.run_count)] = span
            while len(self._spans) > MAX_OPEN_RUNS:
                abandoned.append(self._spans.popitem(last=False)[1])
        for stale in abandoned:  # runs never settled: their lease lapsed
            stale.set_attribute(OUTCOME, "abandoned")
            stale.end()

    def take(self, job_id: ULID, run: int) -> Span | None:
        with self._lock:
            return self._spans.pop((job_id, run), None)


@attrs.define(eq=False)
class TracingHook(StoreHook):
    """The hook of an instrumented queue: producer spans around each write of new jobs
    (one, many, or a workflow's), and the end of each run's consumer span when its
    settlement is written (or fenced out)."""

    tracer: trace.Tracer
    runs: OpenRuns

    def around_enqueue(
        self,
        jobs: Sequence[NewJob],
        conn: psycopg.Connection[Any] | None,
        write: EnqueueWrite,
    ) -> list[ULID]:
        with _producing(self.tracer, jobs) as (traced, spans):
            ids = write(traced)
            for span, job_id in zip(spans, ids, strict=True):
                span.set_attribute("messaging.message.id", str(job_id))
            return ids

    def after_settle(self, settled: Sequence[Settled]) -> None:
        for each in settled:
            self._finish(each.claim, each.settlement, each.outcome)

    def _finish(self, claim: Claim, settlement: Settlement, outcome: Outcome | None) -> None:
        span = self.runs.take(claim.job_id, claim.run_count)
        if span is None:
            return
        if outcome is None:
            span.set_attribute(OUTCOME, "fenced")
            span.add_event("fenced", {"venturi.settlement": settlement.action.value})
        else:
            span.set_attribute(OUTCOME, outcome.value)
            if outcome is Outcome.RETRIED:
                span.add_event("retry", _after(settlement))
            elif outcome is Outcome.PAUSED:
                span.add_event("pause", _after(settlement))
            elif outcome is Outcome.DEAD:
                span.set_status(Status(StatusCode.ERROR, "dead"))
        span.end()


@contextmanager
def _producing(
    tracer: trace.Tracer, jobs: Sequence[NewJob]
) -> Iterator[tuple[list[NewJob], list[Span]]]:
    """A producer span per job (siblings, children of the caller's current span), and
    the jobs carrying their span's context to store. The spans end when the block does,
    recording its exception if it raises."""
    spans = [
        tracer.start_span(
            f"send {job.kind}", kind=SpanKind.PRODUCER, attributes=_common(job.kind, "send")
        )
        for job in jobs
    ]
    traced = [
        attrs.evolve(job, trace_context=_context_of(span))
        for job, span in zip(jobs, spans, strict=True)
    ]
    try:
        if len(spans) == 1:  # current while written, for database spans beneath it
            with trace.use_span(spans[0], end_on_exit=False, record_exception=False):
                yield traced, spans
        else:
            yield traced, spans
    except BaseException as exc:
        for span in spans:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        for span in spans:
            span.end()


def _context_of(span: Span) -> dict[str, str]:
    carrier: dict[str, str] = {}
    _w3c.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def _after(settlement: Settlement) -> dict[str, Any]:
    if settlement.at is not None:
        return {"venturi.visible_at": settlement.at.isoformat()}
    return {"venturi.delay_seconds": settlement.delay or 0.0}


class TracedDefinitions(dict[str, JobDefinition]):
    """An instrumented queue's registrations: every handler, also one registered later,
    runs inside its run's consumer span."""

    def __init__(
        self,
        tracer: trace.Tracer,
        runs: OpenRuns,
        prefix: str,
        definitions: Mapping[str, JobDefinition],
    ) -> None:
        super().__init__()
        self.tracer = tracer
        self.runs = runs
        self.prefix = prefix
        for kind, definition in definitions.items():
            self[kind] = definition

    def __setitem__(self, kind: str, definition: JobDefinition) -> None:
        super().__setitem__(kind, attrs.evolve(definition, func=self._traced(definition.func)))

    def update(self, *args: Any, **kwargs: Any) -> None:
        for kind, definition in dict(*args, **kwargs).items():
            self[kind] = definition

    def _traced(self, func: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(func, "__venturi_traced__", False):
            return func

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            ctx = current_job()
            if ctx is None:  # called as a plain function, outside a run
                return func(*args, **kwargs)
            job = ctx.job
            span = self.tracer.start_span(
                f"process {job.kind}",
                context=_w3c.extract(job.trace_context or {}),
                kind=SpanKind.CONSUMER,
                attributes={
                    **_common(job.kind, "process"),
                    "messaging.message.id": str(job.id),
                    RUN: job.run_count,
                    "venturi.queue.prefix": self.prefix,
                },
            )
            self.runs.add(job, span)
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                try:
                    return func(*args, **kwargs)
                except (Retry, Pause):
                    raise
                except BaseException as exc:
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    raise

        run.__venturi_traced__ = True  # type: ignore[attr-defined]
        return run
