"""A worker process for the process-level tests, run as
``python -m tests.worker.proc_worker DSN PREFIX [options]`` from the project root.

It registers the kinds below on the prefix, prints ``ready`` once its listener's
self-probe came back, and runs `Worker.run` until SIGTERM/SIGINT. Handlers record each
run in the table ``PREFIX_ledger`` (job_id, run_no, pid), created by the test.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

import psycopg
from psycopg import sql

import venturi
from tests.support import postgres_store
from venturi import JobContext, Pause


def ledger_table(prefix: str) -> sql.Identifier:
    return sql.Identifier(f"{prefix}_ledger")


def build(queue: venturi.Queue, args: argparse.Namespace) -> None:
    """Register the test kinds on ``queue``."""
    insert = sql.SQL("INSERT INTO {} (job_id, run_no, pid) VALUES (%s, %s, %s)").format(
        ledger_table(args.prefix)
    )

    def record(ctx: JobContext) -> None:
        with postgres_store(queue).connection() as conn:
            conn.execute(insert, (ctx.job.id.to_uuid(), ctx.attempt, os.getpid()))

    options = {"lease": args.lease, "max_attempts": args.max_attempts, "context": True}

    @queue.job("ledger", **options)
    def ledger(ctx: JobContext, n: int) -> None:
        record(ctx)

    @queue.job("hang", **options)
    def hang(ctx: JobContext) -> None:
        """Run until asked to stop, then pause with a checkpoint."""
        record(ctx)
        ctx.stopping.wait()
        raise Pause(carry={"stopped_in": os.getpid()}, note="stopping")

    @queue.job("stubborn", **options)
    def stubborn(ctx: JobContext) -> None:
        """Ignore ``stopping``: only a second signal gets rid of this run."""
        record(ctx)
        threading.Event().wait()

    @queue.job("suicide", **options)
    def suicide(ctx: JobContext) -> None:
        record(ctx)
        os.kill(os.getpid(), signal.SIGKILL)


def announce_ready(worker: venturi.Worker) -> None:
    deadline = time.monotonic() + 60
    while not worker.listening and time.monotonic() < deadline:
        time.sleep(0.01)
    print("ready" if worker.listening else "not listening", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("prefix")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--max-attempts", type=int, default=5)
    parser.add_argument("--reaper-interval", type=float, default=0.2)
    parser.add_argument("--stop-timeout", type=float, default=30.0)
    parser.add_argument("--kinds", default="")
    args = parser.parse_args(argv)
    with venturi.Queue(args.dsn, prefix=args.prefix, pool_size=args.concurrency + 4) as queue:
        build(queue, args)
        worker = queue.worker(
            kinds=args.kinds.split(",") if args.kinds else None,
            concurrency=args.concurrency,
            poll_interval=1.0,
            reaper_interval=args.reaper_interval,
        )
        threading.Thread(target=announce_ready, args=(worker,), daemon=True).start()
        worker.run(timeout=args.stop_timeout)
    print("stopped", flush=True)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except psycopg.Error as exc:  # pragma: no cover - reported to the test through stderr
        sys.exit(f"worker process failed: {exc}")
