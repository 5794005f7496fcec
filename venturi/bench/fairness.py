"""The ``fair`` workload of `venturi bench`: a fair kind against the same kind without
fairness, side by side in each round, on two prefixes of their own.

- ``fair.starvation``: one key with a deep backlog (``fair_backlog`` due jobs) and
  ``fair_small_keys`` other keys each enqueueing a job every ``fair_small_every``
  seconds, one worker at concurrency 16, handlers of ``fair_job_ms``; the small keys'
  wait from enqueue to start, p50 and p99. Without fairness the small keys wait behind
  the backlog: their jobs still waiting at the end count the time they waited so far
  (so those figures are lower bounds). The fair side runs twice: with the worker's
  adaptive prefetch (jobs claimed beyond the busy handlers, which a small key's job
  waits behind) and with ``prefetch=0``.
- ``fair.weights``: three keys with weights 1, 2 and 4 and deep backlogs; the runs
  each started over ``fair_weight_seconds`` (handlers of ``fair_job_ms``), and each
  key's share against its weight's.
- ``fair.claim``: the time of one claim of 16 jobs (median of ``fair_claims``, nothing
  running them) beside ``fair_claim_backlog`` due jobs of one key, and beside
  ``fair_claim_keys`` keys of 10 jobs each, against the same beside only the jobs the
  claims take.
- ``fair.drain``: no-op jobs drained at concurrency 16, one deep key
  (``fair_deep_jobs``) and ``fair_keys`` keys of ``fair_per_key`` jobs each, fair
  against unfair.

Every drain proves its jobs ran once (each completed on its first claim).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import psycopg

from venturi.bench.support import (
    BenchFailure,
    BenchSettings,
    Settled,
    compose,
    fetch_one,
    listening,
    new_prefix,
    percentile,
    wait_for,
)
from venturi.client import Queue
from venturi.context import JobContext
from venturi.events import WorkerEvents
from venturi.models import JobRecord, NewJob
from venturi.worker.runtime import Worker

FAIR_KIND: Final = "bench.tenant"
FAIR_CONCURRENCY: Final = 16
WEIGHTS: Final = {"w1": 1, "w2": 2, "w4": 4}
DEEP_KEY: Final = "deep"


class _Starts:
    """Each run's start: its key and how long its job waited since it was written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waits: list[tuple[str | None, float]] = []
        self.keys: Counter[str | None] = Counter()

    def record(self, job: JobRecord) -> None:
        waited = (datetime.now(UTC) - job.created_at).total_seconds()
        with self._lock:
            self.waits.append((job.concurrency_key, waited))
            self.keys[job.concurrency_key] += 1

    def clear(self) -> None:
        with self._lock:
            self.waits.clear()
            self.keys.clear()

    def snapshot(self) -> tuple[list[tuple[str | None, float]], Counter[str | None]]:
        with self._lock:
            return list(self.waits), Counter(self.keys)


class FairSide:
    """One queue under its own prefix with the kind `FAIR_KIND`, fair or not; its handler
    records each start and then waits ``job_seconds`` (set per measurement)."""

    def __init__(self, settings: BenchSettings, fair: bool) -> None:
        self.settings = settings
        self.fair = fair
        self.prefix = new_prefix("ff" if fair else "fu")
        self.queue = Queue(settings.dsn, prefix=self.prefix, pool_size=8, retention=None)
        self.queue.migrate()
        self.conn = psycopg.connect(settings.dsn, autocommit=True)
        self.starts = _Starts()
        self.job_seconds = 0.0
        pause = threading.Event()  # never set: waits out job_seconds
        starts = self.starts

        @self.queue.job(FAIR_KIND, lease=60, context=True, fair=fair)
        def tenant(ctx: JobContext, n: int) -> None:
            starts.record(ctx.job)
            if self.job_seconds:
                pause.wait(self.job_seconds)

    def close(self) -> None:
        try:
            self.queue.drop_prefix()
        finally:
            self.queue.close()
            self.conn.close()

    def reset(self) -> None:
        self.conn.execute(
            compose("TRUNCATE {journal}, {deps}, {steps}, {signals}, {waits}, {jobs}", self.prefix)
        )
        self.starts.clear()

    def worker(self, events: WorkerEvents | None = None, prefetch: int | None = None) -> Worker:
        """A started, listening worker at concurrency 16 (which declares the kind)."""
        worker = self.queue.worker(
            concurrency=FAIR_CONCURRENCY,
            events=events or WorkerEvents(),
            poll_interval=5.0,
            prefetch=prefetch,
        )
        listening(worker)
        try:
            if self.fair:
                wait_for(self._declared_fair, 10.0, "the kind to be declared fair")
        except BenchFailure:
            worker.stop(timeout=5)
            raise
        return worker

    def _declared_fair(self) -> bool:
        return any(k.kind == FAIR_KIND and k.limits.fair for k in self.queue.kinds())

    def write(self, jobs: list[NewJob]) -> None:
        """Write ``jobs`` through the store (their keys are not checked against the kind's
        registration: the unfair kind takes keys too), in batches of 50,000."""
        for first in range(0, len(jobs), 50_000):
            self.queue.store.enqueue_many(jobs[first : first + 50_000])

    # -- measurements -----------------------------------------------------------------

    def drain(self, jobs: list[NewJob], what: str) -> float:
        """Jobs per second from the commit of ``jobs`` to the last one's settlement, by a
        worker started before them; every job then completed on its first claim."""
        self.reset()
        self.job_seconds = 0.0
        settled = Settled(len(jobs))
        worker = self.worker(settled)
        try:
            self.write(jobs)
            started = time.perf_counter()
            if not settled.countdown.done.wait(self.settings.timeout):
                raise BenchFailure(
                    f"{what}: {settled.countdown.count} of {len(jobs)} settled "
                    f"within {self.settings.timeout:g}s"
                )
            elapsed = time.perf_counter() - started
        finally:
            worker.stop(timeout=30)
        self._verify(len(jobs), what)
        return len(jobs) / elapsed

    def starvation(self, prefetch: int | None = None) -> dict[str, float]:
        """The small keys' waits (p50, p99 in ms) beside a deep key's backlog."""
        s = self.settings
        self.reset()
        self.job_seconds = s.fair_job_ms / 1000
        worker = self.worker(prefetch=prefetch)
        small_keys = [f"small:{n}" for n in range(s.fair_small_keys)]
        written: list[tuple[str, datetime]] = []
        try:
            self.write(_keyed(DEEP_KEY, s.fair_backlog))
            stop = threading.Event()
            feeder = threading.Thread(
                target=self._feed, args=(small_keys, s.fair_small_every, stop, written)
            )
            feeder.start()
            stop.wait(s.fair_seconds)
            stop.set()
            feeder.join()
            # Give the last small jobs (fair) their turn: at most a few runs' time.
            if self.fair:
                wait_for(
                    lambda: self._small_started() >= len(written),
                    10.0,
                    "the small keys' last jobs to start",
                )
            ended = datetime.now(UTC)
        finally:
            worker.stop(timeout=30)
        waits, _ = self.starts.snapshot()
        small = [wait for key, wait in waits if key is not None and key != DEEP_KEY]
        # Jobs not started yet (only without fairness) waited at least until now.
        started_count = len(small)
        small += [(ended - at).total_seconds() for _, at in written[started_count:]]
        if not small:
            raise BenchFailure("fair.starvation: no small key's job was written")
        side = ("fair" if self.fair else "unfair") + (
            "" if prefetch is None else f".prefetch{prefetch}"
        )
        return {
            f"fair.starvation.{side}.p50_ms": percentile(small, 0.5) * 1000,
            f"fair.starvation.{side}.p99_ms": percentile(small, 0.99) * 1000,
            f"fair.starvation.{side}.started": started_count / len(written),
        }

    def _feed(
        self,
        keys: list[str],
        every: float,
        stop: threading.Event,
        written: list[tuple[str, datetime]],
    ) -> None:
        """Enqueue one job of each key in turn, each key once every ``every`` seconds."""
        gap = every / len(keys)
        for n in itertools.count():
            key = keys[n % len(keys)]
            self.queue.store.enqueue(NewJob(FAIR_KIND, {"n": n}, concurrency_key=key))
            written.append((key, datetime.now(UTC)))
            if stop.wait(gap):
                return

    def _small_started(self) -> int:
        waits, _ = self.starts.snapshot()
        return sum(1 for key, _ in waits if key is not None and key != DEEP_KEY)

    def weights(self) -> dict[str, float]:
        """Each weighted key's share of the runs started over ``fair_weight_seconds``,
        against its weight's share (1 is exact)."""
        s = self.settings
        self.reset()
        self.job_seconds = s.fair_job_ms / 1000
        worker = self.worker()
        try:
            self.queue.set_weights(FAIR_KIND, WEIGHTS)
            self.write([job for key in WEIGHTS for job in _keyed(key, s.fair_weight_backlog)])
            self.starts.clear()
            time.sleep(s.fair_weight_seconds)
            _, counts = self.starts.snapshot()
        finally:
            worker.stop(timeout=30)
        total = sum(counts[key] for key in WEIGHTS)
        if min(counts[key] for key in WEIGHTS) == 0:
            raise BenchFailure(f"fair.weights: a key got no run: {dict(counts)}")
        pending = fetch_one(
            self.conn,
            compose(
                "SELECT count(DISTINCT concurrency_key) FROM {jobs} WHERE status = 'pending'",
                self.prefix,
            ),
        )[0]
        if pending != len(WEIGHTS):
            raise BenchFailure("fair.weights: a key ran out of jobs; raise fair_weight_backlog")
        weight_sum = sum(WEIGHTS.values())
        figures = {"fair.weights.runs": float(total)}
        for key, weight in WEIGHTS.items():
            figures[f"fair.weights.{key}.of_share"] = (counts[key] / total) / (weight / weight_sum)
        return figures

    def claim_cost(self) -> dict[str, float]:
        """Median milliseconds of a claim of 16 beside each backlog (`fair_claims` each)."""
        s = self.settings
        side = "fair" if self.fair else "unfair"
        backlogs = {
            "small": _keyed(DEEP_KEY, 16 * s.fair_claims),
            "deep": _keyed(DEEP_KEY, s.fair_claim_backlog),
            "many_keys": [
                NewJob(FAIR_KIND, {"n": n}, concurrency_key=f"tenant:{n % s.fair_claim_keys}")
                for n in range(s.fair_claim_keys * 10)
            ],
        }
        figures = {}
        self.worker().stop(timeout=30)  # declares the kind; nothing runs the jobs
        for name, jobs in backlogs.items():
            self.reset()
            self.write(jobs)
            self.conn.execute(compose("VACUUM (ANALYZE) {jobs}", self.prefix))
            took = []
            for _ in range(s.fair_claims):
                started = time.perf_counter()
                claimed = self.queue.store.claim("bench-claims", {FAIR_KIND: 60.0}, 16)
                took.append(time.perf_counter() - started)
                if len(claimed) != 16:
                    raise BenchFailure(f"fair.claim.{name}: a claim took {len(claimed)} jobs")
            figures[f"fair.claim.{name}.{side}_ms"] = percentile(took, 0.5) * 1000
        return figures

    def _verify(self, count: int, what: str) -> None:
        completed, total, journal = fetch_one(
            self.conn,
            compose(
                "SELECT count(*) FILTER (WHERE status = 'completed' AND run_count = 1),"
                " count(*), (SELECT count(*) FROM {journal}) FROM {jobs}",
                self.prefix,
            ),
        )
        if not completed == total == journal == count:
            raise BenchFailure(
                f"{what}: wanted {count} jobs run once; {completed} completed on a first "
                f"claim of {total}, {journal} journal rows"
            )


def _keyed(key: str, count: int) -> list[NewJob]:
    return [NewJob(FAIR_KIND, {"n": n}, concurrency_key=key) for n in range(count)]


class FairBench:
    """The fair side and the unfair side; a round runs every measurement on both, in
    alternating order."""

    def __init__(self, settings: BenchSettings) -> None:
        self.settings = settings
        self.fair = FairSide(settings, fair=True)
        self.unfair = FairSide(settings, fair=False)
        self._rounds = 0

    def close(self) -> None:
        try:
            self.fair.close()
        finally:
            self.unfair.close()

    def round(self) -> dict[str, float]:
        s = self.settings
        sides = [self.fair, self.unfair] if self._rounds % 2 == 0 else [self.unfair, self.fair]
        self._rounds += 1
        figures: dict[str, float] = {}
        shapes: dict[str, Callable[[], list[NewJob]]] = {
            "one_key": lambda: _keyed(DEEP_KEY, s.fair_deep_jobs),
            "many_keys": lambda: [
                NewJob(FAIR_KIND, {"n": n}, concurrency_key=f"tenant:{n % s.fair_keys}")
                for n in range(s.fair_keys * s.fair_per_key)
            ],
        }
        for shape, jobs in shapes.items():
            rates = {side.fair: side.drain(jobs(), f"fair.drain.{shape}") for side in sides}
            figures[f"fair.drain.{shape}.fair"] = rates[True]
            figures[f"fair.drain.{shape}.unfair"] = rates[False]
            figures[f"fair.drain.{shape}.ratio"] = rates[True] / rates[False]
        for side in sides:
            figures.update(side.claim_cost())
        for side in sides:
            figures.update(side.starvation())
        figures.update(self.fair.starvation(prefetch=0))
        figures.update(self.fair.weights())
        return figures
