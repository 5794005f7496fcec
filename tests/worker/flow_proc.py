"""A worker process for the flow control races, run as
``python -m tests.worker.flow_proc DSN PREFIX [options]`` from the project root.

It registers the kind ``limited`` with the given limits (and fairness), prints ``ready`` once its
listener's self-probe came back, and runs `Worker.run` until SIGTERM. Each run sleeps
``--sleep`` seconds and records itself in ``PREFIX_flowledger`` (created by the test;
written by a thread of its own, moments later): the claim's database time (its lease's
expiry less the lease), and when the handler started and ended by this host's clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from datetime import timedelta
from queue import SimpleQueue
from typing import Any

import psycopg
from psycopg import sql

import venturi
from venturi import JobContext

LEASE = 30.0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("prefix")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--key-limit", type=int, default=None)
    parser.add_argument("--rate", default=None)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--fair", action="store_true")
    args = parser.parse_args(argv)
    queue = venturi.Queue(args.dsn, prefix=args.prefix, pool_size=args.concurrency + 4)
    insert = sql.SQL(
        "INSERT INTO {} (job_id, concurrency_key, claimed_at, started, ended, pid) "
        "VALUES (%s, %s, %s, %s, %s, %s)"
    ).format(sql.Identifier(f"{args.prefix}_flowledger"))
    pause = threading.Event()
    pid = os.getpid()
    # The ledger's rows are written by a thread of their own, in batches, so that the
    # writes add nothing to a run's time (the place it holds) but the run itself.
    written: SimpleQueue[tuple[Any, ...]] = SimpleQueue()
    threading.Thread(target=_write_ledger, args=(args.dsn, insert, written), daemon=True).start()

    @queue.job(
        "limited",
        context=True,
        lease=LEASE,
        concurrency=args.limit,
        key_concurrency=args.key_limit,
        rate=args.rate,
        fair=args.fair,
    )
    def limited(ctx: JobContext, n: int) -> None:
        started = time.time()
        if args.sleep:
            pause.wait(args.sleep)
        ended = time.time()
        job = ctx.job
        assert job.claim_expires_at is not None
        claimed_at = job.claim_expires_at - timedelta(seconds=LEASE)
        written.put((job.id.to_uuid(), job.concurrency_key, claimed_at, started, ended, pid))

    worker = queue.worker(concurrency=args.concurrency, poll_interval=1.0)
    threading.Thread(target=_announce_ready, args=(worker,), daemon=True).start()
    worker.run(timeout=10)
    queue.close()


def _write_ledger(dsn: str, insert: sql.Composed, written: SimpleQueue[Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = [written.get()]
            while not written.empty():
                rows.append(written.get())
            with conn.cursor() as cur:
                cur.executemany(insert, rows)


def _announce_ready(worker: venturi.Worker) -> None:
    deadline = time.monotonic() + 60
    while not worker.listening and time.monotonic() < deadline:
        time.sleep(0.01)
    print("ready" if worker.listening else "not listening", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
