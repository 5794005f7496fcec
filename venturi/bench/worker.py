"""Worker processes for `venturi bench`: a worker's peak RSS, and scaling over processes.

The child (``python -m venturi.bench.worker PREFIX CONCURRENCY``, DSN in ``VENTURI_DSN``)
starts a worker for the bench kind, prints one ``ready`` line once it listens, runs jobs
until a line (or EOF) arrives on stdin, stops gracefully and prints one JSON line with
the jobs it ran and its peak RSS. `drive` is the parent's side.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time

from venturi.bench.support import BENCH_KIND, BenchFailure, Countdown, wait_for
from venturi.bench.workloads import VenturiBench
from venturi.client import Queue
from venturi.models import NewJob


def main(argv: list[str] | None = None) -> int:
    """The child process: run the bench kind until told to stop on stdin."""
    prefix, concurrency = (argv if argv is not None else sys.argv[1:])[:2]
    ran = Countdown(0)
    with Queue(prefix=prefix) as queue:

        @queue.job(BENCH_KIND, lease=60)
        def noop(n: int) -> None:
            ran.add()

        worker = queue.worker(concurrency=int(concurrency))
        worker.start()
        try:
            wait_for(lambda: worker.listening, 10.0, "the worker's LISTEN self-probe")
            print("ready", flush=True)
            sys.stdin.readline()
        finally:
            worker.stop(timeout=30)
    print(json.dumps({"ran": ran.count, "maxrss_kb": peak_rss_kb()}), flush=True)
    return 0


def peak_rss_kb() -> int:
    """This process's peak resident set size in KiB.

    On Linux, VmHWM of /proc/self/status: getrusage's ru_maxrss survives exec, so a
    child started from a large parent would report the parent's size before the exec.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def drive(bench: VenturiBench, processes: int, concurrency: int, count: int) -> dict[str, float]:
    """Start ``processes`` worker processes, enqueue ``count`` jobs once all listen, and
    time until every job's settlement committed (polled in SQL every 10 ms)."""
    bench.reset(count)
    env = {**os.environ, "VENTURI_DSN": bench.settings.dsn}
    command = [sys.executable, "-m", "venturi.bench.worker", bench.prefix, str(concurrency)]
    children = [
        subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise BenchFailure(f"a bench worker process exited early ({child.wait()})")
        bench.queue.enqueue_many([NewJob(BENCH_KIND, {"n": n}) for n in range(count)])
        started = time.perf_counter()
        wait_for(lambda: not bench.busy(), bench.settings.timeout, f"{count} jobs settled")
        elapsed = time.perf_counter() - started
        reports = [json.loads(child.communicate("stop\n", timeout=60)[0]) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(5)
    what = f"{processes} worker processes"
    ran = sum(int(report["ran"]) for report in reports)
    if ran != count:
        raise BenchFailure(f"{what}: handlers ran {ran} times for {count} jobs")
    bench.verify(count, what, ledger=False)
    peak_mb = max(int(report["maxrss_kb"]) for report in reports) / 1024
    return {
        f"processes.{processes}.c{concurrency}": count / elapsed,
        f"rss.c{concurrency}": peak_mb,
    }


if __name__ == "__main__":
    sys.exit(main())
