"""A worker process running the durable kind of the kill test (`test_durable_kills`).

``python -m tests.faults.durable_worker DSN PREFIX NAME`` (cwd = the repo root) runs
`Worker.run()` in the foreground until SIGTERM (or SIGKILL). Each job of `KIND` takes
`STEPS` pairs of steps: a transactional one that counts its run in the effects ledger in
the step's own transaction, and a plain one that counts its run on a connection of its
own once its work is done; a durable sleep sits half-way. Every step's work takes a
random 10-60 ms, so a SIGKILL lands between steps and inside them.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import time
from typing import Any, Final

import psycopg
from psycopg import sql

import venturi

KIND: Final = "durable.kill"
STEPS: Final = 4


def effects(prefix: str) -> sql.Identifier:
    """The ledger of every run of a transactional step's work (committed with it)."""
    return sql.Identifier(f"{prefix}_deffects")


def runs(prefix: str) -> sql.Identifier:
    """The ledger of every finished run of a plain step's work (its own commit)."""
    return sql.Identifier(f"{prefix}_druns")


def create(dsn: str, prefix: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in (effects(prefix), runs(prefix)):
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (job_id uuid, step text, calls integer NOT NULL DEFAULT 1,"
                    " PRIMARY KEY (job_id, step))"
                ).format(table)
            )


def drop(dsn: str, prefix: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in (effects(prefix), runs(prefix)):
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))


_COUNT: Final = (
    "INSERT INTO {} AS t (job_id, step) VALUES (%s, %s)"
    " ON CONFLICT (job_id, step) DO UPDATE SET calls = t.calls + 1"
)


def register(queue: venturi.Queue, dsn: str) -> None:
    local = threading.local()

    def own_connection() -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(dsn, autocommit=True)
            local.conn = conn
        return conn

    def work() -> None:
        time.sleep(random.uniform(0.01, 0.06))

    def transactional(conn: psycopg.Connection[Any], job: str, step: str) -> int:
        conn.execute(sql.SQL(_COUNT).format(effects(queue.prefix)), (job, step))
        work()
        return os.getpid()

    def plain(job: str, step: str) -> int:
        work()
        own_connection().execute(sql.SQL(_COUNT).format(runs(queue.prefix)), (job, step))
        return os.getpid()

    @queue.job(KIND, context=True, lease=2, max_attempts=200, backoff=venturi.constant(0.1))
    def flow(ctx: venturi.JobContext) -> list[int]:
        job = str(ctx.job.id.to_uuid())
        done: list[int] = []
        for i in range(STEPS):
            done.append(ctx.step(f"tx{i}", transactional, job, f"tx{i}", transactional=True))
            done.append(ctx.step(f"plain{i}", plain, job, f"plain{i}"))
            if i == STEPS // 2 - 1:
                ctx.sleep(0.2)
        return done


def main() -> int:
    dsn, prefix, name = sys.argv[1:4]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    queue = venturi.Queue(dsn, prefix=prefix, pool_size=6)
    register(queue, dsn)
    worker = queue.worker(concurrency=4, name=name, poll_interval=0.5, reaper_interval=0.3)
    print("ready", flush=True)
    try:
        worker.run(timeout=10)
    finally:
        queue.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
