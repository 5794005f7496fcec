"""Shared pieces of `venturi bench`: settings, the run ledger, prefixes and SQL helpers."""

from __future__ import annotations

import abc
import statistics
import sys
import threading
import time
import uuid
from typing import Any, LiteralString

import attrs
import psycopg
from psycopg import sql

from venturi.errors import VenturiError
from venturi.events import WorkerEvents
from venturi.models import JobRecord, Outcome
from venturi.prefix import Prefix
from venturi.settlements import Settlement
from venturi.worker.runtime import Worker

BENCH_KIND = "bench.noop"


class BenchFailure(VenturiError):
    """A benchmark round broke a guarantee (a job lost or run twice) or could not finish."""


@attrs.frozen
class BenchSettings:
    """Sizes of one benchmark run; `quick` sizes keep the CI test short."""

    dsn: str
    rounds: int = 5
    jobs: int = 5000
    enqueue_jobs: int = 2000
    many_jobs: int = 20_000
    batch: int = 1000
    latency_samples: int = 250
    latency_interval: float = 0.02
    backlog: int = 1_000_000
    prune_rows: int = 1_000_000
    rss_jobs: int = 20_000
    cpu_jobs: int = 2000
    cpu_ms: float = 3.0
    suspended: int = 100_000
    durable_jobs: int = 20_000
    # The "fair" workload (venturi.bench.fairness).
    fair_backlog: int = 200_000
    fair_small_keys: int = 20
    fair_small_every: float = 0.1
    fair_job_ms: float = 5.0
    fair_seconds: float = 10.0
    fair_weight_seconds: float = 60.0
    fair_weight_backlog: int = 120_000
    fair_deep_jobs: int = 100_000
    fair_keys: int = 1000
    fair_per_key: int = 100
    fair_claims: int = 200
    fair_claim_backlog: int = 1_000_000
    fair_claim_keys: int = 10_000
    # The "soak" workload (venturi.bench.soak).
    soak_seconds: float = 60.0
    # The "held-horizon" workload (venturi.bench.horizon): sustained rounds on each side.
    held_rounds: int = 5
    # Also hold it with a replication slot a stopped standby left (venturi.bench.standby).
    held_slot: bool = False
    fillfactor: int | None = None
    compare_unprepared: bool = False
    timeout: float = 300.0

    @classmethod
    def quick(cls, dsn: str, **overrides: Any) -> BenchSettings:
        """Small sizes that check every workload's correctness in seconds."""
        sizes: dict[str, Any] = {
            "rounds": 2,
            "jobs": 200,
            "enqueue_jobs": 100,
            "many_jobs": 400,
            "batch": 200,
            "latency_samples": 15,
            "backlog": 2000,
            "prune_rows": 3000,
            "rss_jobs": 300,
            "cpu_jobs": 60,
            "suspended": 2000,
            "durable_jobs": 200,
            "fair_backlog": 3000,
            "fair_seconds": 1.0,
            "fair_weight_seconds": 1.0,
            "fair_weight_backlog": 2000,
            "fair_deep_jobs": 400,
            "fair_keys": 20,
            "fair_per_key": 10,
            "fair_claims": 10,
            "fair_claim_backlog": 2000,
            "fair_claim_keys": 100,
            "soak_seconds": 4.0,
            "held_rounds": 2,
            "timeout": 60.0,
        }
        return cls(dsn, **{**sizes, **overrides})


def clock() -> float:
    """Seconds on CLOCK_MONOTONIC: one system-wide clock on Linux, so a time read in a
    worker process compares with one read in the bench's own process."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Ledger:
    """Records which job numbers ran and when their handler started (`clock`).

    Handlers call `record` from worker threads; `check` proves each of ``expected``
    numbers ran exactly once. `starts` lists every start in order, duplicates included,
    so a worker process can hand its ledger to the bench (`record` with ``at``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[int, float] = {}
        self._duplicates: list[int] = []
        self._every: list[tuple[int, float]] = []
        self._complete = threading.Event()
        self._target = 0

    def reset(self, target: int) -> None:
        with self._lock:
            self._started.clear()
            self._duplicates.clear()
            self._every.clear()
            self._target = target
            self._complete.clear()

    def record(self, n: int, at: float | None = None) -> None:
        """Job ``n``'s handler started now (or at ``at``, a `clock` reading)."""
        now = clock() if at is None else at
        with self._lock:
            self._every.append((n, now))
            if n in self._started:
                self._duplicates.append(n)
            else:
                self._started[n] = now
            if len(self._started) >= self._target:
                self._complete.set()

    def wait(self, timeout: float) -> bool:
        """Block until every expected number ran once; False after ``timeout``."""
        return self._complete.wait(timeout)

    def starts(self) -> list[tuple[int, float]]:
        """Every start recorded, in order: (job number, `clock` reading)."""
        with self._lock:
            return list(self._every)

    def started_at(self, n: int) -> float:
        with self._lock:
            return self._started[n]

    def check(self, expected: int, what: str) -> None:
        with self._lock:
            seen = set(self._started)
            duplicates = list(self._duplicates)
        if duplicates:
            raise BenchFailure(f"{what}: jobs {sorted(set(duplicates))[:5]} ran more than once")
        missing = set(range(expected)) - seen
        if missing or len(seen) != expected:
            raise BenchFailure(
                f"{what}: {len(missing)} of {expected} jobs never ran "
                f"(e.g. {sorted(missing)[:5]}); {len(seen)} distinct ran"
            )


class Countdown:
    """A thread-safe counter that sets an event when it reaches its target."""

    def __init__(self, target: int) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._target = target
        self.done = threading.Event()
        if target <= 0:
            self.done.set()

    def add(self, amount: int = 1) -> None:
        with self._lock:
            self._count += amount
            if self._count >= self._target:
                self.done.set()

    @property
    def count(self) -> int:
        with self._lock:
            return self._count


class Settled(WorkerEvents):
    """Counts a worker's settlements that applied (their transaction committed)."""

    def __init__(self, target: int) -> None:
        self.countdown = Countdown(target)

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        if outcome is not None:
            self.countdown.add()


def new_prefix(label: str) -> str:
    """A prefix no other run uses (dropped at the end of the run)."""
    return f"bench_{label}_{uuid.uuid4().hex[:8]}"


def compose(template: LiteralString, prefix: str, **names: str) -> sql.Composed:
    """``template`` with the prefix's placeholders and extra ``names`` as identifiers."""
    holders = dict(Prefix(prefix).placeholders())
    holders.update({key: sql.Identifier(value) for key, value in names.items()})
    return sql.SQL(template).format(**holders)


def fetch_one(
    conn: psycopg.Connection[Any], query: sql.Composed, params: Any = None
) -> tuple[Any, ...]:
    row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
    if row is None:
        raise BenchFailure(f"no row from {query.as_string(conn)[:80]}")
    return row


def set_fillfactor(conn: psycopg.Connection[Any], prefix: str, fillfactor: int | None) -> None:
    """Override the jobs table's fillfactor (for measuring it); pages written later use it."""
    if fillfactor is None:
        return
    if not 10 <= fillfactor <= 100:
        raise BenchFailure(f"fillfactor must be within [10, 100], got {fillfactor}")
    conn.execute(
        sql.SQL("ALTER TABLE {} SET (fillfactor = {})").format(
            sql.Identifier(Prefix(prefix).jobs), sql.Literal(fillfactor)
        )
    )


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile by linear interpolation (values need not be sorted)."""
    if not values:
        raise BenchFailure("no samples to take a percentile of")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    cuts = statistics.quantiles(ordered, n=1000, method="inclusive")
    index = min(len(cuts) - 1, max(0, round(fraction * 1000) - 1))
    return cuts[index]


class HorizonHold(abc.ABC):
    """Something that holds back the xmin horizon for a workload (a snapshot, a slot):
    `taken` records the horizon it holds, as another session sees it, and `check` fails
    unless it still holds that one. Subclasses say what they are (``holder``) and read
    their xmin (`current_xmin`)."""

    holder: str
    xmin: str | None = None

    @abc.abstractmethod
    def current_xmin(self, observer: psycopg.Connection[Any]) -> str | None:
        """The xmin it holds now, as ``observer`` sees it (None: it holds none)."""

    def taken(self, observer: psycopg.Connection[Any]) -> None:
        """Record the horizon held now, as ``observer`` (another session) sees it."""
        self.xmin = self.current_xmin(observer)
        if self.xmin is None:
            raise BenchFailure(f"held-horizon: {self.holder} holds no xmin")

    def check(self, observer: psycopg.Connection[Any], what: str) -> None:
        """Raise `BenchFailure` unless the horizon held is still the one of `taken`."""
        now = self.current_xmin(observer)
        if self.xmin is None or now != self.xmin:
            raise BenchFailure(
                f"{what}: {self.holder}'s xmin was {self.xmin} and is now {now}: "
                "the horizon was not held for the whole run"
            )

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of the horizon."""


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.01) -> None:
    """Poll ``predicate`` until true; raise `BenchFailure` naming ``what`` after timeout."""
    deadline = time.monotonic() + timeout
    stop = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchFailure(f"timed out after {timeout:g}s waiting for {what}")
        stop.wait(interval)


def listening(worker: Worker) -> Worker:
    """``worker`` started, once its LISTEN self-probe came back (stopped if it never
    does)."""
    worker.start()
    try:
        wait_for(lambda: worker.listening, 10.0, "the worker's LISTEN self-probe")
    except BenchFailure:
        worker.stop(timeout=5)
        raise
    return worker


def serve_until_told(worker: Worker) -> None:
    """In a worker process of the bench: start ``worker``, print ``ready`` once it
    listens, run until the bench closes this process's stdin (or writes a line), then
    stop it."""
    listening(worker)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
    finally:
        worker.stop(timeout=30)


class BackendPeak:
    """The most backends one ``application_name`` held at once, sampled every
    ``interval`` seconds from pg_stat_activity in a thread of its own (with its own
    connection, under another name) while the block runs."""

    def __init__(self, dsn: str, application_name: str, interval: float = 0.005) -> None:
        self.application_name = application_name
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._stop = threading.Event()
        self._sampled = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-backends", daemon=True)

    def __enter__(self) -> BackendPeak:
        self._thread.start()
        self._sampled.wait(5)  # the block starts with the first count taken
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._conn.close()

    def _sample(self) -> None:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        while True:
            row = self._conn.execute(query, (self.application_name,)).fetchone()
            self.peak = max(self.peak, int(row[0]) if row else 0)
            self.samples += 1
            self._sampled.set()
            if self._stop.wait(self.interval):
                return
