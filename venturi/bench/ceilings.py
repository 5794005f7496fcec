"""The raw-SQL ceilings of `venturi bench`: what plain psycopg gets from the same server.

A minimal hand-rolled queue table (identity id, kind, payload, priority, status,
visible_at, run count, and a partial claim index) driven with the tightest statements:
INSERT + NOTIFY in one statement per transaction, multi-row INSERT from arrays, binary
COPY, claim-and-complete in one `FOR UPDATE SKIP LOCKED` statement, one job per commit or a
batch per commit, and a few places each completing its job and claiming the next in one
statement. Each ceiling checks, like venturi's workloads, that every row was
taken exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from venturi.bench.support import BENCH_KIND, BenchFailure, BenchSettings, compose, fetch_one

CEILING_BATCH = 100

_CREATE = """
CREATE TABLE {raw} (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text        NOT NULL,
    payload    jsonb       NOT NULL,
    priority   smallint    NOT NULL DEFAULT 0,
    status     text        NOT NULL DEFAULT 'pending',
    visible_at timestamptz NOT NULL DEFAULT now(),
    run_count  integer     NOT NULL DEFAULT 0
);
CREATE INDEX ON {raw} (kind, priority DESC, visible_at, id) WHERE status = 'pending'
"""

_INSERT_NOTIFY = """
WITH inserted AS (
    INSERT INTO {raw} (kind, payload) VALUES (%(kind)s, %(payload)s::jsonb) RETURNING kind
)
SELECT pg_notify(%(channel)s, kind) FROM inserted
"""

_MULTI_INSERT = """
INSERT INTO {raw} (kind, payload)
SELECT %(kind)s, p FROM unnest(%(payloads)s::jsonb[]) AS p
"""

_COPY = "COPY {raw} (kind, payload) FROM STDIN (FORMAT BINARY)"
_COPY_TYPES = ("text", "jsonb")

_CLAIM_COMPLETE = """
WITH picked AS (
    SELECT id FROM {raw}
    WHERE status = 'pending' AND kind = %(kind)s AND visible_at <= now()
    ORDER BY priority DESC, visible_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {raw} AS r SET status = 'done', run_count = r.run_count + 1
FROM picked WHERE r.id = picked.id
RETURNING r.id, r.payload
"""

_CLAIM_ONE = """
UPDATE {raw} AS r SET status = 'claimed', run_count = r.run_count + 1
WHERE r.id = (
    SELECT id FROM {raw}
    WHERE status = 'pending' AND kind = %(kind)s AND visible_at <= now()
    ORDER BY priority DESC, visible_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING r.id
"""

# One job's completion and the next one's claim in one statement (one commit): the least
# a run's end can cost a place that passes straight on.
_COMPLETE_AND_CLAIM = """
WITH done AS (
    UPDATE {raw} SET status = 'done' WHERE id = %(id)s AND status = 'claimed'
),
picked AS (
    SELECT id FROM {raw}
    WHERE status = 'pending' AND kind = %(kind)s AND visible_at <= now()
    ORDER BY priority DESC, visible_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE {raw} AS r SET status = 'claimed', run_count = r.run_count + 1
FROM picked WHERE r.id = picked.id
RETURNING r.id
"""


class Ceilings:
    """The raw table under the run's prefix, and one method per ceiling."""

    def __init__(self, settings: BenchSettings, prefix: str) -> None:
        self.settings = settings
        self.prefix = prefix
        self.table = f"{prefix}_raw"
        self.conn = psycopg.connect(settings.dsn, autocommit=True)
        self.conn.execute(self._sql(_CREATE))

    def _sql(self, template: Any) -> Any:
        return compose(template, self.prefix, raw=self.table)

    def close(self) -> None:
        """Drop the raw table and disconnect."""
        try:
            self.conn.execute(self._sql("DROP TABLE IF EXISTS {raw}"))
        finally:
            self.conn.close()

    def reset(self) -> None:
        self.conn.execute(self._sql("TRUNCATE {raw} RESTART IDENTITY"))

    def insert_notify(self) -> dict[str, float]:
        """One INSERT + NOTIFY statement per transaction, payload encoded per job."""
        count = self.settings.enqueue_jobs
        self.reset()
        query = self._sql(_INSERT_NOTIFY)
        started = time.perf_counter()
        with self.conn.cursor() as cur:
            for n in range(count):
                payload = json.dumps({"n": n})
                cur.execute(query, {"kind": BENCH_KIND, "payload": payload, "channel": self.table})
        elapsed = time.perf_counter() - started
        self._check_rows(count, "pending", "insert+notify ceiling")
        return {"ceiling.insert_notify": count / elapsed}

    def multi_insert(self) -> dict[str, float]:
        """Multi-row INSERT from an array of ``batch`` payloads per statement."""
        count = self.settings.many_jobs
        self.reset()
        elapsed = self._fill(count)
        self._check_rows(count, "pending", "multi-row insert ceiling")
        return {"ceiling.multi_insert": count / elapsed}

    def copy(self) -> dict[str, float]:
        """Binary COPY of ``batch`` rows per statement (psycopg encodes each payload)."""
        count, batch = self.settings.many_jobs, self.settings.batch
        self.reset()
        query = self._sql(_COPY)
        started = time.perf_counter()
        with self.conn.cursor() as cur:
            for first in range(0, count, batch):
                with cur.copy(query) as copy:
                    copy.set_types(_COPY_TYPES)
                    for n in range(first, min(first + batch, count)):
                        copy.write_row((BENCH_KIND, {"n": n}))
        elapsed = time.perf_counter() - started
        self._check_rows(count, "pending", "binary COPY ceiling")
        return {"ceiling.copy": count / elapsed}

    def _fill(self, count: int) -> float:
        query = self._sql(_MULTI_INSERT)
        batch = self.settings.batch
        started = time.perf_counter()
        for first in range(0, count, batch):
            payloads = [json.dumps({"n": n}) for n in range(first, min(first + batch, count))]
            self.conn.execute(query, {"kind": BENCH_KIND, "payloads": payloads})
        return time.perf_counter() - started

    def drain(self, concurrency: int, batch: int) -> dict[str, float]:
        """``concurrency`` threads, each on its own connection, claiming and completing
        ``batch`` rows per statement (one commit) until none is left."""
        count = self.settings.jobs
        self.reset()
        self._fill(count)
        query = self._sql(_CLAIM_COMPLETE)

        def work(conn: psycopg.Connection[Any], taken: list[int]) -> None:
            params = {"kind": BENCH_KIND, "limit": batch}
            with conn.cursor() as cur:
                while rows := cur.execute(query, params).fetchall():
                    taken.extend(row[0] for row in rows)

        what = f"ceiling drain c{concurrency} batch {batch}"
        elapsed = self._threads(concurrency, work, count, what)
        shape = "commit_per_job" if batch == 1 else "batched"
        return {f"ceiling.{shape}.c{concurrency}": count / elapsed}

    def passing(self, places: int, job_seconds: float, count: int) -> dict[str, float]:
        """``places`` threads, each on its own connection, running jobs of ``job_seconds``
        (an `Event.wait`, as the bench's handler does): each claims one row, then after
        every job completes it and claims the next in one statement, until none is left.
        What a kind limited to ``places`` with such jobs can drain at best."""
        self.reset()
        self._fill(count)
        claim_one, complete_and_claim = self._sql(_CLAIM_ONE), self._sql(_COMPLETE_AND_CLAIM)

        def place(conn: psycopg.Connection[Any], taken: list[int]) -> None:
            pause = threading.Event()
            params: dict[str, Any] = {"kind": BENCH_KIND}
            with conn.cursor() as cur:
                row = cur.execute(claim_one, params).fetchone()
                while row is not None:
                    taken.append(row[0])
                    pause.wait(job_seconds)
                    row = cur.execute(complete_and_claim, {**params, "id": row[0]}).fetchone()

        what = f"ceiling of {places} places passed on, {job_seconds * 1000:g} ms jobs"
        elapsed = self._threads(places, place, count, what)
        return {f"ceiling.limited{places}.{job_seconds * 1000:g}ms": count / elapsed}

    def _threads(
        self,
        threads: int,
        work: Callable[[psycopg.Connection[Any], list[int]], None],
        count: int,
        what: str,
    ) -> float:
        """Run ``work(conn, taken)`` in ``threads`` threads, each on its own autocommit
        connection, started together; the seconds until all ended, once the rows each
        took (appended to ``taken``) are checked: ``count`` rows, each taken and done
        exactly once."""
        conns = [psycopg.connect(self.settings.dsn, autocommit=True) for _ in range(threads)]
        taken: list[list[int]] = [[] for _ in range(threads)]
        errors: list[BaseException] = []
        gate = threading.Barrier(threads + 1)

        def guarded(index: int) -> None:
            try:
                gate.wait()
                work(conns[index], taken[index])
            except BaseException as exc:
                errors.append(exc)

        running = [threading.Thread(target=guarded, args=(i,)) for i in range(threads)]
        for thread in running:
            thread.start()
        try:
            gate.wait()
            started = time.perf_counter()
            for thread in running:
                thread.join()
            elapsed = time.perf_counter() - started
        finally:
            for conn in conns:
                conn.close()
        if errors:
            raise BenchFailure(f"{what}: {errors[0]!r}")
        ids = [i for chunk in taken for i in chunk]
        if len(ids) != count or len(set(ids)) != count:
            raise BenchFailure(f"{what}: took {len(ids)} rows, {len(set(ids))} distinct of {count}")
        self._check_rows(count, "done", what)
        return elapsed

    def _check_rows(self, count: int, status: str, what: str) -> None:
        query = self._sql(
            "SELECT count(*), count(*) FILTER (WHERE status = %(status)s AND run_count = "
            "CASE WHEN %(status)s = 'done' THEN 1 ELSE 0 END) FROM {raw}"
        )
        total, good = fetch_one(self.conn, query, {"status": status})
        if not total == good == count:
            raise BenchFailure(
                f"{what}: {total} rows, {good} {status} exactly once; wanted {count}"
            )
