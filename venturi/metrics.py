"""Prometheus metrics: what workers did (counters, histograms) and what the queue holds
(gauges read from `Queue.stats`, at most once per few seconds however often it is
scraped), each queue in a registry of its own. The server listens on 127.0.0.1 unless
told another address, and answers on ``/metrics`` only.

Needs the ``metrics`` extra (prometheus-client)::

    metrics = QueueMetrics(queue)                  # registry + worker events + gauges
    worker = queue.worker(events=metrics.events)   # or queue.worker(metrics_port=9100)
    app = metrics.wsgi_app()                       # mount at /metrics in a WSGI app
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Generic, Protocol, TypeVar, runtime_checkable

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "venturi.metrics needs prometheus-client: pip install 'venturi[metrics]'"
    ) from exc

from venturi.events import WorkerEvents
from venturi.metrics_server import DEFAULT_HOST, MetricsServer
from venturi.models import JobRecord, Outcome, StatsSnapshot
from venturi.settlements import Settlement
from venturi.store.failover import DatabaseServer
from venturi.upkeep import VacuumHealth

__all__ = [
    "DEFAULT_HOST",
    "FanOutEvents",
    "MetricsEvents",
    "MetricsServer",
    "QueueCollector",
    "QueueMetrics",
    "ServerCollector",
    "ServerSource",
    "StatsSource",
    "VacuumCollector",
    "VacuumSource",
    "wsgi_app",
]

logger = logging.getLogger("venturi.metrics")
T = TypeVar("T")

# Scrapes closer together than this share one `stats()` reading: a dozen scrapers (or a
# loop hitting the port) cost the database one query per period, not one per scrape.
STATS_MAX_AGE: Final = 5.0

# Jobs range from milliseconds to an hour; Prometheus' default buckets stop at 10 s.
DURATION_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0,
)  # fmt: skip
_STATUS_FIELDS: Final = (
    "pending",
    "scheduled",
    "waiting",
    "claimed",
    "completed",
    "dead",
    "cancelled",
)


class StatsSource(Protocol):
    """Anything with `Queue.stats`."""

    def stats(self) -> StatsSnapshot: ...


@runtime_checkable
class ServerSource(Protocol):
    """Anything with `Queue.server`."""

    def server(self) -> DatabaseServer: ...


@runtime_checkable
class VacuumSource(Protocol):
    """Anything with `Queue.vacuum_health`."""

    def vacuum_health(self) -> VacuumHealth: ...


class MetricsEvents(WorkerEvents):
    """Worker events counted into prometheus metrics registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter(
            "venturi_jobs_started", "Runs started, by kind.", ["kind"], registry=registry
        )
        self.settled = Counter(
            "venturi_jobs_settled",
            "Runs whose settlement applied, by kind and journal outcome "
            "(completed, retried, paused, dead, released).",
            ["kind", "outcome"],
            registry=registry,
        )
        self.fenced = Counter(
            "venturi_jobs_fenced",
            "Zombie settlements: runs that ended after losing their claim, refused by the "
            "fence (owner, run epoch, status) and so changing nothing.",
            ["kind", "outcome"],
            registry=registry,
        )
        self.recovered = Counter(
            "venturi_jobs_recovered",
            "Expired claims taken back by the reaper, by kind and result (retried or dead).",
            ["kind", "outcome"],
            registry=registry,
        )
        self.leases_lost = Counter(
            "venturi_leases_lost",
            "Running jobs whose lease the database no longer granted (cancelled, taken over).",
            ["kind"],
            registry=registry,
        )
        self.thread_restarts = Counter(
            "venturi_worker_thread_restarts",
            "Worker threads that raised and were restarted, by thread.",
            ["thread"],
            registry=registry,
        )
        self.scheduled = Counter(
            "venturi_schedule_jobs",
            "Jobs this process's workers enqueued for schedule slots, by schedule.",
            ["schedule"],
            registry=registry,
        )
        self.pruned = Counter(
            "venturi_jobs_pruned",
            "Finished jobs this process's workers deleted by the retention, by status.",
            ["status"],
            registry=registry,
        )
        self.failed = Gauge(
            "venturi_worker_failed",
            "1 once a worker of this process stopped itself (a fatal database error, or a "
            "thread that kept failing); 0 otherwise.",
            registry=registry,
            # In a worker group: 1 while a running child has stopped itself.
            multiprocess_mode="livemax",
        )
        self.run_seconds = Histogram(
            "venturi_job_run_seconds",
            "Handler run time, from start to settlement, by kind.",
            ["kind"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.wait_seconds = Histogram(
            "venturi_job_wait_seconds",
            "Queue wait, from visible (due) to started, by kind.",
            ["kind"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )

    def job_started(self, job: JobRecord, waited: float) -> None:
        self.started.labels(job.kind).inc()
        self.wait_seconds.labels(job.kind).observe(waited)

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        if outcome is not None:
            self.settled.labels(job.kind, outcome.value).inc()
        else:
            self.fenced.labels(job.kind, settlement.requested.value).inc()
        self.run_seconds.labels(job.kind).observe(duration)

    def job_recovered(self, job: JobRecord, outcome: Outcome) -> None:
        # The label keeps its documented values: a recovered job is retried.
        self.recovered.labels(job.kind, "dead" if outcome is Outcome.DEAD else "retried").inc()

    def lease_lost(self, job: JobRecord) -> None:
        self.leases_lost.labels(job.kind).inc()

    def thread_restarted(self, thread: str) -> None:
        # "venturi-handler-3" -> "venturi-handler": a bounded label set.
        self.thread_restarts.labels(thread.rstrip("0123456789").rstrip("-")).inc()

    def worker_failed(self, error: BaseException) -> None:
        self.failed.set(1)

    def schedule_fired(self, schedule: str, jobs: int) -> None:
        self.scheduled.labels(schedule).inc(jobs)

    def jobs_pruned(self, status: str, count: int) -> None:
        self.pruned.labels(status).inc(count)


class QueueCollector(Collector):
    """Gauges of the queue's contents, from a `stats()` reading at most ``max_age``
    seconds old (by ``clock``): scrapes in between serve the cached reading, and
    concurrent scrapes wait for one query rather than each running their own.

    A failed read yields ``venturi_queue_up 0`` (and no other gauge) instead of failing
    the scrape, so an outage shows as data rather than as a missing target; it is kept
    for ``max_age`` too, so a database that is down is not asked again at every scrape.
    """

    def __init__(
        self,
        source: StatsSource,
        max_age: float = STATS_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self._reading = CachedReading(source.stats, "queue stats", max_age, clock)

    def describe(self) -> Iterable[Metric]:
        # Declaring nothing keeps registration from calling collect(), i.e. the database.
        return []

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("venturi_queue_up", "1 if the last scrape read the queue's stats.")
        snapshot = self._reading.get()
        if snapshot is None:
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *_gauges(snapshot)]


class ServerCollector(Collector):
    """``venturi_database_read_write``: the server the queue's connections are on (host
    and port labels) and whether it takes writes, from a `Queue.server` reading at most
    ``max_age`` seconds old. After a failover the labels name the new primary once the
    pool has moved there; 0 says the connections are on a standby or a primary demoted
    in place. Nothing is reported while the database does not answer (see
    ``venturi_queue_up``)."""

    def __init__(
        self,
        source: ServerSource,
        max_age: float = STATS_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self._reading = CachedReading(source.server, "the database server", max_age, clock)

    def describe(self) -> Iterable[Metric]:
        return []  # as QueueCollector: registering it must not reach the database

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "venturi_database_read_write",
            "1 if the server the queue's connections are on (host, port) takes writes; 0 "
            "on a standby or a primary demoted in place.",
            labels=["host", "port"],
        )
        server = self._reading.get()
        if server is not None:
            gauge.add_metric([server.host, str(server.port)], 1.0 if server.writable else 0.0)
        return [gauge]


class VacuumCollector(Collector):
    """What keeps VACUUM from cleaning the jobs table, from a `Queue.vacuum_health`
    reading at most ``max_age`` seconds old: how long the xmin horizon has been held
    (``venturi_horizon_held_seconds``; a slot keeps no start time, so a slot shows in
    ``venturi_horizon_held_transactions`` and ``venturi_horizon_inactive_slots``) and the
    jobs table's dead and live row versions. Nothing is reported while the database
    does not answer."""

    def __init__(
        self,
        source: VacuumSource,
        max_age: float = STATS_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self._reading = CachedReading(source.vacuum_health, "vacuum health", max_age, clock)

    def describe(self) -> Iterable[Metric]:
        return []  # as QueueCollector: registering it must not reach the database

    def collect(self) -> Iterable[Metric]:
        health = self._reading.get()
        if health is None:
            return []
        oldest = health.oldest
        held = GaugeMetricFamily(
            "venturi_horizon_held_seconds",
            "Seconds the longest-held snapshot of a session or prepared transaction has held "
            "back the database's xmin horizon, so that VACUUM removes no newer dead row "
            "version (0 when none; unknown durations, such as other roles' sessions without "
            "pg_read_all_stats, count as 0).",
            value=health.held_seconds,
        )
        age = GaugeMetricFamily(
            "venturi_horizon_held_transactions",
            "Age in transactions of the oldest xmin holding back the horizon: a session, a "
            "replication slot or a prepared transaction (0 when none).",
            value=0.0 if oldest is None else float(oldest.xmin_age),
        )
        slots = GaugeMetricFamily(
            "venturi_horizon_inactive_slots",
            "Replication slots holding back the xmin horizon that no standby uses: nothing "
            "moves their xmin until the standby reconnects or the slot is dropped.",
            value=float(health.inactive_slots),
        )
        families: list[Metric] = [held, age, slots]
        if health.dead is not None:
            families.append(
                GaugeMetricFamily(
                    "venturi_jobs_dead_rows",
                    "Dead row versions in the jobs table waiting for a vacuum (the server's "
                    "statistics); every claim walks past their index entries.",
                    value=float(health.dead),
                )
            )
            families.append(
                GaugeMetricFamily(
                    "venturi_jobs_live_rows",
                    "Live rows in the jobs table (the server's statistics).",
                    value=float(health.live or 0),
                )
            )
        return families


class CachedReading(Generic[T]):
    """One reading shared by the scrapes of ``max_age`` seconds (by ``clock``): scrapes
    in between serve it, concurrent ones wait for one query rather than each running
    their own. A failed read is logged and kept as None for ``max_age`` too, so a
    database that is down is not asked again at every scrape."""

    def __init__(
        self,
        read: Callable[[], T],
        what: str,
        max_age: float = STATS_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not max_age >= 0:
            raise ValueError(f"max_age must be at least 0 seconds, got {max_age}")
        self._read = read
        self._what = what
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._value: T | None = None

    def get(self) -> T | None:
        """The cached reading, refreshed once older than ``max_age``; None if the last
        read failed."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._max_age:
                try:
                    self._value = self._read()
                except Exception as exc:
                    logger.warning("metrics scrape could not read %s: %s", self._what, exc)
                    self._value = None
                self._read_at = self._clock()
            return self._value


def _gauges(snapshot: StatsSnapshot) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "venturi_queue_jobs",
        "Jobs by kind and status (pending: due now; scheduled: pending for later; "
        "waiting: for unfinished parents).",
        labels=["kind", "status"],
    )
    oldest = GaugeMetricFamily(
        "venturi_queue_oldest_pending_age_seconds",
        "Seconds the longest-waiting due job has been due, by kind (0 when none).",
        labels=["kind"],
    )
    paused = GaugeMetricFamily(
        "venturi_queue_kind_paused", "1 while the kind is paused (flow control).", labels=["kind"]
    )
    for kind in snapshot.kinds:
        for field in _STATUS_FIELDS:
            jobs.add_metric([kind.kind, field], float(getattr(kind, field)))
        oldest.add_metric([kind.kind], kind.oldest_pending_seconds or 0.0)
        paused.add_metric([kind.kind], 1.0 if kind.paused else 0.0)
    yield jobs
    yield oldest
    yield paused


class QueueMetrics:
    """One queue's metrics in a registry of its own (never prometheus' global one), so
    several queues, and tests, never collide.

    ``events`` goes to ``queue.worker(events=...)``; the queue's gauges are read when
    ``queue`` is given, at most once per ``stats_max_age`` seconds (scrapes in between
    see the last reading).
    """

    def __init__(
        self,
        queue: StatsSource | None = None,
        registry: CollectorRegistry | None = None,
        stats_max_age: float = STATS_MAX_AGE,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.events = MetricsEvents(self.registry)
        if queue is not None:
            self.registry.register(QueueCollector(queue, stats_max_age))
        if isinstance(queue, ServerSource):
            self.registry.register(ServerCollector(queue, stats_max_age))
        if isinstance(queue, VacuumSource):
            self.registry.register(VacuumCollector(queue, stats_max_age))

    def wsgi_app(self) -> Any:
        """A WSGI app serving these metrics in the Prometheus text format."""
        return make_wsgi_app(self.registry)

    def serve(self, port: int, addr: str = DEFAULT_HOST) -> MetricsServer:
        """Serve these metrics at http://ADDR:PORT/metrics in a daemon thread until
        `close`; ``addr`` 127.0.0.1 unless given."""
        return MetricsServer(self.registry, port, addr)


def wsgi_app(queue: StatsSource) -> Any:
    """A WSGI app with ``queue``'s gauges, to mount at ``/metrics`` in a web app.

    For worker counters too, build a `QueueMetrics`, pass its ``events`` to the worker
    and mount its ``wsgi_app()``.
    """
    return QueueMetrics(queue).wsgi_app()


class FanOutEvents(WorkerEvents):
    """Passes every event to several sinks; one that raises is logged, not propagated."""

    def __init__(self, *sinks: WorkerEvents) -> None:
        self.sinks = sinks

    def _each(self, method: str, *args: Any) -> None:
        for sink in self.sinks:
            try:
                getattr(sink, method)(*args)
            except Exception:
                logger.exception("worker event %s of %r failed", method, sink)

    def job_started(self, job: JobRecord, waited: float) -> None:
        self._each("job_started", job, waited)

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        self._each("job_settled", job, settlement, outcome, duration)

    def job_recovered(self, job: JobRecord, outcome: Outcome) -> None:
        self._each("job_recovered", job, outcome)

    def lease_lost(self, job: JobRecord) -> None:
        self._each("lease_lost", job)

    def thread_restarted(self, thread: str) -> None:
        self._each("thread_restarted", thread)

    def worker_failed(self, error: BaseException) -> None:
        self._each("worker_failed", error)

    def schedule_fired(self, schedule: str, jobs: int) -> None:
        self._each("schedule_fired", schedule, jobs)

    def jobs_pruned(self, status: str, count: int) -> None:
        self._each("jobs_pruned", status, count)


def serve_worker_metrics(
    queue: StatsSource, port: int, addr: str, events: WorkerEvents | None
) -> tuple[WorkerEvents, MetricsServer]:
    """For ``queue.worker(metrics_port=...)``: the events the worker should get (the
    metrics', plus the caller's own) and the started server to close when it stops."""
    metrics = QueueMetrics(queue)
    server = metrics.serve(port, addr)
    combined = metrics.events if events is None else FanOutEvents(metrics.events, events)
    return combined, server


def serve_group_metrics(
    directory: str, port: int, addr: str, queue: StatsSource | None
) -> MetricsServer:
    """For a worker group: serve the counters its children write to ``directory``
    (their ``PROMETHEUS_MULTIPROC_DIR``) summed over the children, with ``queue``'s
    gauges when given."""
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    if queue is not None:
        registry.register(QueueCollector(queue))
    if isinstance(queue, ServerSource):
        registry.register(ServerCollector(queue))  # the supervisor's connections
    if isinstance(queue, VacuumSource):
        registry.register(VacuumCollector(queue))
    return MetricsServer(registry, port, addr)


def forget_process(directory: str, pid: int) -> None:
    """Drop an ended child's live gauges (its counters stay in the group's sums)."""
    from prometheus_client.multiprocess import mark_process_dead

    mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
