"""What each dashboard page shows, read from a `Queue`: plain data for the templates."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import attrs
from ulid import ULID

from venturi import upkeep
from venturi.client import Queue
from venturi.dashboard.http import BadRequest, refuse_controls
from venturi.errors import InvalidJob, VenturiError
from venturi.models import (
    HistoryCursor,
    HistoryFilter,
    JobRecord,
    JobStatus,
    to_uuid,
    validate_kind,
)
from venturi.observations import Throughput

logger = logging.getLogger("venturi.dashboard")

PAGE_SIZE: Final = 50
CHART_MINUTES: Final = 60
CHART_BUCKET: Final = 5
DEAD_SAMPLE: Final = 500
STATUSES: Final = tuple(s.value for s in JobStatus)
HELD_AFTER: Final = upkeep.HELD_AFTER
DEAD_ROWS: Final = upkeep.DEAD_ROWS


@attrs.frozen
class Bar:
    """One bucket of a kind's chart: heights in percent of the tallest bucket."""

    start: datetime
    completed: int
    failed: int
    completed_height: float
    failed_height: float


def chart(throughput: Throughput, kind: str) -> list[Bar]:
    """``kind``'s buckets over the whole window (empty ones included), oldest first."""
    count = throughput.window_minutes // throughput.bucket_minutes
    first = throughput.taken_at - timedelta(minutes=throughput.window_minutes)
    step = timedelta(minutes=throughput.bucket_minutes)
    found = {int((b.start - first) / step): b for b in throughput.buckets if b.kind == kind}
    tallest = max([b.completed + b.failed for b in found.values()] or [0]) or 1
    bars = []
    for index in range(count):
        bucket = found.get(index)
        done, failed = (bucket.completed, bucket.failed) if bucket else (0, 0)
        bars.append(
            Bar(first + index * step, done, failed, 100 * done / tallest, 100 * failed / tallest)
        )
    return bars


def overview(queue: Queue) -> dict[str, Any]:
    figures = queue.overview()
    throughput = queue.throughput(CHART_MINUTES, CHART_BUCKET)
    kinds = sorted({k.kind for k in figures.kinds} | {b.kind for b in throughput.buckets})
    by_kind = {k.kind: k for k in figures.kinds}
    rows = []
    for kind in kinds:
        completed, failed = throughput.totals(kind)
        runs = completed + failed
        rows.append(
            {
                "figures": by_kind.get(kind),
                "kind": kind,
                "completed_hour": completed,
                "failed_hour": failed,
                "failure_rate": None if runs == 0 else failed / runs,
                "bars": chart(throughput, kind),
            }
        )
    return {
        "overview": figures,
        "rows": rows,
        "throughput": throughput,
        "vacuum_warnings": vacuum_warnings(queue),
    }


def vacuum_warnings(queue: Queue) -> list[str]:
    """What keeps VACUUM from cleaning the jobs table (`VacuumHealth.warnings` at the
    thresholds `venturi healthcheck` warns at by default); none when it cannot be read,
    which must not take the overview down with it. Read on the queue's own connections:
    the primary, whose horizon its vacuums obey."""
    try:
        return queue.vacuum_health().warnings(HELD_AFTER, DEAD_ROWS)
    except VenturiError as exc:
        logger.warning("the dashboard could not read what holds back vacuum: %s", exc)
        return []


def _status(value: str) -> JobStatus | None:
    if not value:
        return None
    if value not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}, got {value!r}")
    return JobStatus(value)


def _kind(value: str) -> str | None:
    if not value:
        return None
    try:
        return validate_kind(value)
    except InvalidJob as exc:
        raise BadRequest(f"query parameter {exc}") from None


def _cursor(value: str) -> HistoryCursor | None:
    if not value:
        return None
    try:
        return HistoryCursor(value)
    except InvalidJob as exc:
        raise BadRequest(f"before must be a job id: {exc}") from None


def checked_query(query: Mapping[str, str]) -> dict[str, str]:
    """The query's fields stripped, refused (`BadRequest`) if any holds a control
    character: none can be meant, and PostgreSQL refuses a NUL in text."""
    return {
        refuse_controls("a query parameter's name", name): refuse_controls(name, value.strip())
        for name, value in query.items()
    }


def jobs(queue: Queue, query: Mapping[str, str], page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """A keyset page of jobs (filtered by kind and status), or the jobs found by id or
    dedup key. ``before`` is the id the previous page ended at. A bad field raises
    `BadRequest` naming it."""
    fields = checked_query(query)
    kind = _kind(fields.get("kind", ""))
    status = _status(fields.get("status", ""))
    found = fields.get("find", "")
    records: list[JobRecord]
    page_end = None
    if found:
        records = _find(queue, found, kind, page_size)
    else:
        cursor = _cursor(fields.get("before", ""))
        records = queue.reads.history(HistoryFilter(kind=kind, status=status), cursor, page_size)
        if len(records) == page_size:
            page_end = str(records[-1].id)
    return {
        "records": records,
        "kind": kind or "",
        "status": "" if status is None else status.value,
        "find": found,
        "page_end": page_end,
        "kinds": sorted({k.kind for k in queue.overview().kinds}),
        "statuses": STATUSES,
    }


def _find(queue: Queue, text: str, kind: str | None, limit: int) -> list[JobRecord]:
    """The job with id ``text`` if it is one, else the unfinished jobs holding it as
    dedup key."""
    try:
        to_uuid(text)
    except InvalidJob:
        pass
    else:
        record = queue.get(text)
        if record is not None:
            return [record]
    return queue.reads.jobs_by_dedup_key(text, kind, limit)


def job(queue: Queue, job_id: str) -> dict[str, Any] | None:
    record = queue.get(job_id)
    if record is None:
        return None
    journal = queue.journal(job_id)
    results = [e.attachment for e in journal if e.outcome.value == "completed"]
    return {
        "job": record,
        "journal": journal,
        "result": results[-1] if results else None,
        "has_result": bool(results),
        "now": queue.now(),
    }


def dead(queue: Queue) -> dict[str, Any]:
    groups = queue.dead_groups(DEAD_SAMPLE)
    return {"groups": groups, "sample": DEAD_SAMPLE, "kinds": sorted({g.kind for g in groups})}


def workers(queue: Queue) -> dict[str, Any]:
    return {"workers": queue.workers()}


def kinds(queue: Queue) -> dict[str, Any]:
    found = queue.kinds()
    fair = [k.kind for k in found if k.limits.fair]
    return {
        "kinds": found,
        "known": sorted({k.kind for k in queue.overview().kinds}),
        "fair_keys": queue.fair_keys(fair, limit=FAIR_KEYS_SHOWN) if fair else {},
        "weights": queue.weights() if fair else {},
    }


# The keys of each fair kind the kinds page lists: those with the most due jobs.
FAIR_KEYS_SHOWN: Final = 10


def schedules(queue: Queue) -> dict[str, Any]:
    return {"schedules": queue.schedule_rows()}


def workflow(queue: Queue, workflow_id: str) -> dict[str, Any] | None:
    status = queue.workflow_status(workflow_id)
    if not status.jobs:
        return None
    return {"workflow": status, "counts": status.counts()}


def parsed_id(text: str) -> ULID | None:
    """``text`` as a job id, or None if it is not one."""
    try:
        return ULID.from_uuid(to_uuid(text))
    except InvalidJob:
        return None
