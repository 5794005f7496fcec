"""A worker process for the hostile settlements, run as
``python -m tests.worker.hostile_proc DSN PREFIX`` from the project root.

It registers the kind ``noted``, whose handler notes a text holding a NUL and returns,
with a short lease (a run let go comes back within seconds), prints ``ready`` once its
listener's self-probe came back, and runs `Worker.run` until SIGTERM.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import venturi
from venturi import JobContext


def main(dsn: str, prefix: str) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    queue = venturi.Queue(dsn, prefix=prefix, pool_size=4)

    @queue.job("noted", context=True, lease=2, max_attempts=3)
    def noted(ctx: JobContext) -> None:
        ctx.note("before\x00after")  # no payload could carry it: payloads refuse NUL

    worker = queue.worker(concurrency=2, poll_interval=1.0, reaper_interval=0.2)
    threading.Thread(target=_announce_ready, args=(worker,), daemon=True).start()
    worker.run(timeout=10)
    queue.close()


def _announce_ready(worker: venturi.Worker) -> None:
    deadline = time.monotonic() + 60
    while not worker.listening and time.monotonic() < deadline:
        time.sleep(0.01)
    print("ready" if worker.listening else "not listening", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
