"""An enqueuing process for the failover scenarios.

``python -m tests.faults.enqueuer_process DSN PREFIX OUT [--rate N] [--batch N]`` (cwd =
the repo root) enqueues ledger jobs (`tests.support.ledger.WORK_KIND`, a few
milliseconds each) about ``rate`` times a second, ``batch`` at a time (one `enqueue`
each for 1, one `enqueue_many` otherwise), until SIGTERM or SIGINT. Every call that
returned is acknowledged: its ids go to ``OUT``, one ``ok ID`` line each, written and
flushed before the next call, so what the file holds is what the application was told
was enqueued. A call that raised leaves one ``err`` line and the loop goes on.
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import threading
import time

import venturi
from tests.support import ledger
from venturi.errors import first_line

LOG_FORMAT = "%(created).3f %(process)d %(threadName)s %(name)s %(levelname)s %(message)s"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="enqueuer_process")
    parser.add_argument("dsn")
    parser.add_argument("prefix")
    parser.add_argument("out")
    parser.add_argument("--rate", type=float, default=40.0, help="calls per second")
    parser.add_argument("--batch", type=int, default=1, help="jobs per call")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    queue = venturi.Queue(args.dsn, prefix=args.prefix, pool_size=2)
    rng = random.Random()
    interval = 1.0 / args.rate
    with open(args.out, "a", buffering=1) as out:
        print("ready", flush=True)
        next_call = time.monotonic()
        while not stop.is_set():
            jobs = [
                venturi.NewJob(ledger.WORK_KIND, {"ms": rng.randrange(5, 60)})
                for _ in range(args.batch)
            ]
            try:
                if args.batch == 1:
                    ids = [queue.enqueue(jobs[0].kind, jobs[0].payload)]
                else:
                    ids = queue.enqueue_many(jobs)
            except venturi.VenturiError as exc:
                out.write(f"err {time.time():.3f} {first_line(exc)}\n")
            else:
                out.write("".join(f"ok {job_id}\n" for job_id in ids))
            next_call = max(next_call + interval, time.monotonic())
            stop.wait(next_call - time.monotonic())
    queue.close()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
