"""Worker processes for `venturi bench`: pick-up latency as deployed, a worker's peak
RSS, and scaling over processes with no-op and CPU-bound jobs.

The child (``python -m venturi.bench.worker PREFIX CONCURRENCY [CPU_LOOPS] [--starts]``,
DSN in ``VENTURI_DSN``) starts a worker for the bench kind, prints one ``ready`` line once
it listens, runs jobs (each burning ``CPU_LOOPS`` loops of pure Python with `burn`, if
given) until a line (or EOF) arrives on stdin, stops gracefully and prints one JSON line
with the jobs it ran, its peak RSS and, with ``--starts``, when each job's handler
started (`venturi.bench.support.clock`). `drive` and `latency` are the parent's side.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

from psycopg.conninfo import make_conninfo

from venturi.bench.support import (
    BENCH_KIND,
    BackendPeak,
    BenchFailure,
    Countdown,
    Ledger,
    serve_until_told,
    wait_for,
)
from venturi.bench.workloads import VenturiBench, latency_figures
from venturi.client import Queue
from venturi.models import NewJob

# How often the cpu workload checks whether its jobs are done: a 2,000-job drain takes
# seconds, so this costs under 1% of precision and next to no CPU.
CPU_POLL_INTERVAL: Final = 0.025
# The child's flag that asks for each handler start's time in its report.
STARTS_FLAG = "--starts"


def main(argv: list[str] | None = None) -> int:
    """The child process: run the bench kind until told to stop on stdin (or, given
    ``burn LOOPS JOBS``, the CPU ceiling's child)."""
    args = argv if argv is not None else sys.argv[1:]
    if args[0] == "burn":
        return burn_main(int(args[1]), int(args[2]))
    record = STARTS_FLAG in args
    args = [arg for arg in args if arg != STARTS_FLAG]
    prefix, concurrency = args[:2]
    loops = int(args[2]) if len(args) > 2 else 0
    ran = Countdown(0)
    ledger = Ledger()
    with Queue(prefix=prefix) as queue:

        @queue.job(BENCH_KIND, lease=60)
        def noop(n: int) -> None:
            if record:
                ledger.record(n)
            if loops:
                burn(loops)
            ran.add()

        worker = queue.worker(concurrency=int(concurrency))
        serve_until_told(worker)
    report: dict[str, Any] = {"ran": ran.count, "maxrss_kb": peak_rss_kb()}
    if record:
        report["starts"] = ledger.starts()
    print(json.dumps(report), flush=True)
    return 0


def burn(loops: int) -> int:
    """Pure-Python arithmetic that holds the GIL throughout: a CPU-bound handler."""
    total = 0
    for i in range(loops):
        total += i * i % 7
    return total


def loops_for(milliseconds: float) -> int:
    """How many `burn` loops take about ``milliseconds`` in this process (best of 5)."""
    sample = 200_000
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        burn(sample)
        best = min(best, time.perf_counter() - started)
    return max(1, int(sample * milliseconds / 1000 / best))


def burn_main(loops: int, jobs: int) -> int:
    """The CPU ceiling's child: once a line arrives on stdin, burn ``jobs`` times."""
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(jobs):
        burn(loops)
    print("done", flush=True)
    return 0


def cpu_ceiling(processes: int, count: int, cpu_loops: int) -> dict[str, float]:
    """The same CPU work as the cpu workload's ``count`` jobs, split over ``processes``
    plain interpreters with no queue: what the machine allows at this moment."""
    share = [count // processes + (1 if i < count % processes else 0) for i in range(processes)]
    command = [sys.executable, "-m", "venturi.bench.worker", "burn", str(cpu_loops)]
    children = [
        subprocess.Popen([*command, str(jobs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for jobs in share
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != b"ready":
                raise BenchFailure(f"a CPU ceiling process exited early ({child.wait()})")
        started = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        for child in children:
            assert child.stdout is not None
            child.stdout.readline()
        elapsed = time.perf_counter() - started
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait(10)
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()
    return {f"cpu.ceiling.{processes}p": count / elapsed}


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


@contextlib.contextmanager
def worker_processes(
    bench: VenturiBench, processes: int, args: list[str], module: str = "venturi.bench.worker"
) -> Iterator[list[subprocess.Popen[str]]]:
    """``processes`` children of ``module`` running ``args`` (here CONCURRENCY
    [CPU_LOOPS] [--starts]; `venturi.bench.soak` has a child of its own) on the bench's
    prefix, yielded once every one listens; any still running on the way out are
    killed. Their connections carry the name `children_name` gives, so their backends
    can be counted."""
    dsn = make_conninfo(bench.settings.dsn, application_name=children_name(bench))
    env = {**os.environ, "VENTURI_DSN": dsn}
    command = [sys.executable, "-m", module, bench.prefix, *args]
    children = [
        subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise BenchFailure(f"a bench worker process exited early ({child.wait()})")
        yield children
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(5)


def children_name(bench: VenturiBench) -> str:
    """The ``application_name`` of the bench's worker processes' connections."""
    return f"venturi-bench-{bench.prefix}"


def stopped(children: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Tell each child to stop; their reports (jobs run, peak RSS, starts)."""
    return [json.loads(child.communicate("stop\n", timeout=60)[0]) for child in children]


def drive(
    bench: VenturiBench, processes: int, concurrency: int, count: int, cpu_loops: int = 0
) -> dict[str, float]:
    """Start ``processes`` worker processes, enqueue ``count`` jobs once all listen, and
    time until every job's settlement committed (polled in SQL every 10 ms), sampling the
    children's backends meanwhile (``backends.<N>.c<C>``, their peak).

    With ``cpu_loops``, each job burns that many loops: the figure is ``cpu.<N>p``. Then
    nothing is sampled and the poll comes every `CPU_POLL_INTERVAL`: the children use
    every core, and the bench's own queries would take their CPU from them (more with
    more processes, skewing the ratio between process counts)."""
    bench.reset(count)
    args = [str(concurrency)] + ([str(cpu_loops)] if cpu_loops else [])
    with worker_processes(bench, processes, args) as children:
        sampling: contextlib.AbstractContextManager[BackendPeak | None] = (
            contextlib.nullcontext()
            if cpu_loops
            else BackendPeak(bench.settings.dsn, children_name(bench))
        )
        with sampling as backends:
            wal_before = _wal_position(bench)
            bench.queue.enqueue_many([NewJob(BENCH_KIND, {"n": n}) for n in range(count)])
            started = time.perf_counter()
            wait_for(
                lambda: not bench.busy(),
                bench.settings.timeout,
                f"{count} jobs settled",
                interval=CPU_POLL_INTERVAL if cpu_loops else 0.01,
            )
            elapsed = time.perf_counter() - started
            wal_bytes, write_xacts = (
                a - b for a, b in zip(_wal_position(bench), wal_before, strict=True)
            )
        reports = stopped(children)
    what = f"{processes} worker processes"
    ran = sum(int(report["ran"]) for report in reports)
    if ran != count:
        raise BenchFailure(f"{what}: handlers ran {ran} times for {count} jobs")
    bench.verify(count, what, ledger=False)
    peak_mb = max(int(report["maxrss_kb"]) for report in reports) / 1024
    if backends is None:  # the cpu workload, which samples nothing
        return {f"cpu.{processes}p": count / elapsed}
    return {
        f"processes.{processes}.c{concurrency}": count / elapsed,
        f"processes.{processes}.c{concurrency}.wal_bytes_per_job": wal_bytes / count,
        f"processes.{processes}.c{concurrency}.jobs_per_commit": count / max(1, write_xacts),
        f"rss.c{concurrency}": peak_mb,
        f"backends.{processes}.c{concurrency}": backends.peak,
    }


def _wal_position(bench: VenturiBench) -> tuple[int, int]:
    """The server's WAL insert position (bytes) and next transaction id. Between two
    readings they count the WAL written and the transactions that wrote (read-only ones
    take no id), server-wide: exact on a server of the bench's own, inflated by any
    other traffic on a shared one."""
    row = bench.conn.execute(
        "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn,"
        " pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
    ).fetchone()
    if row is None:
        raise BenchFailure("no WAL position from the server")
    return int(row[0]), int(row[1])


def latency(bench: VenturiBench, concurrency: int) -> dict[str, float]:
    """Pick-up latency as deployed: an idle worker in a process of its own with
    ``concurrency`` handler threads, one enqueue every ``latency_interval`` s from this
    process. Milliseconds from each enqueue's commit (its return here) to its handler's
    first line there, both read on CLOCK_MONOTONIC (`clock`): series ``latency.c<N>``."""
    count = bench.settings.latency_samples
    what = f"latency, worker process c{concurrency}"
    bench.reset(count)
    with worker_processes(bench, 1, [str(concurrency), "0", STARTS_FLAG]) as children:
        committed = bench.paced_enqueues(count)
        wait_for(lambda: not bench.busy(), bench.settings.timeout, f"{what}: {count} jobs settled")
        report = stopped(children)[0]
    ledger = Ledger()
    ledger.reset(count)
    for n, at in report["starts"]:
        ledger.record(n, at)
    ledger.check(count, what)
    bench.verify(count, what, ledger=False)
    return latency_figures(f"latency.c{concurrency}", ledger, committed)


if __name__ == "__main__":
    sys.exit(main())
