"""A worker process for the schedule race: ``python -m tests.schedules.schedule_proc DSN
PREFIX`` (cwd = the repo root) registers an ``every="1s"`` schedule, prints ``ready`` once
its worker started, and runs until SIGTERM."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from datetime import datetime

import venturi

RACE_KIND = "race.tick"


def register(queue: venturi.Queue) -> None:
    @queue.periodic(RACE_KIND, every="1s")
    def tick(scheduled_at: datetime) -> None:
        """Nothing to do: the test counts the jobs the schedule enqueued."""


def main() -> int:
    dsn, prefix = sys.argv[1:3]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with venturi.Queue(dsn, prefix=prefix, pool_size=4, retention=None) as queue:
        register(queue)
        worker = queue.worker(concurrency=2, poll_interval=1.0).start()
        print("ready", flush=True)
        stop.wait()
        worker.stop(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
