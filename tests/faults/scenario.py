"""Shared steps of the fault scenarios: set up a prefix, enqueue, watch progress."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs
import psycopg
from psycopg import sql
from ulid import ULID

import venturi
from tests.support import ledger, wait_until
from venturi.store.postgres import PostgresStore

if TYPE_CHECKING:
    from tests.support.fleet import Fleet


def prepare(dsn: str, prefix: str, **queue_options: Any) -> venturi.Queue:
    """A producer queue on a migrated prefix with an empty ledger (no kinds registered)."""
    queue = venturi.Queue(dsn, prefix=prefix, **queue_options)
    queue.migrate()
    ledger.create(dsn, prefix)
    return queue


def enqueue_work(
    queue: venturi.Queue,
    count: int,
    kind: str = ledger.WORK_KIND,
    keys: int = 0,
    **payload: Any,
) -> list[ULID]:
    """``count`` ledger jobs (of ``kind``) in batches of 500; with ``keys``, spread over
    that many concurrency keys in turn."""
    ids: list[ULID] = []
    for start in range(0, count, 500):
        batch = [
            venturi.NewJob(kind, payload, concurrency_key=f"key:{n % keys}" if keys else None)
            for n in range(start, min(start + 500, count))
        ]
        ids += queue.enqueue_many(batch)
    return ids


class Watch:
    """Reads progress from the prefix's tables on an autocommit connection of its own."""

    def __init__(self, dsn: str, prefix: str) -> None:
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.jobs = sql.Identifier(f"{prefix}_jobs")
        self.journal = sql.Identifier(f"{prefix}_journal")
        self.ledger = ledger.table(prefix)

    def rows(self, query: sql.Composable | str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run a query, reconnecting once if the server dropped us (restart tests)."""
        try:
            return self.conn.execute(query, params).fetchall()  # type: ignore[arg-type]
        except psycopg.OperationalError:
            self.conn.close()
            self.conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
            return self.conn.execute(query, params).fetchall()  # type: ignore[arg-type]

    def count(self, status: str) -> int:
        query = sql.SQL("SELECT count(*) FROM {} WHERE status = %s").format(self.jobs)
        return int(self.rows(query, (status,))[0][0])

    def unfinished(self) -> int:
        query = sql.SQL(
            "SELECT count(*) FROM {} WHERE status NOT IN ('completed', 'dead', 'cancelled')"
        ).format(self.jobs)
        return int(self.rows(query)[0][0])

    def executions(self, job_id: ULID | None = None) -> list[tuple[Any, ...]]:
        """Ledger rows (job_id, run_no, worker, pid, started_at, finished_at) by start."""
        where = sql.SQL("WHERE job_id = %s") if job_id else sql.SQL("")
        params = (job_id.to_uuid(),) if job_id else None
        query = sql.SQL(
            "SELECT job_id, run_no, worker, pid, started_at, finished_at FROM {} {}"
            " ORDER BY started_at"
        ).format(self.ledger, where)
        return self.rows(query, params)

    def clock(self) -> datetime:
        value: datetime = self.rows("SELECT clock_timestamp()")[0][0]
        return value

    def close(self) -> None:
        self.conn.close()


def ledger_queue(
    dsn: str,
    prefix: str,
    *,
    store: PostgresStore | None = None,
    lease: float = 30.0,
    worker: str = "inproc",
    **queue_options: Any,
) -> tuple[venturi.Queue, ledger.Ledger]:
    """A migrated queue with the ledger kinds registered, for in-process workers; close
    both when done (the ledger holds a connection per handler thread)."""
    queue = prepare(dsn, prefix, store=store, **queue_options)
    book = ledger.Ledger(dsn, prefix, worker)
    ledger.register(queue, book, lease=lease, max_attempts=25)
    return queue, book


def start_latency(
    queue: venturi.Queue, watch: Watch, timeout: float = 120, ids: list[ULID] | None = None
) -> float:
    """Enqueue one ledger job (its id appended to ``ids``); seconds (database clock) until
    a handler started it."""
    enqueued = watch.clock()
    job_id = queue.enqueue(ledger.WORK_KIND, {})
    if ids is not None:
        ids.append(job_id)

    def started() -> tuple[float] | None:
        rows = watch.executions(job_id)
        return ((rows[0][4] - enqueued).total_seconds(),) if rows else None

    return wait_until(started, timeout, what=f"job {job_id} to start")[0]


@attrs.frozen
class SigkillRun:
    """What `run_under_sigkills` saw: the jobs, the seed, each kill's database time by
    worker name, how long the run took, and the still open `Watch` (the caller closes it)."""

    ids: list[ULID]
    seed: int
    kills: dict[str, datetime]
    elapsed: float
    watch: Watch


def run_under_sigkills(
    dsn: str,
    prefix: str,
    make_fleet: Callable[..., Fleet],
    *,
    kind: str,
    jobs: int,
    kills: int,
    workers: int,
    lease: float,
    reaper_interval: float,
    keys: int = 0,
) -> SigkillRun:
    """``jobs`` ledger jobs of ``kind`` (15 ms each) drained by ``workers`` processes at
    concurrency 4, one SIGKILLed ``kills`` times at random (seed ``VENTURI_FAULT_SEED``),
    paced by progress so all land mid-run, each replaced at once; returns once every job
    is settled. With ``keys``, the jobs are spread over that many concurrency keys."""
    queue = prepare(dsn, prefix)
    ids = enqueue_work(queue, jobs, kind, keys, ms=15, cooperative=False)
    queue.close()
    fleet = make_fleet(dsn, prefix, lease=lease, reaper_interval=reaper_interval, concurrency=4)
    for _ in range(workers):
        fleet.spawn()
    seed = int(os.environ.get("VENTURI_FAULT_SEED", str(time.time_ns() % 100_000)))
    rng = random.Random(seed)
    watch = Watch(dsn, prefix)
    began = time.monotonic()
    killed: dict[str, datetime] = {}
    for number in range(1, kills + 1):
        target = jobs * number // (kills + 2)
        wait_until(lambda t=target: watch.count("completed") >= t, 120, 0.05, "progress")  # type: ignore[misc]
        victim = rng.choice(fleet.alive)
        killed[victim.name] = watch.clock()
        victim.signal(signal.SIGKILL)
        victim.wait_exit(30)
        fleet.spawn(wait=False)
    assert watch.unfinished() > 0, "the run ended before the last kill; use more jobs"
    wait_until(lambda: watch.unfinished() == 0, 300, 0.2, "every job to be settled")
    return SigkillRun(ids, seed, killed, time.monotonic() - began, watch)
