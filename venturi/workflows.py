"""Results, waiting and workflows on a `Queue`: wait for a job, read its return value,
and insert a graph of jobs that the database releases step by step."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.durations import Duration, to_seconds
from venturi.errors import ConfigurationError, JobCancelled, JobFailed
from venturi.models import JobId, JobRecord, JobStatus, NewJob, OnParentFailure, to_uuid
from venturi.reading import Reads
from venturi.registry import JobFunction
from venturi.store.ids import new_id
from venturi.store.protocol import Store
from venturi.waiting import Waiters

DEFAULT_WAIT_SECONDS = 30.0


class Results(Reads):
    """`Queue`'s waiting, results and workflow operations (a mixin over its store)."""

    store: Store
    # `Queue._check_process`: raises `ForkedError` in a child of the queue's process.
    _check_process: Callable[[], None]
    _lock: threading.Lock
    _waiters: Waiters | None = None
    new_job: Callable[..., NewJob]

    def wait(self, job_id: JobId, timeout: Duration = DEFAULT_WAIT_SECONDS) -> JobRecord:
        """The job once it has finished (completed, dead or cancelled).

        Marks the job awaited, so that its finishing transaction notifies (jobs nobody
        waits for never do), and is woken by that notification; every wait of this
        queue shares one LISTEN connection. Raises `TimeoutError` after ``timeout``
        seconds and `UnknownJob` for an id no job has.
        """
        self._check_process()
        seconds = to_seconds(timeout, "timeout")
        key = ULID.from_uuid(to_uuid(job_id))
        with self._lock:
            if self._waiters is None:
                self._waiters = Waiters(self.store)
            waiters = self._waiters
        return waiters.wait(key, seconds)

    def result(self, job_id: JobId, timeout: Duration = DEFAULT_WAIT_SECONDS) -> Any:
        """The handler's return value once the job has completed (`wait`, then its
        completion's attachment). Raises `JobFailed` if it ended dead, `JobCancelled` if
        it was cancelled (each with the last journal note), `TimeoutError`."""
        record = self.wait(job_id, timeout)
        if record.status is JobStatus.COMPLETED:
            return self.store.results([record.id]).get(record.id)
        note = self.store.last_notes([record.id]).get(record.id)
        if record.status is JobStatus.DEAD:
            raise JobFailed(record.id, note)
        raise JobCancelled(record.id, note)

    def requeue_with_children(self, job_id: JobId) -> int | None:
        """Requeue a finished job (`Queue.requeue`) and the descendants its end cancelled
        (back to waiting for it), in one transaction; None when the job was not finished,
        else how many descendants went back."""
        self._check_process()
        return self.store.requeue_with_children(job_id, note="requeued with its parent")

    def workflow(self, conn: psycopg.Connection[Any] | None = None) -> Workflow:
        """A graph of jobs inserted in one transaction when the ``with`` block ends
        (on ``conn``, inside the caller's transaction, if given); nothing is written if
        the block raises. See `Workflow`."""
        self._check_process()
        return Workflow(self, conn)

    def workflow_status(self, workflow_id: JobId) -> WorkflowStatus:
        """Every job of a workflow with its parents and state, in the order added."""
        self._check_process()
        jobs = self.reads.workflow_jobs(workflow_id)
        return WorkflowStatus(
            ULID.from_uuid(to_uuid(workflow_id)),
            tuple(WorkflowJob(record, tuple(parents)) for record, parents in jobs),
        )

    def close_waiters(self) -> None:
        """Stop the waiters' listener (`close` does)."""
        with self._lock:
            waiters, self._waiters = self._waiters, None
        if waiters is not None:
            waiters.close()


class Workflow:
    """Jobs added with `add` and inserted together when the ``with`` block ends.

    ``add`` returns the new job's id at once, so later jobs name it in ``depends_on``: parents
    are always added first and a cycle cannot be built. A ``depends_on`` id that is neither
    added before nor stored raises `InvalidJob` at the end of the block, and nothing of
    the workflow is written.
    """

    def __init__(self, queue: Results, conn: psycopg.Connection[Any] | None) -> None:
        self.id = new_id()
        self._queue = queue
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
        job = self._queue.new_job(kind, payload, **options)
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
            self._queue.store.enqueue_graph(self._jobs, self._ids, self.id, self._conn)
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
