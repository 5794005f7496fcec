"""A backend for Django's Tasks framework (``django.tasks``, Django 6.0+) on venturi.

```python
TASKS = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend",
                     "QUEUES": ["default"], "OPTIONS": {"MAX_ATTEMPTS": 3}}}
```

Each (backend alias, queue name) is one venturi kind, ``django.tasks:ALIAS:QUEUE``, run
by `run_task`, which imports the task by its module path. Django's priority (-100..100)
is venturi's priority unchanged (higher runs first). Enqueueing joins the current
``transaction.atomic()`` block of the queue's database. Failures are retried with
backoff up to ``MAX_ATTEMPTS``; a worker that dies mid-run has its task taken back by
the reaper. Each run writes one journal line of facts (worker, start, exception class)
from which `VenturiBackend.get_result` rebuilds ``errors``, ``worker_ids`` and times.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, ParamSpec, TypeVar, cast

import attrs
from django.conf import settings
from django.core import checks
from django.tasks import DEFAULT_TASK_QUEUE_NAME, Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string
from ulid import ULID

from venturi.context import JobContext
from venturi.errors import ConfigurationError, InvalidJob
from venturi.models import JobRecord, JobStatus, JournalRecord, Outcome
from venturi.outcomes import Fail, Pause, Retry
from venturi.registry import DEFAULT_LEASE

from .conf import SettingsError
from .queue import enqueue, get_queue, registry
from .queue import job as register_job

P = ParamSpec("P")
R = TypeVar("R")

KIND_PREFIX: Final = "django.tasks"
_HEADER: Final = "django-task "  # first line of each run's journal note, then JSON facts
_LOST: Final = re.compile(r"^lease held by (.+?) expired")
_STATUS: Final = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.CLAIMED: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}
_FAILED_RUNS: Final = (Outcome.RETRIED, Outcome.DEAD, Outcome.RECOVERED)


class TaskRunLost(Exception):
    """The error recorded for a run its worker lost (it crashed, or its lease lapsed)."""


def task_kind(alias: str, queue_name: str) -> str:
    """The venturi kind that carries tasks of a backend alias and queue name."""
    return f"{KIND_PREFIX}:{alias}:{queue_name}"


@attrs.frozen
class BackendOptions:
    """A venturi backend's ``OPTIONS``: ``MAX_ATTEMPTS``, ``LEASE`` and ``TIMEOUT`` (s)."""

    max_attempts: int = 5
    lease: float = DEFAULT_LEASE
    timeout: float | None = None

    @classmethod
    def from_params(cls, alias: str, options: Mapping[str, Any]) -> BackendOptions:
        known = {"MAX_ATTEMPTS": "max_attempts", "LEASE": "lease", "TIMEOUT": "timeout"}
        unknown = sorted(str(k) for k in options if k not in known)
        if unknown:
            raise SettingsError(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {', '.join(unknown)}; "
                f"known: {', '.join(known)}"
            )
        return cls(**{known[k]: v for k, v in options.items()})


_register_lock = threading.Lock()


def register_backend(alias: str, params: Mapping[str, Any]) -> None:
    """Register `run_task` for each of the backend's queues (once per kind)."""
    options = BackendOptions.from_params(alias, params.get("OPTIONS") or {})
    queues = list(params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]))
    if not queues:
        raise SettingsError(
            f"TASKS[{alias!r}]['QUEUES'] must list the queue names: venturi workers claim "
            "only kinds they know"
        )
    with _register_lock:
        for name in queues:
            kind = task_kind(alias, name)
            if kind in registry.kinds:
                continue
            try:
                register_job(
                    kind,
                    max_attempts=options.max_attempts,
                    lease=options.lease,
                    timeout=options.timeout,
                    context=True,
                )(run_task)
            except (InvalidJob, ConfigurationError) as exc:
                raise SettingsError(f"TASKS[{alias!r}] queue {name!r}: {exc}") from None


def register_configured_backends() -> None:
    """Register the kinds of every ``TASKS`` entry that uses `VenturiBackend`."""
    for alias, params in (getattr(settings, "TASKS", None) or {}).items():
        try:
            backend = import_string(params["BACKEND"])
        except (ImportError, KeyError):
            continue  # Django's own task checks report a broken entry
        if isinstance(backend, type) and issubclass(backend, VenturiBackend):
            register_backend(alias, params)


class VenturiBackend(BaseTaskBackend):
    """Runs ``django.tasks`` tasks on venturi workers (``manage.py venturi worker``)."""

    supports_defer = True
    supports_async_task = False
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        register_backend(alias, params)

    def enqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue inside Django's current transaction on the queue's database."""
        self.validate_task(task)
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)  # USE_TZ = False: local time
        json_args = cast(list[Any], normalize_json(list(args)))
        json_kwargs = cast(dict[str, Any], normalize_json(dict(kwargs)))
        payload = {"task": task.module_path, "args": json_args, "kwargs": json_kwargs}
        job_id = enqueue(
            task_kind(self.alias, task.queue_name), payload, priority=task.priority, at=run_after
        )
        result: TaskResult[P, R] = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=json_args,
            kwargs=json_kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """The task's state from its job row and journal; `TaskResultDoesNotExist` if none."""
        try:
            job_id = ULID.from_str(result_id)
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        queue = get_queue()
        job = queue.get(job_id)
        if job is None or not job.kind.startswith(f"{KIND_PREFIX}:{self.alias}:"):
            raise TaskResultDoesNotExist(result_id)
        return build_result(job, queue.journal(job_id))

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        if "venturi.contrib.django" in settings.INSTALLED_APPS:
            return []
        return [
            checks.Error(
                "VenturiBackend needs 'venturi.contrib.django' in INSTALLED_APPS",
                hint="it provides `manage.py venturi worker`, which runs the tasks",
                id="venturi.E001",
            )
        ]


def _load_task(job: JobRecord) -> Task[..., Any]:
    """The job's task as it was enqueued (priority, queue and backend included)."""
    _, alias, queue_name = job.kind.split(":", 2)
    path = str(job.payload.get("task"))
    try:
        task = import_string(path)
    except ImportError as exc:
        raise ValueError(f"task {path!r} cannot be imported: {exc}") from None
    if not isinstance(task, Task):
        raise ValueError(f"{path!r} is not a django.tasks Task (decorate it with @task)")
    return task.using(priority=job.priority, queue_name=queue_name, backend=alias)


def _facts(record: JournalRecord) -> dict[str, Any] | None:
    if record.note is None or not record.note.startswith(_HEADER):
        return None
    first = record.note.split("\n", 1)[0]
    try:
        facts = json.loads(first.removeprefix(_HEADER))
    except ValueError:
        return None
    return facts if isinstance(facts, dict) else None


def _error(record: JournalRecord, facts: dict[str, Any] | None) -> TaskError:
    note = record.note or ""
    if facts is not None and facts.get("exception_class_path"):
        return TaskError(
            exception_class_path=str(facts["exception_class_path"]),
            traceback=note.split("\n", 1)[1] if "\n" in note else "",
        )
    return TaskError(
        exception_class_path=f"{TaskRunLost.__module__}.{TaskRunLost.__qualname__}",
        traceback=note,
    )


def build_result(job: JobRecord, journal: Sequence[JournalRecord]) -> TaskResult[..., Any]:
    """A ``TaskResult`` for a task's job: status, errors, return value, workers, times."""
    errors: list[TaskError] = []
    workers: list[str] = []
    starts: list[datetime] = []
    value: Any = None
    for record in journal:
        facts = _facts(record)
        lost = _LOST.match(record.note or "") if facts is None else None
        if facts is not None:
            workers.append(str(facts.get("worker_id")))
            starts.append(datetime.fromisoformat(str(facts["started_at"])))
        elif lost is not None:
            workers.append(lost.group(1))
        if record.outcome in _FAILED_RUNS and (facts is not None or lost is not None):
            errors.append(_error(record, facts))
        if record.outcome is Outcome.COMPLETED:
            value = record.attachment
    if job.status is JobStatus.CLAIMED and job.claimed_by is not None:
        workers.append(job.claimed_by)
    result: TaskResult[..., Any] = TaskResult(
        task=_load_task(job),
        id=str(job.id),
        status=_STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=starts[0] if starts else None,
        last_attempted_at=starts[-1] if starts else None,
        finished_at=job.finished_at,
        args=list(job.payload.get("args", [])),
        kwargs=dict(job.payload.get("kwargs", {})),
        backend=job.kind.split(":", 2)[1],
        errors=errors,
        worker_ids=workers,
    )
    return _with_value(result, value)


def run_task(ctx: JobContext, task: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The handler of every task kind: runs the task and reports it through the signals.

    A task may raise `venturi.Retry`, `Pause` or `Fail` to steer its job; any other
    exception is retried with backoff until ``MAX_ATTEMPTS`` is reached.
    """
    job = ctx.job
    try:
        result = build_result(job, get_queue().journal(job.id))
    except ValueError as exc:
        raise Fail(str(exc)) from None
    started = timezone.now()
    facts: dict[str, Any] = {"worker_id": job.claimed_by, "started_at": started.isoformat()}
    running = _evolve(
        result,
        status=TaskResultStatus.RUNNING,
        started_at=result.started_at or started,
        last_attempted_at=started,
    )
    task_started.send(VenturiBackend, task_result=running)
    try:
        if running.task.takes_context:
            raw = running.task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            raw = running.task.call(*args, **kwargs)
        value = normalize_json(raw)
    except Pause:
        ctx.note(_HEADER + json.dumps(facts))
        raise
    except Exception as exc:
        _failed(ctx, running, facts, exc)
        if isinstance(exc, Retry | Fail):
            raise
        raise Retry(note="".join(traceback.format_exception(exc))) from exc
    ctx.note(_HEADER + json.dumps(facts))
    done = _evolve(running, status=TaskResultStatus.SUCCESSFUL, finished_at=timezone.now())
    done = _with_value(done, value)
    task_finished.send(VenturiBackend, task_result=done)
    return value


def _failed(
    ctx: JobContext, running: TaskResult[..., Any], facts: dict[str, Any], exc: Exception
) -> None:
    """Journal a failed run's facts; when no attempt is left, send ``task_finished``."""
    path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    ctx.note(_HEADER + json.dumps({**facts, "exception_class_path": path}))
    job = ctx.job
    if isinstance(exc, Fail) or job.failure_count + 1 >= job.max_attempts:
        error = TaskError(
            exception_class_path=path, traceback="".join(traceback.format_exception(exc))
        )
        failed = _evolve(
            running,
            status=TaskResultStatus.FAILED,
            finished_at=timezone.now(),
            errors=[*running.errors, error],
        )
        # Called from the except block, where Django's logging receiver reads exc_info.
        task_finished.send(VenturiBackend, task_result=failed)


def _evolve(result: TaskResult[..., Any], **changes: Any) -> TaskResult[..., Any]:
    """A copy of a frozen ``TaskResult`` with some fields changed (no return value)."""
    return dataclasses.replace(result, **changes)


def _with_value(result: TaskResult[..., Any], value: Any) -> TaskResult[..., Any]:
    # TaskResult keeps the return value in a field outside __init__; Django's own
    # backends set it the same way.
    object.__setattr__(result, "_return_value", value)
    return result
