"""The store's job dependencies: enqueueing jobs with parents (a whole graph at once),
reading results, parents and workflows. `PostgresStore` inherits these operations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import psycopg
from psycopg import pq
from psycopg.rows import tuple_row
from ulid import ULID

from venturi.errors import InvalidJob
from venturi.models import JobId, JobRecord, JobStatus, NewJob, to_uuid
from venturi.store import sqlfiles
from venturi.store.enqueueing import new_job_params
from venturi.store.housekeeping import Housekeeping
from venturi.store.statements import run_read

_FAILED = (JobStatus.DEAD.value, JobStatus.CANCELLED.value)


@attrs.frozen
class GraphPlan:
    """What `enqueue_graph.sql` writes: each job's status from its parents', and the edges."""

    statuses: list[str]
    parents_left: list[int]
    notes: list[str | None]
    edges: list[tuple[ULID, ULID, bool]]  # (parent, child, open)

    @classmethod
    def of(
        cls, jobs: Sequence[NewJob], ids: Sequence[ULID], existing: dict[ULID, str]
    ) -> GraphPlan:
        """Plan ``jobs`` (parents before children) given the status of each parent that
        exists already; raises `InvalidJob` for a parent that is neither stored nor
        earlier in ``jobs``."""
        status_of = dict(existing)
        plan = cls([], [], [], [])
        for job, job_id in zip(jobs, ids, strict=True):
            left, failed = 0, None
            for parent in job.depends_on:
                status = status_of.get(parent)
                if status is None:
                    raise InvalidJob(
                        f"after: job {parent} does not exist (nor is it added before {job_id} "
                        "in this workflow)"
                    )
                unfinished = status not in (*_FAILED, JobStatus.COMPLETED.value)
                left += unfinished
                if status in _FAILED and failed is None:
                    failed = f"parent {parent} ended {status}"
                plan.edges.append((parent, job_id, unfinished))
            if failed is not None and job.on_parent_failure == "cancel":
                status = JobStatus.CANCELLED.value
            else:
                status = JobStatus.WAITING.value if left else JobStatus.PENDING.value
                failed = None
            status_of[job_id] = status
            plan.statuses.append(status)
            plan.parents_left.append(left)
            plan.notes.append(failed)
        return plan


class Dependencies(Housekeeping):
    """Operations of `PostgresStore` on parents, results and workflows."""

    def _write_graph(
        self,
        conn: psycopg.Connection[Any],
        jobs: Sequence[NewJob],
        ids: Sequence[ULID],
        workflow_id: ULID | None,
        max_payload_bytes: int,
    ) -> list[ULID]:
        """Insert ``jobs`` under ``ids`` in one transaction on ``conn`` (a savepoint inside
        the caller's open transaction): lock the stored parents, plan, write."""
        for job in jobs:
            size = len(job.payload_json.encode("utf-8"))
            if size > max_payload_bytes:
                raise InvalidJob(
                    f"payload of {job.kind!r} is {size} bytes of JSON; "
                    f"the limit is {max_payload_bytes} (max_payload_bytes)"
                )
        if not conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            conn.execute(sqlfiles.query("now", self.prefix))  # join, never commit, theirs
        batch = set(ids)
        stored = sorted({p for j in jobs for p in j.depends_on if p not in batch})
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            existing: dict[ULID, str] = {}
            if stored:
                cur.execute(self._sql("lock_parents"), {"ids": [p.to_uuid() for p in stored]})
                existing = {ULID.from_uuid(r[0]): r[1] for r in cur.fetchall()}
            plan = GraphPlan.of(jobs, ids, existing)
            cur.execute(self._sql("enqueue_graph"), _graph_params(jobs, ids, plan, workflow_id))
        return list(ids)

    def _sql(self, name: str) -> Any:
        return sqlfiles.query(name, self.prefix)

    def requeue_with_children(self, job_id: JobId, note: str | None = None) -> int | None:
        """Requeue a finished job and, in the same transaction, its cancelled descendants
        (back to waiting); None when the job was not finished, else how many went back."""
        params = {"id": to_uuid(job_id), "note": note}
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            if not cur.execute(self._sql("requeue"), params).fetchall():
                return None
            cur.execute(self._sql("lock_descendants"), {"id": params["id"]})
            return len(cur.execute(self._sql("requeue_descendants"), params).fetchall())

    def await_job(self, job_id: ULID) -> JobRecord | None:
        """Mark the job awaited, so that the transaction finishing it notifies the channel
        of finished jobs, and read it afterwards; None if no job has this id. Call it once
        listening: a job that finishes after this is heard, one that finished before is
        read finished. Waits while a finishing transaction holds the job's row."""
        rows = self._fetch("await_job", {"id": job_id.to_uuid()})
        if rows:
            return JobRecord.from_row(rows[0])
        # Finished, marked by another waiter, or unknown: this later statement reads what
        # the mark's lock waited for.
        return self.get(job_id)

    def finished_jobs(self, job_ids: Sequence[ULID]) -> list[JobRecord]:
        """Those of ``job_ids`` that have finished (completed, dead or cancelled)."""
        if not job_ids:
            return []
        rows = self._fetch("finished_jobs", {"ids": [i.to_uuid() for i in job_ids]})
        return [JobRecord.from_row(r) for r in rows]

    def results(self, job_ids: Sequence[JobId]) -> dict[ULID, Any]:
        """Each completed job's return value (its latest completion's attachment)."""
        rows = self._fetch("completion_results", {"ids": [to_uuid(i) for i in job_ids]})
        return {ULID.from_uuid(r[0]): r[1] for r in rows}

    def parent_results(self, job_id: JobId) -> dict[ULID, Any]:
        """Each parent of ``job_id`` and its return value (None unless it completed)."""
        rows = self._fetch("parent_results", {"id": to_uuid(job_id)})
        return {ULID.from_uuid(r[0]): r[1] for r in rows}

    def workflow_jobs(
        self, workflow_id: JobId, conn: psycopg.Connection[Any] | None = None
    ) -> list[tuple[JobRecord, list[ULID]]]:
        """Every job of a workflow (enqueue order) with its parents' ids."""
        params = {"id": to_uuid(workflow_id)}
        query = sqlfiles.query("workflow_jobs", self.prefix)
        rows = (
            self._fetch("workflow_jobs", params) if conn is None else run_read(conn, query, params)
        )
        return [(JobRecord.from_row(r[:-1]), [ULID.from_uuid(p) for p in r[-1]]) for r in rows]


def _graph_params(
    jobs: Sequence[NewJob], ids: Sequence[ULID], plan: GraphPlan, workflow_id: ULID | None
) -> dict[str, Any]:
    parents = {p for p, _, _ in plan.edges}
    return {
        **new_job_params(ids, jobs),
        "statuses": plan.statuses,
        "parents_left": plan.parents_left,
        "on_parent_failures": ["run" if j.on_parent_failure == "run" else None for j in jobs],
        "notes": plan.notes,
        "has_children": [i in parents for i in ids],
        "workflow_id": None if workflow_id is None else workflow_id.to_uuid(),
        "edge_parents": [p.to_uuid() for p, _, _ in plan.edges],
        "edge_children": [c.to_uuid() for _, c, _ in plan.edges],
        "edge_open": [o for _, _, o in plan.edges],
    }
