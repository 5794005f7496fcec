"""The stand-ins Django's adapted tests name where they named Django's development
backends: both are `VenturiBackend` itself, plus the test hooks those tests use.

- `ImmediateBackend`: where Django's ran the task inline, this one enqueues it (through
  `VenturiBackend.enqueue`), drains the queue (a worker's run, in this thread) and returns
  the result read back with `VenturiBackend.get_result`.
- `DummyBackend`: enqueues and never runs; ``results`` (the results of the tasks it
  enqueued, read back from the database) and ``clear()`` (their jobs deleted) are the
  hooks Django's DummyBackend offers its tests.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, cast

from django.tasks import Task, TaskResult
from django.utils import timezone

from venturi.contrib.django import get_queue
from venturi.contrib.django.tasks import VenturiBackend

P = ParamSpec("P")
R = TypeVar("R")


class ImmediateBackend(VenturiBackend):
    """`VenturiBackend` whose ``enqueue`` is followed by a drain and a read back."""

    def enqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        enqueued = super().enqueue(task, args, kwargs)
        get_queue().drain()
        # Read back: the same task, so the same parameters and return type.
        return cast("TaskResult[P, R]", self.get_result(enqueued.id))


class DummyBackend(VenturiBackend):
    """`VenturiBackend` that remembers what it enqueued, for ``results`` and ``clear``."""

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.enqueued: list[str] = []

    def enqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        result = super().enqueue(task, args, kwargs)
        self.enqueued.append(result.id)
        return result

    @property
    def results(self) -> list[TaskResult[..., Any]]:
        """The results of the tasks enqueued here, as stored now."""
        return [self.get_result(result_id) for result_id in self.enqueued]

    def clear(self) -> None:
        """Delete the jobs of the tasks enqueued here (cancelled first if pending)."""
        queue = get_queue()
        kinds = set()
        for result_id in self.enqueued:
            job = queue.get(result_id)
            if job is not None:
                queue.cancel(job.id)
                kinds.add(job.kind)
        for kind in kinds:
            queue.cleanup(finished_before=timezone.now() + timedelta(minutes=1), kind=kind)
        self.enqueued.clear()
