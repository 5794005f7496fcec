"""What the ``django.tasks`` backend reads back: task kinds, and a ``TaskResult`` built
from a task's job row and its journal's facts (`JournalRecord.facts`): each run's
``worker`` and the backend's own ``django_task`` facts (start, exception class path,
traceback), and the reaper's ``lost`` for a run its worker lost. Notes are never read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.utils import timezone
from django.utils.module_loading import import_string

from venturi.models import JobRecord, JobStatus, JournalRecord, Outcome

KIND_PREFIX: Final = "django.tasks"
# The key of the backend's own facts in a run's journal facts.
FACTS_KEY: Final = "django_task"
_STATUS: Final = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.WAITING: TaskResultStatus.READY,  # queued behind its parents
    JobStatus.CLAIMED: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}
_FAILED_RUNS: Final = (Outcome.RETRIED, Outcome.DEAD, Outcome.RECOVERED)


class TaskRunLost(Exception):
    """The error recorded for a run its worker lost (it crashed, or its lease lapsed)."""


def task_kind(alias: str, queue_name: str | None) -> str:
    """The venturi kind that carries tasks of a backend alias and queue name; with no
    queue name, the one kind of an alias whose ``QUEUES`` is empty (any name)."""
    if queue_name is None:
        return f"{KIND_PREFIX}:{alias}"
    return f"{KIND_PREFIX}:{alias}:{queue_name}"


def kind_parts(kind: str) -> tuple[str, str | None] | None:
    """(alias, queue name or None) of a task kind; None for any other kind."""
    head, _, rest = kind.partition(":")
    if head != KIND_PREFIX or not rest:
        return None
    alias, _, queue_name = rest.partition(":")
    return alias, queue_name or None


def load_task(job: JobRecord) -> Task[..., Any]:
    """The job's task as it was enqueued (priority, queue and backend included)."""
    parts = kind_parts(job.kind)
    if parts is None:
        raise ValueError(f"{job.kind!r} is not a django.tasks kind")
    alias, queue_name = parts
    path = str(job.payload.get("task"))
    try:
        task = import_string(path)
    except ImportError as exc:
        raise ValueError(f"task {path!r} cannot be imported: {exc}") from None
    if not isinstance(task, Task):
        raise ValueError(f"{path!r} is not a django.tasks Task (decorate it with @task)")
    run_after = job.payload.get("run_after")
    return task.using(
        priority=job.priority,
        queue_name=queue_name or str(job.payload.get("queue_name")),
        backend=alias,
        run_after=None if run_after is None else datetime.fromisoformat(str(run_after)),
    )


def _task_facts(record: JournalRecord) -> Mapping[str, Any] | None:
    """The backend's facts of a run that `run_task` ended, or None."""
    facts = None if record.facts is None else record.facts.get(FACTS_KEY)
    return facts if isinstance(facts, Mapping) else None


def _lost(record: JournalRecord) -> bool:
    """The row is the reaper's, for a run whose worker lost it."""
    return record.facts is not None and bool(record.facts.get("lost"))


def _error(record: JournalRecord, facts: Mapping[str, Any] | None) -> TaskError:
    if facts is not None and facts.get("exception_class_path"):
        return TaskError(
            exception_class_path=str(facts["exception_class_path"]),
            traceback=str(facts.get("traceback", "")),
        )
    return TaskError(
        exception_class_path=f"{TaskRunLost.__module__}.{TaskRunLost.__qualname__}",
        traceback=record.note or "",
    )


def build_result(job: JobRecord, journal: Sequence[JournalRecord]) -> TaskResult[..., Any]:
    """A ``TaskResult`` for a task's job: status, errors, return value, workers, times."""
    errors: list[TaskError] = []
    workers: list[str] = []
    starts: list[datetime] = []
    value: Any = None
    for record in journal:
        facts = _task_facts(record)
        lost = facts is None and _lost(record)
        if facts is not None or lost:
            workers.append(str((record.facts or {}).get("worker")))
        if facts is not None:
            starts.append(datetime.fromisoformat(str(facts["started_at"])))
        if record.outcome in _FAILED_RUNS and (facts is not None or lost):
            errors.append(_error(record, facts))
        if record.outcome is Outcome.COMPLETED:
            value = record.attachment
    if job.status is JobStatus.CLAIMED and job.claimed_by is not None:
        workers.append(job.claimed_by)
    task = load_task(job)
    result: TaskResult[..., Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=_STATUS[job.status],
        enqueued_at=django_time(job.id.datetime),
        started_at=starts[0] if starts else None,
        last_attempted_at=starts[-1] if starts else None,
        finished_at=None if job.finished_at is None else django_time(job.finished_at),
        args=list(job.payload.get("args", [])),
        kwargs=dict(job.payload.get("kwargs", {})),
        backend=task.backend,
        errors=errors,
        worker_ids=workers,
    )
    return with_value(result, value)


def django_time(moment: datetime) -> datetime:
    """A database or id time as Django hands times out: naive local with USE_TZ off."""
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def evolve(result: TaskResult[..., Any], **changes: Any) -> TaskResult[..., Any]:
    """A copy of a frozen ``TaskResult`` with some fields changed (no return value)."""
    return dataclasses.replace(result, **changes)


def with_value(result: TaskResult[..., Any], value: Any) -> TaskResult[..., Any]:
    # TaskResult keeps the return value in a field outside __init__; Django's own
    # backends set it the same way.
    object.__setattr__(result, "_return_value", value)
    return result
