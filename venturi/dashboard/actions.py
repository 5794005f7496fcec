"""The dashboard's actions, through the same `Queue` operations as the CLI; each
returns the notice the next page shows."""

from __future__ import annotations

import json

from venturi.client import Queue
from venturi.errors import InvalidJob, first_line
from venturi.flow.limits import checked_kinds


def on_job(queue: Queue, job_id: str, action: str) -> str:
    """Cancel, requeue or retry now one job (as `venturi cancel` / `venturi requeue`)."""
    record = queue.get(job_id)
    if record is None:
        raise InvalidJob(f"no job {job_id}")
    if action == "cancel":
        if queue.cancel(job_id):
            return f"cancelled {job_id}"
        return f"job {job_id} is {record.status.value}: only unfinished jobs can be cancelled"
    if action == "requeue":
        if queue.requeue(job_id):
            return f"requeued {job_id}"
        return f"job {job_id} is {record.status.value}: only finished jobs can be requeued"
    if queue.retry_now(job_id):
        return f"{job_id} is due now"
    return (
        f"job {job_id} is {record.status.value}: only a pending job due later can be made due now"
    )


def signal(queue: Queue, job_id: str, name: str, payload: str) -> str:
    """Send signal ``name`` with a JSON ``payload`` (empty: null) to one job (as
    `venturi signal`)."""
    try:
        value = json.loads(payload) if payload.strip() else None
    except (ValueError, RecursionError) as exc:
        raise InvalidJob(f"signal payload is not valid JSON: {first_line(exc)}") from None
    woke = queue.signal(job_id, name, value)
    return f"signalled {job_id} {name}" + (" (woke it)" if woke else "")


def on_kind(queue: Queue, kind: str, action: str) -> str:
    """Pause or resume one kind (as `venturi pause` / `venturi resume`)."""
    (kind,) = checked_kinds([kind])
    if action == "pause":
        return f"paused {kind}" if queue.pause(kind) else f"{kind} was already paused"
    return f"resumed {kind}" if queue.resume(kind) else f"{kind} was not paused"


def requeue_dead(queue: Queue, kind: str) -> str:
    """Requeue every dead job of ``kind`` (as `venturi requeue --all-dead --kind`)."""
    (kind,) = checked_kinds([kind])
    return f"requeued {queue.requeue_dead(kind=kind)} dead {kind} jobs"
