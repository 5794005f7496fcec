"""The execution ledger: every handler run records itself, outside venturi, in SQL.

The one ledger of the suite: in-process workers, the worker processes of
`tests.support.worker_process` and the fault scenarios all register the kinds below.

The transactional kind (`TXN_KIND`) also writes one row of the effects table on
``ctx.conn``, in the transaction its completion commits: that table holds the effects
venturi promises exactly once, beside the ledger's executions (at least once).

Handlers write on a connection of their own (autocommit, one per handler thread), so a
run leaves its row even if its worker is killed a moment later. Each execution carries a
random token and the writes are idempotent, so a write retried after a dropped reply
never counts twice; two rows for one (job, run) therefore mean one claim ran twice.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from typing import Any, Final

import psycopg
import psycopg.errors
from psycopg import sql

import venturi
from venturi.registry import JobOptions

WORK_KIND: Final = "fault.work"
TXN_KIND: Final = "fault.txn"
FAIR_KIND: Final = "fault.fair"
GIL_KIND: Final = "fault.gil"
HANG_KIND: Final = "test.hang"
STUBBORN_KIND: Final = "test.stubborn"
SUICIDE_KIND: Final = "test.suicide"
_RETRY_FOR: Final = 120.0


def table(prefix: str) -> sql.Identifier:
    return sql.Identifier(f"{prefix}_ledger")


def effects_table(prefix: str) -> sql.Identifier:
    """Transactional effects: deliberately no unique key, so a doubled effect would show."""
    return sql.Identifier(f"{prefix}_effects")


def create(dsn: str, prefix: str) -> None:
    """Create the prefix's ledger table (next to its jobs table; dropped with the test)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " job_id uuid NOT NULL, run_no integer NOT NULL, token uuid NOT NULL,"
                " worker text NOT NULL, pid integer NOT NULL,"
                " started_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                " finished_at timestamptz, PRIMARY KEY (job_id, run_no, token))"
            ).format(table(prefix))
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (job_id uuid NOT NULL, run_no integer NOT NULL,"
                " worker text NOT NULL, pid integer NOT NULL)"
            ).format(effects_table(prefix))
        )


def drop(dsn: str, prefix: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}, {}").format(table(prefix), effects_table(prefix))
        )


class Ledger:
    """Writes execution rows from handler threads, reconnecting through outages."""

    def __init__(self, dsn: str, prefix: str, worker: str) -> None:
        self.dsn = dsn
        self.prefix = prefix
        self.table = table(prefix)
        self.worker = worker
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[psycopg.Connection[Any]] = []
        self._closed = False

    def _write(self, query: sql.Composed, params: tuple[Any, ...]) -> None:
        deadline = time.monotonic() + _RETRY_FOR
        while True:
            conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=3)
                    self._local.conn = conn
                    with self._lock:
                        late = self._closed
                        if not late:
                            self._opened.append(conn)
                    if late:
                        # A handler still running after `close` (its worker's stop timed
                        # out) records its run on a connection of its own, closed at once.
                        with conn:
                            conn.execute(query, params)
                        return
                conn.execute(query, params)
                return
            except (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction):
                # A read-only server is a primary demoted in place: reconnect to the new one.
                if conn is not None:
                    conn.close()
                self._local.conn = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        """Close every connection the handler threads opened."""
        with self._lock:
            self._closed = True
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()

    def started(self, ctx: venturi.JobContext) -> uuid.UUID:
        token = uuid.uuid4()
        self._write(
            sql.SQL(
                "INSERT INTO {} (job_id, run_no, token, worker, pid) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING"
            ).format(self.table),
            (ctx.job.id.to_uuid(), ctx.attempt, token, self.worker, os.getpid()),
        )
        return token

    def finished(self, ctx: venturi.JobContext, token: uuid.UUID) -> None:
        self._write(
            sql.SQL(
                "UPDATE {} SET finished_at = clock_timestamp()"
                " WHERE job_id = %s AND run_no = %s AND token = %s"
            ).format(self.table),
            (ctx.job.id.to_uuid(), ctx.attempt, token),
        )


def hold_gil(seconds: float) -> None:
    """Keep the GIL for about ``seconds`` in one C call (a backtracking regex).

    The regex engine never releases the GIL, so no other thread of the process (the
    heartbeat included) runs until it returns. Its cost doubles per character; we
    calibrate on short inputs and extrapolate, erring long.
    """
    pattern = re.compile(r"(a|aa)+$")
    size, took = 18, 0.0
    while took < 0.05:
        size += 1
        began = time.perf_counter()
        pattern.match("a" * size + "b")
        took = time.perf_counter() - began
    # Each extra character multiplies the cost by the golden ratio (Fibonacci growth).
    while took < seconds:
        size += 1
        took *= 1.618
    pattern.match("a" * size + "b")


def register(queue: venturi.Queue, ledger: Ledger, *, lease: float, max_attempts: int) -> None:
    """Register the fault kinds on ``queue``, each recording its runs in ``ledger``."""
    policy: JobOptions = {
        "lease": lease,
        "max_attempts": max_attempts,
        "context": True,
        "backoff": venturi.constant(0.2),
    }

    @queue.job(WORK_KIND, **policy)
    def work(
        ctx: venturi.JobContext, ms: int = 0, first_ms: int | None = None, cooperative: bool = True
    ) -> int:
        """Take ``ms`` (``first_ms`` on the first run); cooperative runs end on ``stopping``."""
        token = ledger.started(ctx)
        seconds = (first_ms if first_ms is not None and ctx.attempt == 1 else ms) / 1000
        if cooperative:
            ctx.stopping.wait(seconds)
        elif seconds:
            time.sleep(seconds)
        ledger.finished(ctx, token)
        return ctx.attempt

    fair_policy: JobOptions = {**policy, "fair": True}

    @queue.job(FAIR_KIND, **fair_policy)
    def fair(
        ctx: venturi.JobContext, ms: int = 0, first_ms: int | None = None, cooperative: bool = True
    ) -> int:
        """`work`, of a fair kind: its jobs take turns across their concurrency keys."""
        return work(ctx, ms, first_ms, cooperative)

    transactional: JobOptions = {**policy, "transactional": True}

    @queue.job(TXN_KIND, **transactional)
    def txn(
        ctx: venturi.JobContext, ms: int = 0, first_ms: int | None = None, cooperative: bool = True
    ) -> int:
        """`work`, with one effects row written in the run's transaction first."""
        ctx.conn.execute(
            sql.SQL("INSERT INTO {} (job_id, run_no, worker, pid) VALUES (%s, %s, %s, %s)").format(
                effects_table(ledger.prefix)
            ),
            (ctx.job.id.to_uuid(), ctx.attempt, ledger.worker, os.getpid()),
        )
        return work(ctx, ms, first_ms, cooperative)

    @queue.job(HANG_KIND, **policy)
    def hang(ctx: venturi.JobContext) -> None:
        """Run until asked to stop, then pause with a checkpoint."""
        ledger.started(ctx)
        ctx.stopping.wait()
        raise venturi.Pause(carry={"stopped_in": os.getpid()}, note="stopping")

    @queue.job(STUBBORN_KIND, **policy)
    def stubborn(ctx: venturi.JobContext) -> None:
        """Ignore ``stopping``: only a second signal gets rid of this run."""
        ledger.started(ctx)
        threading.Event().wait()

    @queue.job(SUICIDE_KIND, **policy)
    def suicide(ctx: venturi.JobContext) -> None:
        """Kill the worker process in the middle of the run."""
        ledger.started(ctx)
        os.kill(os.getpid(), signal.SIGKILL)

    @queue.job(GIL_KIND, **policy)
    def gil(ctx: venturi.JobContext, seconds: float = 0.0) -> int:
        """Hold the GIL for ``seconds`` on the first run only."""
        token = ledger.started(ctx)
        if ctx.attempt == 1:
            hold_gil(seconds)
        ledger.finished(ctx, token)
        return ctx.attempt
