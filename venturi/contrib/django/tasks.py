"""A backend for Django's Tasks framework (``django.tasks``, Django 6.0+) on venturi.

```python
TASKS = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend",
                     "QUEUES": ["default"], "OPTIONS": {"MAX_ATTEMPTS": 3}}}
```

Each (backend alias, queue name) is one venturi kind, ``django.tasks:ALIAS:QUEUE``, run
by `run_task`, which imports the task by its module path; with ``"QUEUES": []`` (any
queue name) the alias has one kind, ``django.tasks:ALIAS``, and the name travels in
the payload. ``async def`` tasks run in the worker's handler threads, each coroutine on
an event loop of its own (through ``Task.call``, as Django runs them from sync code).
Django's priority (-100..100) is venturi's priority unchanged (higher runs first).
Enqueueing joins the current ``transaction.atomic()`` block of the queue's database.
Failures are retried with backoff up to ``MAX_ATTEMPTS``; a worker that dies mid-run
has its task taken back by the reaper; every exception but ``KeyboardInterrupt``
(``SystemExit`` included) is a failure of the task, as in Django's ImmediateBackend. A
``KeyboardInterrupt`` passes through in the main thread (``drain``, the inline test
mode), where it may be Ctrl-C; in a worker's handler thread, which no signal reaches,
the task raised it itself and it is a failure too.
Each run keeps its facts (start; a failure's exception class path and traceback) in its
journal row's ``facts``, under ``django_task``, beside the worker venturi records; from
them `VenturiBackend.get_result` rebuilds ``errors``, ``worker_ids`` and times (see
`venturi.contrib.django.task_results`). The notes stay for people.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Mapping
from typing import Any, ParamSpec, TypeVar, cast

import attrs
from django.conf import settings
from django.core import checks
from django.db import connections
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
from venturi.outcomes import Fail, Pause, Retry
from venturi.registry import DEFAULT_LEASE
from venturi.settlements import error_facts, storable_text

from .conf import SettingsError
from .connection import database_alias, django_connection
from .queue import enqueue, get_queue, registry
from .queue import job as register_job
from .task_results import (
    FACTS_KEY,
    TaskRunLost,
    build_result,
    django_time,
    evolve,
    kind_parts,
    task_kind,
    with_value,
)

__all__ = ["BackendOptions", "TaskRunLost", "VenturiBackend", "run_task", "task_kind"]

P = ParamSpec("P")
R = TypeVar("R")


@attrs.frozen
class BackendOptions:
    """A venturi backend's ``OPTIONS``: ``MAX_ATTEMPTS``, ``LEASE`` and ``TIMEOUT`` (s),
    and ``ATOMIC``: run each task in ``transaction.atomic()`` and complete its job in that
    block, so its ORM writes commit if and only if the completion applies (the
    ``atomic=True`` of `venturi.contrib.django.job`)."""

    max_attempts: int = 5
    lease: float = DEFAULT_LEASE
    timeout: float | None = None
    atomic: bool = False

    @classmethod
    def from_params(cls, alias: str, options: Mapping[str, Any]) -> BackendOptions:
        known = {
            "MAX_ATTEMPTS": "max_attempts",
            "LEASE": "lease",
            "TIMEOUT": "timeout",
            "ATOMIC": "atomic",
        }
        unknown = sorted(str(k) for k in options if k not in known)
        if unknown:
            raise SettingsError(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {', '.join(unknown)}; "
                f"known: {', '.join(known)}"
            )
        return cls(**{known[k]: v for k, v in options.items()})


_register_lock = threading.Lock()


def register_backend(alias: str, params: Mapping[str, Any]) -> None:
    """Register `run_task` for each of the backend's queues (once per kind); for the
    alias's one kind if ``QUEUES`` is empty (Django's "any queue name")."""
    options = BackendOptions.from_params(alias, params.get("OPTIONS") or {})
    queues: list[str | None] = list(params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]))
    with _register_lock:
        for name in queues or [None]:
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
                    atomic=options.atomic,
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
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        register_backend(alias, params)

    def enqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue inside Django's current transaction on the queue's database.

        ``enqueued_at`` is the job id's time (the enqueue, to the millisecond), which
        `get_result` reads back, so the two results are equal.
        """
        self.validate_task(task)
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)  # USE_TZ = False: local time
        json_args = cast(list[Any], normalize_json(list(args)))
        json_kwargs = cast(dict[str, Any], normalize_json(dict(kwargs)))
        payload: dict[str, Any] = {
            "task": task.module_path,
            "args": json_args,
            "kwargs": json_kwargs,
        }
        if self.queues:
            kind = task_kind(self.alias, task.queue_name)
        else:  # any queue name: the alias's one kind, the name in the payload
            kind = task_kind(self.alias, None)
            payload["queue_name"] = task.queue_name
        if task.run_after is not None:
            payload["run_after"] = task.run_after.isoformat()
        job_id = enqueue(kind, payload, priority=task.priority, at=run_after)
        result: TaskResult[P, R] = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=django_time(job_id.datetime),
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
        """The task's state from its job row and journal; `TaskResultDoesNotExist` if none.

        Inside an ``atomic()`` block of the queue's database it reads on Django's
        connection, as `enqueue` wrote there, so a task enqueued in that block is found;
        elsewhere on venturi's pool (safe from async code, which must not use Django's
        connection).
        """
        try:
            job_id = ULID.from_str(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        in_block = connections[database_alias()].in_atomic_block
        queue, conn = get_queue(), django_connection() if in_block else None
        job = queue.get(job_id, primary=True, conn=conn)
        parts = None if job is None else kind_parts(job.kind)
        if job is None or parts is None or parts[0] != self.alias:
            raise TaskResultDoesNotExist(result_id)
        return build_result(job, queue.journal(job_id, primary=True, conn=conn))

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


def run_task(
    ctx: JobContext,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    queue_name: str | None = None,
    run_after: str | None = None,
) -> Any:
    """The handler of every task kind: runs the task and reports it through the signals.

    A task may raise `venturi.Retry`, `Pause` or `Fail` to steer its job; any other
    exception (``SystemExit`` too) is journaled and retried with backoff until
    ``MAX_ATTEMPTS`` is reached, except a ``KeyboardInterrupt`` in the main thread, which
    passes through untouched. An ``async def`` task runs to
    completion here through ``Task.call``. ``queue_name`` and ``run_after`` are read
    from the job's payload by `build_result`.
    """
    job = ctx.job
    try:
        result = build_result(job, get_queue().journal(job.id))
    except ValueError as exc:
        raise Fail(str(exc)) from None
    started = timezone.now()
    # Written with whatever settlement ends this run (completed, retried, paused, dead).
    ctx.facts[FACTS_KEY] = {"started_at": started.isoformat()}
    running = evolve(
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
        raise  # not a failure: its settlement journals the run's facts as they are
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and _in_main_thread():
            raise  # someone is stopping this process, as Django's ImmediateBackend has it
        _failed(ctx, running, exc)
        if isinstance(exc, Retry | Fail):
            raise
        raise Retry(note="".join(traceback.format_exception(exc))) from exc
    done = evolve(running, status=TaskResultStatus.SUCCESSFUL, finished_at=timezone.now())
    done = with_value(done, value)
    task_finished.send(VenturiBackend, task_result=done)
    return value


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a task's exception whose __str__ itself fails
        return f"<{type(exc).__name__}: str() failed>"


def _in_main_thread() -> bool:
    # Signals reach only the main thread: a KeyboardInterrupt in a worker's handler
    # thread is the task's own, and the worker fails the run as for any exception.
    return threading.current_thread() is threading.main_thread()


def _failed(ctx: JobContext, running: TaskResult[..., Any], exc: BaseException) -> None:
    """Keep a failed run's facts for its journal row; when no attempt is left, send
    ``task_finished``."""
    path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    text = storable_text("".join(traceback.format_exception(exc)))
    facts = {**ctx.facts[FACTS_KEY], "exception_class_path": path, "traceback": text}
    ctx.facts.update({FACTS_KEY: facts, **error_facts(exc, _message(exc))})
    job = ctx.job
    if isinstance(exc, Fail) or job.failure_count + 1 >= job.max_attempts:
        error = TaskError(exception_class_path=path, traceback=text)
        failed = evolve(
            running,
            status=TaskResultStatus.FAILED,
            finished_at=timezone.now(),
            errors=[*running.errors, error],
        )
        # Called from the except block, where Django's logging receiver reads exc_info.
        task_finished.send(VenturiBackend, task_result=failed)
