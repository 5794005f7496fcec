"""Flow control across processes: four worker processes at concurrency 16 each share one
limited kind, and the limits hold for all of them together. A limit kept in Python, or
per process, would let four times as many through."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from psycopg import sql

from tests.support import Probe, postgres_store, wait_until
from venturi import NewJob, Queue

pytestmark = pytest.mark.slow

WAIT = 120.0


class ClaimedSampler:
    """Counts the kind's claimed rows in SQL, over and over, on its own connection."""

    def __init__(self, dsn: str, prefix: str) -> None:
        self.probe = Probe(dsn, prefix)
        self.samples = 0
        self.highest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ClaimedSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        # A sample every millisecond or so: often enough to see any moment of four, while
        # leaving the two cores to the workers.
        while not self._stop.wait(0.001):
            claimed = self.probe.count("jobs", "kind = 'limited' AND status = 'claimed'")
            self.highest = max(self.highest, claimed)
            self.samples += 1

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.probe.close()


def ledger(probe: Probe, table: str, count: int) -> list[tuple[Any, ...]]:
    """The ledger's ``count`` rows, once the workers wrote them all (they lag the runs)."""
    counted = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    wait_until(
        lambda: probe.conn.execute(counted).fetchone() == (count,),
        timeout=30,
        what=f"{count} ledger rows",
    )
    query = sql.SQL(
        "SELECT concurrency_key, claimed_at, started, ended FROM {} ORDER BY claimed_at"
    ).format(sql.Identifier(table))
    return probe.conn.execute(query).fetchall()


def most_overlapping(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same time)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = highest = 0
    for _, step in events:
        running += step
        highest = max(highest, running)
    return highest


def most_in_window(moments: list[datetime], window: timedelta) -> int:
    """The most moments within any half-open window [t, t + window)."""
    ordered = sorted(moments)
    highest = first = 0
    for last, moment in enumerate(ordered):
        while ordered[first] <= moment - window:
            first += 1
        highest = max(highest, last - first + 1)
    return highest


def test_the_checks_see_a_staged_violation() -> None:
    assert most_overlapping([(0.0, 2.0), (1.0, 3.0), (1.5, 1.6), (3.0, 4.0)]) == 3
    assert most_overlapping([(0.0, 1.0), (1.0, 2.0)]) == 1
    start = datetime(2026, 1, 1)
    moments = [start + timedelta(milliseconds=10 * i) for i in range(101)]
    assert most_in_window(moments, timedelta(seconds=1)) == 100
    assert most_in_window(moments[::2], timedelta(seconds=1)) == 50


def test_the_sampler_sees_a_staged_excess(queue: Queue, probe: Probe, database_dsn: str) -> None:
    queue.enqueue_many([NewJob("limited", {"n": i}) for i in range(4)])
    with ClaimedSampler(database_dsn, queue.prefix) as sampler:
        postgres_store(queue).claim("staged", {"limited": 30.0}, 4)  # no limit declared
        wait_until(lambda: sampler.highest == 4, timeout=10, what="the sampler to see 4")


def drain(queue: Queue, probe: Probe, count: int, what: str) -> float:
    """Wait until ``count`` jobs of the kind completed; returns the seconds it took."""
    started = time.monotonic()
    wait_until(
        lambda: probe.count("jobs", "kind = 'limited' AND status = 'completed'") == count,
        timeout=WAIT,
        what=what,
    )
    return time.monotonic() - started


def test_four_processes_never_run_more_than_the_global_concurrency(
    queue: Queue,
    probe: Probe,
    flow_workers: Callable[..., None],
    flow_ledger: str,
    database_dsn: str,
) -> None:
    jobs, limit, sleep = 2000, 3, 0.01
    flow_workers("--limit", str(limit), "--sleep", str(sleep))
    with ClaimedSampler(database_dsn, queue.prefix) as sampler:
        queue.enqueue_many([NewJob("limited", {"n": i}) for i in range(jobs)])
        elapsed = drain(queue, probe, jobs, "2,000 jobs limited to 3 to drain")
    runs = ledger(probe, flow_ledger, jobs)
    assert len(runs) == jobs
    overlap = most_overlapping([(started, ended) for _, _, started, ended in runs])
    ideal = jobs * sleep / limit
    ran = sum(ended - started for _, _, started, ended in runs)
    print(
        f"concurrency={limit}: most claimed seen {sampler.highest} in {sampler.samples} "
        f"samples, most runs overlapping {overlap}; drained {jobs} in {elapsed:.1f}s "
        f"({jobs / elapsed:.0f}/s; the sleep alone allows {ideal:.1f}s); handlers ran "
        f"{ran / jobs * 1000:.1f}ms each, the places were busy {ran / (elapsed * limit):.0%}"
    )
    assert sampler.highest == limit
    assert overlap <= limit
    assert sampler.samples > 100


def test_four_processes_start_no_more_than_the_rate_in_any_window(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    jobs, rate = 300, 50
    flow_workers("--rate", f"{rate}/s")
    started = time.monotonic()
    queue.enqueue_many([NewJob("limited", {"n": i}) for i in range(jobs)])
    drain(queue, probe, jobs, "300 jobs limited to 50/s to drain")
    runs = ledger(probe, flow_ledger, jobs)
    claims = [claimed_at for _, claimed_at, _, _ in runs]
    most = most_in_window(claims, timedelta(seconds=1))
    span = (max(claims) - min(claims)).total_seconds()
    sustained = (jobs - rate) / span  # the first window's burst is free
    print(
        f"rate={rate}/s: most claims in any 1 s window {most}; {jobs} runs over {span:.2f}s "
        f"after the first ({sustained:.1f}/s sustained; {time.monotonic() - started:.1f}s)"
    )
    assert most <= rate
    assert most == rate  # the limit is reached, not merely respected
    assert sustained > 0.8 * rate


def test_a_busy_key_does_not_hold_back_other_keys(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    flow_workers("--key-limit", "1")
    hot = [NewJob("limited", {"n": i}, concurrency_key="hot") for i in range(1000)]
    spread = [
        NewJob("limited", {"n": i}, concurrency_key=f"customer:{i % 100}") for i in range(1000)
    ]
    queue.enqueue_many(hot + spread)
    drain(queue, probe, 2000, "2,000 keyed jobs to drain")
    runs = ledger(probe, flow_ledger, 2000)
    hot_end = max(ended for key, _, _, ended in runs if key == "hot")
    spread_end = max(ended for key, _, _, ended in runs if key != "hot")
    first = min(started for _, _, started, _ in runs)
    by_key: dict[str, list[tuple[float, float]]] = {}
    for key, _, started, ended in runs:
        by_key.setdefault(key, []).append((started, ended))
    print(
        f"key_concurrency=1: the 1,000 spread jobs done after {spread_end - first:.2f}s, "
        f"the 1,000 on one key after {hot_end - first:.2f}s"
    )
    assert max(most_overlapping(intervals) for intervals in by_key.values()) == 1
    assert spread_end - first < (hot_end - first) / 2
