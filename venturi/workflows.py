"""Workflows: a graph of jobs inserted in one transaction that the database releases
step by step (`Queue.workflow`), and a workflow's state as read (`Queue.workflow_status`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.errors import ConfigurationError
from venturi.models import JobId, JobRecord, JobStatus, NewJob, OnParentFailure
from venturi.registry import JobFunction
from venturi.store.ids import new_id
from venturi.store.postgres import PostgresStore


class Workflow:
    """Jobs added with `add` and inserted together when the ``with`` block ends.

    ``add`` returns the new job's id at once, so later jobs name it in ``depends_on``:
    parents are always added first and a cycle cannot be built. A ``depends_on`` id that is neither
    added before nor stored raises `InvalidJob` at the end of the block, and nothing of
    the workflow is written.
    """

    def __init__(
        self,
        new_job: Callable[..., NewJob],
        store: PostgresStore,
        conn: psycopg.Connection[Any] | None,
    ) -> None:
        self.id = new_id()
        self._new_job = new_job
        self._store = store
        self._conn = conn
        self._jobs: list[NewJob] = []
        self._ids: list[ULID] = []
        self.written = False

    def add(
        self,
        target: JobFunction[..., Any] | str,
        /,
        *,
        depends_on: Sequence[JobId] | None = None,
        on_parent_failure: OnParentFailure = "cancel",
        **payload: Any,
    ) -> ULID:
        """Add a run of ``target`` (a job function or a kind) with ``payload`` as its
        keyword arguments, after the jobs in ``depends_on``; returns its id."""
        return self.add_with(
            target, payload, depends_on=depends_on, on_parent_failure=on_parent_failure
        )

    def add_with(
        self, target: JobFunction[..., Any] | str, payload: Mapping[str, Any], **options: Any
    ) -> ULID:
        """`add` with enqueue options (``priority``, ``delay``, ``max_attempts``, ...)."""
        if self.written:
            raise ConfigurationError(f"workflow {self.id} is already written")
        kind = target.kind if isinstance(target, JobFunction) else target
        job = self._new_job(kind, payload, **options)
        if job.dedup_key is not None:
            raise ConfigurationError("a workflow's jobs take no dedup_key")
        job_id = new_id()
        self._jobs.append(job)
        self._ids.append(job_id)
        return job_id

    @property
    def ids(self) -> list[ULID]:
        return list(self._ids)

    def __enter__(self) -> Workflow:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None and self._jobs:
            self._store.enqueue_graph(self._jobs, self._ids, self.id, self._conn)
            self.written = True


@attrs.frozen
class WorkflowJob:
    """One job of a workflow: its record and its parents' ids."""

    record: JobRecord
    parents: tuple[ULID, ...]


@attrs.frozen
class WorkflowStatus:
    """Every job of one workflow as read at one moment."""

    id: ULID
    jobs: tuple[WorkflowJob, ...]

    def counts(self) -> dict[str, int]:
        """How many jobs are in each status."""
        counts: dict[str, int] = {}
        for job in self.jobs:
            counts[job.record.status.value] = counts.get(job.record.status.value, 0) + 1
        return counts

    @property
    def finished(self) -> bool:
        """Every job has finished (completed, dead or cancelled)."""
        return bool(self.jobs) and all(j.record.status.terminal for j in self.jobs)

    @property
    def succeeded(self) -> bool:
        """Every job has completed."""
        return bool(self.jobs) and all(j.record.status is JobStatus.COMPLETED for j in self.jobs)
