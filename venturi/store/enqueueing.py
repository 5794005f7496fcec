"""Writing new jobs on any psycopg connection: plain inserts, batches (by COPY when large),
dedup merges, and graphs of jobs with parents planned and written in one transaction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import psycopg
from psycopg import pq
from psycopg.rows import tuple_row
from ulid import ULID

from venturi.errors import DuplicateJob, InvalidJob, InvalidPayload
from venturi.models import JobStatus, NewJob
from venturi.payload import encode_payload, utf8_size
from venturi.prefix import Prefix
from venturi.store import sqlfiles
from venturi.store.connections import returned_rows, statement_cursor
from venturi.store.copying import COPY_MIN_JOBS, copy_jobs, copy_possible, copyable

_FAILED: Final = (JobStatus.DEAD.value, JobStatus.CANCELLED.value)
# A dedup statement can find the key's holder gone mid-statement (claimed, or inserted by a
# transaction our snapshot cannot see); each retry takes a fresh snapshot.
_DEDUP_ATTEMPTS: Final = 20


@attrs.define(eq=False)
class Enqueuer:
    """Writes new jobs on a given connection.

    On a connection inside a transaction the writes join it: nothing is committed or
    rolled back here, so the jobs and their NOTIFY commit with the caller's own writes.
    Multi-statement work uses a savepoint there, or a short transaction on an
    autocommit connection.
    """

    prefix: Prefix
    max_payload_bytes: int

    def _params(self, job: NewJob, job_id: ULID) -> dict[str, Any]:
        self._check_size(job)
        return {
            "id": job_id.to_uuid(),
            "kind": job.kind,
            "payload": job.payload_json,
            "priority": job.priority,
            "delay": job.delay_seconds,
            "at": job.at,
            "max_attempts": job.max_attempts,
            "dedup_key": job.dedup_key,
            "concurrency_key": job.concurrency_key,
            "trace_context": job.trace_context_json,
        }

    def _check_size(self, job: NewJob) -> None:
        size = utf8_size(job.payload_json)
        if size > self.max_payload_bytes:
            raise InvalidPayload(
                f"payload of {job.kind!r} is {size} bytes of JSON; "
                f"the limit is {self.max_payload_bytes} (max_payload_bytes)"
            )

    def _query(self, name: str) -> bytes:
        return sqlfiles.statement(name, self.prefix)

    def _first_row(
        self, conn: psycopg.Connection[Any], name: str, params: dict[str, Any]
    ) -> tuple[Any, ...] | None:
        """Run one statement on ``conn`` and return its first row, if any."""
        cur = statement_cursor(conn)
        cur.execute(self._query(name), params)
        return cur.fetchone() if returned_rows(cur) else None

    def enqueue(self, conn: psycopg.Connection[Any], job: NewJob, job_id: ULID) -> ULID:
        """Write ``job`` under ``job_id`` (chosen by the caller, so a retry after a lost
        answer can look for it); returns its id, or the id of the pending job it merged
        into."""
        params = self._params(job, job_id)
        if job.dedup_key is None:
            statement_cursor(conn).execute(self._query("enqueue"), params)
            return job_id
        if job.on_duplicate == "keep":
            return self._dedup_statement(conn, "enqueue_keep", params, job)
        if job.on_duplicate == "replace":
            return self._dedup_statement(conn, "enqueue_replace", params, job)
        return self._merge_with_function(conn, job, params)

    def _dedup_statement(
        self, conn: psycopg.Connection[Any], name: str, params: dict[str, Any], job: NewJob
    ) -> ULID:
        for _ in range(_DEDUP_ATTEMPTS):
            row = self._first_row(conn, name, params)
            if row is not None:
                return ULID.from_uuid(row[0])
        raise DuplicateJob(
            f"could not enqueue {job.kind!r} with dedup_key {job.dedup_key!r}: the key's "
            f"holder kept changing for {_DEDUP_ATTEMPTS} attempts"
        )

    def _merge_with_function(
        self, conn: psycopg.Connection[Any], job: NewJob, params: dict[str, Any]
    ) -> ULID:
        merge = job.on_duplicate
        assert callable(merge)
        key = {"kind": job.kind, "dedup_key": job.dedup_key}
        self._join_callers_transaction(conn)
        for _ in range(_DEDUP_ATTEMPTS):
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                holder = cur.execute(self._query("dedup_holder"), key).fetchone()
                if holder is None:
                    inserted = cur.execute(self._query("enqueue_if_absent"), params).fetchone()
                    if inserted is not None:
                        return ULID.from_uuid(inserted[0])
                    continue
                current = holder[1]
                if isinstance(current, str):  # a caller's connection may load jsonb as text
                    current = json.loads(current)  # (Django's does, for its JSONField)
                merged = merge(dict(current), dict(job.payload))
                if not isinstance(merged, Mapping):
                    raise InvalidPayload(
                        f"merge function for {job.kind!r} returned {type(merged).__name__}, "
                        "not a dict"
                    )
                text = encode_payload(merged, max_bytes=self.max_payload_bytes)
                note = f"duplicate enqueue merged by {getattr(merge, '__name__', 'merge')}"
                cur.execute(
                    self._query("dedup_merge"), {"id": holder[0], "payload": text, "note": note}
                )
                return ULID.from_uuid(holder[0])
        raise DuplicateJob(
            f"could not merge {job.kind!r} with dedup_key {job.dedup_key!r} after "
            f"{_DEDUP_ATTEMPTS} attempts"
        )

    def written(self, conn: psycopg.Connection[Any], ids: Sequence[ULID]) -> bool:
        """True if any of ``ids`` is stored: an earlier attempt whose answer was lost did
        commit (a batch commits whole, so one id tells for all of it)."""
        return self._first_row(conn, "jobs_exist", {"ids": [i.to_uuid() for i in ids]}) is not None

    def _join_callers_transaction(self, conn: psycopg.Connection[Any]) -> None:
        """Open the caller's transaction if their connection is idle, so that a following
        ``conn.transaction()`` is a savepoint inside it. On an idle non-autocommit
        connection psycopg would BEGIN *and COMMIT* a transaction of its own, committing
        the job however the caller's transaction ends."""
        if not conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            conn.execute(self._query("now"))

    def enqueue_many(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], ids: Sequence[ULID]
    ) -> list[ULID]:
        """Write ``jobs`` under ``ids`` (one each, chosen by the caller); returns each
        job's id, or for a deduplicated one the id of the pending job it merged into.

        Jobs due now without a dedup key travel in one binary COPY when there are at least
        `COPY_MIN_JOBS` of them; the other plain ones in one INSERT statement; each
        deduplicated one in statements of its own. All of it commits or fails together."""
        for job in jobs:
            self._check_size(job)
        copied: list[int] = []
        inserted: list[int] = []
        deduped: list[int] = []
        for index, job in enumerate(jobs):
            if job.dedup_key is not None:
                deduped.append(index)
            elif copyable(job):
                copied.append(index)
            else:
                inserted.append(index)
        if len(copied) < COPY_MIN_JOBS or not copy_possible(conn):
            inserted = sorted(inserted + copied)
            copied = []
        steps = [bool(copied), bool(inserted), bool(deduped)].count(True)
        if steps == 0:
            return []
        if steps == 1 and inserted:
            self._first_row(conn, "enqueue_many", self._rows(inserted, jobs, ids))
            return list(ids)
        if steps == 1 and copied:
            # In a transaction of its own on an idle autocommit connection; otherwise in
            # the caller's (which psycopg begins if the connection is idle).
            own = conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE
            copy_jobs(conn, self.prefix, ids, jobs, own_transaction=own)
            return list(ids)
        self._join_callers_transaction(conn)
        with conn.transaction():
            if copied:
                copy_jobs(
                    conn,
                    self.prefix,
                    [ids[i] for i in copied],
                    [jobs[i] for i in copied],
                    own_transaction=False,
                )
            if inserted:
                self._first_row(conn, "enqueue_many", self._rows(inserted, jobs, ids))
            result = list(ids)
            for index in deduped:
                result[index] = self.enqueue(conn, jobs[index], ids[index])
            return result

    def enqueue_graph(
        self,
        conn: psycopg.Connection[Any],
        jobs: Sequence[NewJob],
        ids: Sequence[ULID],
        workflow_id: ULID | None,
    ) -> list[ULID]:
        """Write ``jobs`` (parents before children) under ``ids`` in one transaction on
        ``conn`` (a savepoint inside the caller's open transaction): lock the stored
        parents, plan each job's status from theirs (`GraphPlan`), write jobs and edges.
        An unknown parent raises `InvalidJob` and nothing is written."""
        for job in jobs:
            self._check_size(job)
        self._join_callers_transaction(conn)
        batch = set(ids)
        stored = sorted({p for j in jobs for p in j.depends_on if p not in batch})
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            existing: dict[ULID, str] = {}
            if stored:
                cur.execute(self._query("lock_parents"), {"ids": [p.to_uuid() for p in stored]})
                existing = {ULID.from_uuid(r[0]): r[1] for r in cur.fetchall()}
            plan = GraphPlan.of(jobs, ids, existing)
            cur.execute(self._query("enqueue_graph"), plan.params(jobs, ids, workflow_id))
        return list(ids)

    @staticmethod
    def _rows(
        indexes: Sequence[int], jobs: Sequence[NewJob], ids: Sequence[ULID]
    ) -> dict[str, Any]:
        return new_job_params([ids[i] for i in indexes], [jobs[i] for i in indexes])


def new_job_params(ids: Sequence[ULID], jobs: Sequence[NewJob]) -> dict[str, Any]:
    """The column arrays of ``jobs`` written under ``ids``, as the statements that insert
    new jobs (enqueue_many.sql, enqueue_graph.sql) take them."""
    return {
        "ids": [i.to_uuid() for i in ids],
        "kinds": [j.kind for j in jobs],
        "payloads": [j.payload_json for j in jobs],
        "priorities": [j.priority for j in jobs],
        "delays": [j.delay_seconds for j in jobs],
        "ats": [j.at for j in jobs],
        "max_attempts": [j.max_attempts for j in jobs],
        "concurrency_keys": [j.concurrency_key for j in jobs],
        "trace_contexts": [j.trace_context_json for j in jobs],
    }


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
                        f"depends_on: job {parent} does not exist (nor is it added before "
                        f"{job_id} in this workflow)"
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

    def params(
        self, jobs: Sequence[NewJob], ids: Sequence[ULID], workflow_id: ULID | None
    ) -> dict[str, Any]:
        """The parameters of enqueue_graph.sql for writing ``jobs`` under ``ids`` so."""
        parents = {p for p, _, _ in self.edges}
        return {
            **new_job_params(ids, jobs),
            "statuses": self.statuses,
            "parents_left": self.parents_left,
            "on_parent_failures": ["run" if j.on_parent_failure == "run" else None for j in jobs],
            "notes": self.notes,
            "has_children": [i in parents for i in ids],
            "workflow_id": None if workflow_id is None else workflow_id.to_uuid(),
            "edge_parents": [p.to_uuid() for p, _, _ in self.edges],
            "edge_children": [c.to_uuid() for _, c, _ in self.edges],
            "edge_open": [o for _, _, o in self.edges],
        }
