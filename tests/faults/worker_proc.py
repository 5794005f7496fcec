"""A real worker process for the fault tests.

``python -m tests.faults.worker_proc DSN PREFIX --name NAME [options]`` (cwd = the repo
root) registers the ledger kinds and runs ``Worker.run()`` in the foreground, so SIGTERM
and SIGINT stop it gracefully and SIGKILL kills it outright. It logs to stderr, one line
per record with a wall-clock timestamp first, so a test can count lines per second.
"""

from __future__ import annotations

import argparse
import logging
import sys

import venturi
from tests.faults.ledger import Ledger, register

LOG_FORMAT = "%(created).3f %(process)d %(threadName)s %(name)s %(levelname)s %(message)s"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="worker_proc")
    parser.add_argument("dsn")
    parser.add_argument("prefix")
    parser.add_argument("--name", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--pool-timeout", type=float, default=10.0)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--max-attempts", type=int, default=25)
    parser.add_argument("--reaper-interval", type=float, default=0.5)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--prefetch", type=int, default=None)
    parser.add_argument("--stop-timeout", type=float, default=10.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)
    queue = venturi.Queue(
        args.dsn, prefix=args.prefix, pool_size=args.pool_size, pool_timeout=args.pool_timeout
    )
    register(
        queue,
        Ledger(args.dsn, args.prefix, args.name),
        lease=args.lease,
        max_attempts=args.max_attempts,
    )
    worker = queue.worker(
        concurrency=args.concurrency,
        name=args.name,
        poll_interval=args.poll_interval,
        reaper_interval=args.reaper_interval,
        prefetch=args.prefetch,
    )
    try:
        worker.run(timeout=args.stop_timeout)
    finally:
        queue.close()
    logging.getLogger("worker_proc").info("exited cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
