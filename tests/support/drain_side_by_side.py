"""Side-by-side drains of two or more venturi versions, each installed in a venv of its own.

    python -m tests.support.drain_side_by_side --pairs 10 --jobs 3000 \
        before=/path/to/venv-a/bin/python now=/path/to/venv-b/bin/python

Each version runs as one long-lived process of its own interpreter (its own prefix,
queue and worker threads, `VenturiBench.drain` of its own venturi); each round asks
them in a shuffled order for a drain at concurrency 1, 4 and 16, so every version meets
the same server load. Prints each round's rates, and per concurrency the median of
each later version's per-round ratio to the first, with its interquartile range. Not
run by the suite (it needs the other versions' venvs); env ``VENTURI_DSN`` names the
server (default: the local test database).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys

CONCURRENCIES = (1, 4, 16)


def serve(jobs: int) -> None:
    """One version's side: drain ``jobs`` jobs at the concurrency each stdin line names."""
    from venturi.bench.support import BenchSettings
    from venturi.bench.workloads import VenturiBench

    dsn = os.environ.get("VENTURI_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    bench = VenturiBench(BenchSettings(dsn=dsn, jobs=jobs, timeout=600.0), label="ab")
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            concurrency = int(line)
            print(bench.drain(concurrency)[f"drain.c{concurrency}"], flush=True)
    finally:
        bench.close()


def drive(pairs: int, jobs: int, versions: list[tuple[str, str]]) -> None:
    procs: dict[str, subprocess.Popen[str]] = {}
    for name, python in versions:
        proc = subprocess.Popen(
            [python, __file__, "serve", str(jobs)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        procs[name] = proc
    names = [name for name, _ in versions]
    rates: dict[tuple[str, int], list[float]] = {(n, c): [] for n in names for c in CONCURRENCIES}
    try:
        for round_ in range(1, pairs + 1):
            for c in CONCURRENCIES:
                for name in random.sample(names, len(names)):
                    proc = procs[name]
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(f"{c}\n")
                    proc.stdin.flush()
                    rates[name, c].append(float(proc.stdout.readline()))
                row = " ".join(f"{n}={rates[n, c][-1]:7.0f}" for n in names)
                print(f"round {round_} c{c}: {row}", flush=True)
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
    base = names[0]
    for c in CONCURRENCIES:
        medians = " ".join(f"{n}={statistics.median(rates[n, c]):.0f}" for n in names)
        print(f"c{c} median jobs/s: {medians}")
        for other in names[1:]:
            ratios = sorted(a / b for a, b in zip(rates[other, c], rates[base, c], strict=True))
            q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            print(
                f"c{c} {other}/{base}: median {statistics.median(ratios):.3f} "
                f"IQR {q[0]:.3f}-{q[2]:.3f} min-max {ratios[0]:.3f}-{ratios[-1]:.3f} "
                f"(n={len(ratios)})"
            )


def main(args: list[str]) -> None:
    if args[0] == "serve":
        serve(int(args[1]))
        return
    pairs = int(args[args.index("--pairs") + 1])
    jobs = int(args[args.index("--jobs") + 1])
    versions = [(name, python) for name, python in (a.split("=", 1) for a in args if "=" in a)]
    drive(pairs, jobs, versions)


if __name__ == "__main__":
    main(sys.argv[1:])
