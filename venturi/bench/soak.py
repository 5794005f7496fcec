"""The ``soak`` workload of `venturi bench`: a concurrency-16 worker process under steady
mixed load for ``soak_seconds``, its resident set size read every second.

The load is what a long-running worker meets: about `SOAK_RATE` jobs/s, of which most
complete, some fail once and retry after a short delay, some pause once, some die at
once; a periodic job fires every second, and a short retention (`soak_retention`)
prunes finished jobs every 10 s. The figures are the worker's RSS after a warm-up
(a quarter of the run, at most `WARM_UP`), at the end, at its peak, and end over start
(``soak.growth``): a worker that holds on to memory shows it there.

The child (``python -m venturi.bench.soak PREFIX CONCURRENCY RETENTION``, DSN in
``VENTURI_DSN``) runs the soak kinds until a line arrives on stdin, like
`venturi.bench.worker`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any, Final

from venturi.bench.support import (
    BenchFailure,
    Countdown,
    compose,
    fetch_one,
    serve_until_told,
    wait_for,
)
from venturi.bench.worker import peak_rss_kb, stopped, worker_processes
from venturi.bench.workloads import VenturiBench
from venturi.client import Queue
from venturi.context import JobContext
from venturi.events import WorkerEvents
from venturi.models import NewJob
from venturi.outcomes import Fail, Pause, Retry
from venturi.schedules.retention import Retention

SOAK_KIND: Final = "bench.soak"
TICK_KIND: Final = "bench.soak.tick"
SOAK_CONCURRENCY: Final = 16
# Jobs enqueued per second, in `FEED_BATCHES` batches each second.
SOAK_RATE: Final = 400
FEED_BATCHES: Final = 10
# RSS after this long (or a quarter of the run, if shorter) is the start of the growth.
WARM_UP: Final = 20.0
SAMPLE_INTERVAL: Final = 1.0
# Finished jobs are kept as long as the retention's interval, which is 10 s, or a sixth
# of a shorter soak (1 s at least, a schedule's shortest): a minute's soak prunes five
# times, so every prune's cost shows within the run.
PRUNE_EVERY: Final = 10.0
# Of every 50 job numbers: these fail once (retried 50 ms later), these pause once
# (50 ms), and this one dies at once. The rest complete.
RETRIED: Final = frozenset({1, 11, 21, 31, 41})
PAUSED: Final = frozenset({2, 12, 22, 32, 42})
DEAD: Final = 3
SHORT_DELAY: Final = 0.05


def runs_for(count: int) -> int:
    """Handler runs the soak's first ``count`` job numbers take: one each, two for a
    job retried or paused once."""
    return count + sum(1 for n in range(count) if n % 50 in RETRIED | PAUSED)


class _Pruned(WorkerEvents):
    """Counts the rows the worker's prunes deleted."""

    def __init__(self) -> None:
        self.rows = Countdown(0)

    def jobs_pruned(self, status: str, count: int) -> None:
        self.rows.add(count)


def soak_retention(seconds: float) -> str:
    """The retention of a soak of ``seconds`` (`PRUNE_EVERY`), as `Retention.of` text:
    the child's command line carries it."""
    every = f"{max(1.0, min(PRUNE_EVERY, seconds / 6)):g}s"
    return ",".join(f"{field}={every}" for field in ("completed", "cancelled", "dead", "every"))


def main(argv: list[str] | None = None) -> int:
    """The child process: run the soak kinds until told to stop on stdin, then print one
    JSON line with the handler runs of the soak kind, the periodic job's runs, the rows
    pruned and the peak RSS."""
    prefix, concurrency, retention = (argv if argv is not None else sys.argv[1:])[:3]
    ran, ticks, pruned = Countdown(0), Countdown(0), _Pruned()
    with Queue(prefix=prefix) as queue:

        @queue.job(SOAK_KIND, lease=60, context=True, max_attempts=3)
        def soak(ctx: JobContext, n: int) -> dict[str, int]:
            ran.add()
            first = ctx.job.carry is None
            if n % 50 in RETRIED and first:
                raise Retry(after=SHORT_DELAY, carry=1)
            if n % 50 in PAUSED and first:
                raise Pause(after=SHORT_DELAY, carry=1)
            if n % 50 == DEAD:
                raise Fail(f"job {n} dies by design")
            return {"n": n}

        @queue.periodic(TICK_KIND, every=1)
        def tick() -> None:
            ticks.add()

        worker = queue.worker(
            concurrency=int(concurrency), retention=Retention.of(retention), events=pruned
        )
        serve_until_told(worker)
    report = {
        "ran": ran.count,
        "ticks": ticks.count,
        "pruned": pruned.rows.count,
        "maxrss_kb": peak_rss_kb(),
    }
    print(json.dumps(report), flush=True)
    return 0


def process_status(pid: int) -> dict[str, int]:
    """``VmRSS`` (KiB) and ``Threads`` of process ``pid``, from /proc/PID/status."""
    wanted = {"VmRSS", "Threads"}
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in wanted:
                found[name] = int(value.split()[0])
    return found


class Soak:
    """One soak round of ``soak_seconds`` on ``bench``'s prefix; the worker keeps
    ``retention`` (`Retention.of` text; default `soak_retention`)."""

    def __init__(self, bench: VenturiBench, retention: str | None = None) -> None:
        self.bench = bench
        self.retention = retention or soak_retention(bench.settings.soak_seconds)
        # Every sample of the last round: (seconds since the load began, RSS MiB, threads).
        self.samples: list[tuple[float, float, int]] = []
        # The last round's child report: handler runs, periodic runs, rows pruned.
        self.report: dict[str, Any] = {}

    def round(self) -> dict[str, float]:
        bench = self.bench
        seconds = bench.settings.soak_seconds
        bench.reset(0)
        args = [str(SOAK_CONCURRENCY), self.retention]
        with worker_processes(bench, 1, args, module="venturi.bench.soak") as children:
            child = children[0]
            count = self._feed(child, seconds)
            wait_for(
                lambda: not self._unfinished(),
                bench.settings.timeout,
                f"soak: {count} jobs finished",
            )
            report = stopped(children)[0]
        self.report = report
        expected = runs_for(count)
        if int(report["ran"]) != expected:
            raise BenchFailure(f"soak: {report['ran']} handler runs, wanted {expected}")
        if not report["ticks"] or not report["pruned"]:
            raise BenchFailure(
                f"soak: in {seconds:g} s the periodic job ran {report['ticks']} times and "
                f"the retention pruned {report['pruned']} jobs"
            )
        return self._figures(seconds)

    def _feed(self, child: subprocess.Popen[str], seconds: float) -> int:
        """Enqueue `SOAK_RATE` jobs a second for ``seconds``, in paced batches, and read
        the child's RSS every `SAMPLE_INTERVAL`; returns the jobs enqueued."""
        self.samples = []
        batch = SOAK_RATE // FEED_BATCHES
        pause = threading.Event()  # never set: waits out each tick
        started = time.monotonic()
        count = 0
        next_sample = 0.0
        while (now := time.monotonic() - started) < seconds:
            if now >= next_sample:
                self._sample(child.pid, now)
                next_sample += SAMPLE_INTERVAL
            jobs = [NewJob(SOAK_KIND, {"n": n}) for n in range(count, count + batch)]
            self.bench.queue.enqueue_many(jobs)
            count += batch
            pause.wait(max(0.0, started + count / SOAK_RATE - time.monotonic()))
        self._sample(child.pid, time.monotonic() - started)
        return count

    def _sample(self, pid: int, at: float) -> None:
        status = process_status(pid)
        self.samples.append((at, status["VmRSS"] / 1024, status["Threads"]))

    def _unfinished(self) -> bool:
        query = compose(
            "SELECT EXISTS (SELECT FROM {jobs} WHERE kind = %s AND status IN"
            " ('pending', 'claimed'))",
            self.bench.prefix,
        )
        return bool(fetch_one(self.bench.conn, query, (SOAK_KIND,))[0])

    def _figures(self, seconds: float) -> dict[str, float]:
        warm = min(WARM_UP, seconds / 4)
        after = [rss for at, rss, _ in self.samples if at >= warm]
        if not after:
            raise BenchFailure(f"soak: no RSS sample after the {warm:g} s warm-up")
        start, end = after[0], after[-1]
        return {
            "soak.rss_start_mb": start,
            "soak.rss_end_mb": end,
            "soak.rss_peak_mb": max(rss for _, rss, _ in self.samples),
            "soak.growth": end / start,
        }


if __name__ == "__main__":
    sys.exit(main())
