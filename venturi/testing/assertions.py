"""Assertions on what was enqueued, read from the queue's real tables.

"Enqueued" means waiting to run: pending, whether due now or scheduled for later (a job
that already ran, as in inline mode or after `drain`, is no longer enqueued)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs
import psycopg

from venturi.client import Queue
from venturi.durations import Duration, require_aware, to_seconds
from venturi.models import JobRecord

DEFAULT_TOLERANCE = 1.0
LISTED_AT_MOST = 20


def enqueued(
    queue: Queue, kind: str | None = None, *, conn: psycopg.Connection[Any] | None = None
) -> list[JobRecord]:
    """The jobs waiting to run (of ``kind``, or all), oldest first. With ``conn`` they are
    read on that connection, so an open transaction sees the jobs it enqueued itself."""
    return queue.store.reads.pending_jobs(kind, conn)


def assert_enqueued(
    queue: Queue,
    kind: str,
    payload: Mapping[str, Any] | None = None,
    *,
    count: int | None = None,
    priority: int | None = None,
    delay: Duration | None = None,
    at: datetime | None = None,
    tolerance: Duration = DEFAULT_TOLERANCE,
    conn: psycopg.Connection[Any] | None = None,
) -> list[JobRecord]:
    """Fail unless a job of ``kind`` waits to run whose payload contains ``payload``
    (a subset: those keys with those values), at ``priority``, due ``delay`` after it
    was enqueued or at ``at`` (within ``tolerance`` seconds). With ``count``, exactly
    that many such jobs. Returns the matching jobs. The failure message lists every job
    that is enqueued."""
    __tracebackhide__ = True  # pytest shows the failing assert_enqueued call, not this
    wanted = _Wanted.of(kind, payload, priority=priority, delay=delay, at=at, tolerance=tolerance)
    jobs = enqueued(queue, conn=conn)
    matching = [job for job in jobs if wanted.matches(job)]
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        if len(matching) != count:
            found = f"found {len(matching)}"
            raise AssertionError(_message(f"expected {count} {wanted}; {found}", jobs))
    elif not matching:
        raise AssertionError(_message(f"expected {wanted}; found none", jobs))
    return matching


def refute_enqueued(
    queue: Queue,
    kind: str,
    payload: Mapping[str, Any] | None = None,
    *,
    priority: int | None = None,
    delay: Duration | None = None,
    at: datetime | None = None,
    tolerance: Duration = DEFAULT_TOLERANCE,
    conn: psycopg.Connection[Any] | None = None,
) -> None:
    """Fail if a job matching these terms (as for `assert_enqueued`) waits to run."""
    __tracebackhide__ = True
    wanted = _Wanted.of(kind, payload, priority=priority, delay=delay, at=at, tolerance=tolerance)
    jobs = enqueued(queue, conn=conn)
    matching = [job for job in jobs if wanted.matches(job)]
    if matching:
        raise AssertionError(
            _message(f"expected no {wanted}; found {len(matching)}", jobs, matching)
        )


@attrs.frozen(kw_only=True)
class _Wanted:
    """The terms a job must meet."""

    kind: str
    payload: dict[str, Any]
    priority: int | None
    delay: float | None
    at: datetime | None
    tolerance: float

    @classmethod
    def of(
        cls,
        kind: str,
        payload: Mapping[str, Any] | None,
        *,
        priority: int | None,
        delay: Duration | None,
        at: datetime | None,
        tolerance: Duration,
    ) -> _Wanted:
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"kind must be a non-empty string, got {kind!r}")
        if payload is not None and not isinstance(payload, Mapping):
            raise TypeError(f"payload must be a mapping (the keys to match), got {payload!r}")
        if delay is not None and at is not None:
            raise ValueError("give delay or at, not both")
        return cls(
            kind=kind,
            payload=dict(payload or {}),
            priority=priority,
            delay=None if delay is None else to_seconds(delay, "delay"),
            at=None if at is None else require_aware(at, "at"),
            tolerance=to_seconds(tolerance, "tolerance"),
        )

    def matches(self, job: JobRecord) -> bool:
        if job.kind != self.kind:
            return False
        if any(job.payload.get(k, _ABSENT) != v for k, v in self.payload.items()):
            return False
        if self.priority is not None and job.priority != self.priority:
            return False
        if self.delay is not None:
            waited = (job.visible_at - job.created_at).total_seconds()
            if abs(waited - self.delay) > self.tolerance:
                return False
        if self.at is not None:
            return abs((job.visible_at - self.at).total_seconds()) <= self.tolerance
        return True

    def __str__(self) -> str:
        terms = [f"job of kind {self.kind!r}"]
        if self.payload:
            terms.append(f"with payload containing {_json(self.payload)}")
        if self.priority is not None:
            terms.append(f"at priority {self.priority}")
        if self.delay is not None:
            terms.append(f"due {self.delay:g}s after enqueue (±{self.tolerance:g}s)")
        if self.at is not None:
            terms.append(f"due at {self.at.isoformat()} (±{self.tolerance:g}s)")
        return " ".join(terms)


_ABSENT = object()


def _message(summary: str, jobs: list[JobRecord], marked: Sequence[JobRecord] = ()) -> str:
    if not jobs:
        return f"{summary}.\nNothing is enqueued."
    lines = [f"{summary}.", f"Enqueued ({len(jobs)}):"]
    for job in jobs[:LISTED_AT_MOST]:
        lines.append(("* " if job in marked else "  ") + _describe(job))
    if len(jobs) > LISTED_AT_MOST:
        lines.append(f"  … and {len(jobs) - LISTED_AT_MOST} more")
    return "\n".join(lines)


def _describe(job: JobRecord) -> str:
    due = (job.visible_at - job.created_at).total_seconds()
    when = "due at enqueue" if due <= 0 else f"due {due:g}s after enqueue"
    return (
        f"{job.kind} {_json(job.payload)} priority={job.priority} {when} "
        f"({job.visible_at.isoformat()}) id={job.id}"
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
