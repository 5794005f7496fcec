"""`Queue`: the public entry point for registering, enqueueing, inspecting and working."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, Unpack

import psycopg
from psycopg_pool import ConnectionPool
from ulid import ULID

from venturi.durations import Duration, to_seconds
from venturi.errors import ConfigurationError, ForkedError, UnknownKind
from venturi.events import WorkerEvents
from venturi.kind_control import KindControl
from venturi.models import (
    CleanupCriteria,
    JobId,
    JobStatus,
    NewJob,
    OnDuplicate,
    OnParentFailure,
)
from venturi.monitoring import Monitoring
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES
from venturi.prefix import Prefix
from venturi.registry import DEFAULT_MAX_RESULT_BYTES, JobDefinition, JobFunction, JobOptions
from venturi.retention import DEFAULT_RETENTION, Retention
from venturi.schedule_registry import ScheduleRegistry
from venturi.schedules import Schedule
from venturi.store.dsn import parse_dsn
from venturi.store.hooks import StoreHook
from venturi.store.postgres import DEFAULT_PREPARED_STATEMENTS, PostgresStore
from venturi.store.protocol import Store
from venturi.store.read_only import open_read_store
from venturi.store.statements import Preparation
from venturi.worker.draining import drain
from venturi.worker.runtime import Worker
from venturi.workflows import Results

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_PREFIX = "venturi"


class Queue(ScheduleRegistry, KindControl, Results, Monitoring):
    """One queue: a table-name prefix in one PostgreSQL database, and its registered jobs.

    Thread-safe; share one per process. Create it after `os.fork()` (a queue used in a
    child of the process that made it raises `ForkedError`). Close it with `close` or
    use it as a context manager; a pool passed to `from_pool` is never closed by it.

    ``listen_dsn`` (default: env ``VENTURI_LISTEN_DSN``) is where workers' LISTEN
    connection goes instead of ``dsn``: the server itself when ``dsn`` leads to a
    transaction-pooling proxy. ``prepared_statements`` lets psycopg prepare frequent
    statements on the server: "auto" (the default) on connections straight to it and
    never through a pooling proxy, True on every connection (never behind a transaction
    pooler), False on none.
    ``retention`` (a `Retention`, a mapping of its fields, or None to keep every job) is
    how long workers keep finished jobs: by default completed and cancelled 1 day, dead 7.
    ``max_result_bytes`` (1 MiB) bounds the JSON a run leaves as its result (or carry) for
    every kind registered without a ``max_result_bytes`` of its own: a larger result is
    not kept and the run is dead, its note saying by how many bytes it was over.
    ``read_dsn`` (default: env ``VENTURI_READ_DSN``) is where `get`, `journal`, `history`,
    `stats`, `kinds`, `schedule_rows`, `workflow_status` and the dashboard's reads
    (`workers`, `overview`, `throughput`, `dead_groups`) go, on a small pool of read-only
    connections (a replica, or a read-only role); see `Reads`.
    """

    def __init__(
        self,
        dsn: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        pool_size: int | None = None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        strict: bool = False,
        pool_timeout: float = 10.0,
        listen_dsn: str | None = None,
        prepared_statements: Preparation = DEFAULT_PREPARED_STATEMENTS,
        store: Store | None = None,
        retention: Retention | Mapping[str, Any] | None = DEFAULT_RETENTION,
        read_dsn: str | None = None,
    ) -> None:
        self.retention = Retention.of(retention)
        if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int):
            raise ConfigurationError(f"max_result_bytes must be an int, got {max_result_bytes!r}")
        if max_result_bytes < 1:
            raise ConfigurationError(f"max_result_bytes must be positive, got {max_result_bytes}")
        self.max_result_bytes = max_result_bytes
        if read_dsn is None and store is None:
            read_dsn = os.environ.get("VENTURI_READ_DSN") or None
        if read_dsn is not None:
            parse_dsn(read_dsn, "read_dsn")  # refused before any pool opens
        if store is None:
            resolved = dsn if dsn is not None else os.environ.get("VENTURI_DSN", "")
            store = PostgresStore.from_dsn(
                resolved,
                Prefix(prefix),
                pool_size=pool_size,
                pool_timeout=pool_timeout,
                prepared_statements=prepared_statements,
                max_payload_bytes=max_payload_bytes,
                listen_dsn=_listen_dsn(listen_dsn),
            )
        self.store: Store = store
        self.read_store: Store | None = None
        if read_dsn is not None:
            self.read_store = open_read_store(
                read_dsn,
                store.prefix,
                pool_timeout=pool_timeout,
                prepared_statements=prepared_statements,
            )
        self.strict = strict
        self.definitions: dict[str, JobDefinition] = {}
        self.schedules: dict[str, Schedule] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @classmethod
    def from_pool(
        cls,
        pool: ConnectionPool[Any],
        prefix: str = DEFAULT_PREFIX,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        strict: bool = False,
        listen_dsn: str | None = None,
        retention: Retention | Mapping[str, Any] | None = DEFAULT_RETENTION,
        read_dsn: str | None = None,
    ) -> Queue:
        """Share an application's pool; venturi never closes it.

        Behind a transaction-pooling proxy, build the pool with
        ``kwargs={"prepare_threshold": None}`` and pass ``listen_dsn`` (default: env
        ``VENTURI_LISTEN_DSN``). ``read_dsn`` is taken only as given, never from the
        environment: the pool may hold a test's transaction, whose jobs only it can read.
        """
        store = PostgresStore.from_pool(
            pool,
            Prefix(prefix),
            max_payload_bytes=max_payload_bytes,
            listen_dsn=_listen_dsn(listen_dsn),
        )
        return cls(
            store=store,
            strict=strict,
            retention=retention,
            read_dsn=read_dsn,
            max_result_bytes=max_result_bytes,
        )

    @property
    def prefix(self) -> str:
        return self.store.prefix.name

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise ForkedError(
                f"this Queue was created in process {self._pid} before os.fork(); create a "
                "new Queue in the child (for gunicorn, in a post_fork hook)"
            )

    # -- registration -----------------------------------------------------------------

    def job(
        self,
        kind: str,
        **options: Unpack[JobOptions],
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register the decorated function as the handler of ``kind``.

        Options (`JobOptions`): ``max_attempts`` (5), ``backoff`` (exponential with cap
        and jitter), ``priority`` (0), ``lease`` (60 s), ``timeout`` (None), ``context``,
        and the flow limits every worker keeps together (None: unlimited):
        ``concurrency`` (claimed at once), ``key_concurrency`` (running per
        ``concurrency_key``) and ``rate`` (``"N/s"``, ``"N/m"`` or ``"N/h"`` runs started).
        The payload's keys are the function's keyword arguments (checked at enqueue).
        With ``context=True`` the first argument is the run's `JobContext`; with
        ``transactional=True`` its writes on ``ctx.conn`` commit with the fenced completion.
        ``max_result_bytes`` (default: the queue's) bounds the JSON of its runs' results.
        """

        def register(func: Callable[P, R]) -> JobFunction[P, R]:
            definition = self._define(kind, func, options)
            with self._lock:
                if kind in self.definitions:
                    raise ConfigurationError(f"kind {kind!r} is already registered")
                self.definitions[kind] = definition
            return JobFunction(self, definition, func)

        return register

    # -- enqueue ----------------------------------------------------------------------

    def new_job(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        delay: Duration | None = None,
        at: datetime | None = None,
        dedup_key: str | None = None,
        on_duplicate: OnDuplicate = "keep",
        max_attempts: int | None = None,
        concurrency_key: str | None = None,
        depends_on: Sequence[JobId] | None = None,
        on_parent_failure: OnParentFailure = "cancel",
    ) -> NewJob:
        """Build a checked `NewJob`, filling defaults from the kind's registration."""
        definition = self.definitions.get(kind)
        if definition is None and self.strict:
            raise UnknownKind(f"kind {kind!r} has no registered handler and the queue is strict")
        job = NewJob(
            kind,
            {} if payload is None else payload,
            priority=priority
            if priority is not None
            else (definition.priority if definition else 0),
            delay=delay,
            at=at,
            dedup_key=dedup_key,
            on_duplicate=on_duplicate,
            max_attempts=max_attempts
            if max_attempts is not None
            else (definition.max_attempts if definition else 5),
            concurrency_key=concurrency_key,
            depends_on=depends_on,
            on_parent_failure=on_parent_failure,
        )
        if definition is not None:
            definition.check_payload(job.payload)
            definition.check_concurrency_key(job.concurrency_key)
        return job

    def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: psycopg.Connection[Any] | None = None,
        **options: Any,
    ) -> ULID:
        """Enqueue one job; returns its id (the id of the pending job it merged into).

        Options: ``priority``, ``delay`` or ``at``, ``dedup_key`` with ``on_duplicate``
        ('keep', 'replace' or a function of (old, new) payloads), ``max_attempts``,
        ``concurrency_key`` (for a kind with ``key_concurrency``), ``depends_on`` (parent ids:
        it waits until all completed) with ``on_parent_failure`` ('cancel' or 'run').
        With ``conn`` the insert and its NOTIFY join that connection's transaction and
        commit or roll back with it. Raises `InvalidJob` (nothing written) or
        `StoreUnavailable`.
        """
        self._check_process()
        job = self.new_job(kind, payload, **options)
        return self.store.enqueue(job, conn=conn)

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        """Enqueue many jobs in one round trip (per dedup key, one more); returns ids."""
        self._check_process()
        for job in jobs:
            if not isinstance(job, NewJob):
                raise TypeError(f"enqueue_many takes NewJob values, got {type(job).__name__}")
            definition = self.definitions.get(job.kind)
            if definition is None and self.strict:
                raise UnknownKind(f"kind {job.kind!r} has no registered handler")
            if definition is not None:
                definition.check_payload(job.payload)
                definition.check_concurrency_key(job.concurrency_key)
        return self.store.enqueue_many(list(jobs), conn=conn)

    # -- inspection and housekeeping ----------------------------------------------------

    def migrate(self) -> list[str]:
        """Create or upgrade this prefix's tables; returns the migrations applied."""
        self._check_process()
        return self.store.migrate()

    def cleanup(
        self,
        *,
        finished_before: datetime,
        kind: str | None = None,
        status: JobStatus | str | None = None,
    ) -> int:
        """Delete terminal jobs finished before a time (with their journal); returns count."""
        self._check_process()
        return self.store.cleanup(CleanupCriteria(finished_before, kind, status))

    def cancel(self, job_id: JobId) -> bool:
        """Cancel a pending or running job; False if unknown or already finished."""
        self._check_process()
        return self.store.cancel(job_id)

    def requeue(self, job_id: JobId) -> bool:
        """Put a dead, cancelled or completed job back in line; False if not finished."""
        self._check_process()
        return self.store.requeue(job_id)

    def requeue_dead(self, kind: str | None = None) -> int:
        """Put every dead job (of ``kind``) back in line; returns how many went back.

        A dead job whose dedup key a pending job holds stays dead.
        """
        self._check_process()
        return self.store.requeue_dead(kind, note="requeued with all dead jobs")

    # -- working ----------------------------------------------------------------------

    def worker(
        self,
        kinds: Sequence[str] | None = None,
        concurrency: int = 4,
        priority_floor: int | None = None,
        name: str | None = None,
        poll_interval: Duration = 5.0,
        *,
        events: WorkerEvents | None = None,
        **options: Any,
    ) -> Worker:
        """A worker for this queue's registered kinds (or ``kinds``); call `start` or `run`.

        ``metrics_port=N`` (extra ``metrics``) serves Prometheus metrics on port N
        (``metrics_addr``, default 127.0.0.1: this machine only) until the worker stops.
        """
        self._check_process()
        metrics_port = options.pop("metrics_port", None)
        metrics_addr = options.pop("metrics_addr", "127.0.0.1")
        worker = Worker(
            self.store,
            self.definitions,
            kinds=kinds,
            concurrency=concurrency,
            priority_floor=priority_floor,
            name=name,
            poll_interval=to_seconds(poll_interval, "poll_interval", allow_zero=False),
            events=events,
            owner_pid=self._pid,
            schedules=list(self.schedules.values()),
            retention=options.pop("retention", self.retention),
            **options,
        )
        if metrics_port is not None:
            try:
                from venturi.metrics import serve_worker_metrics
            except ImportError as exc:
                raise ConfigurationError(f"metrics_port: {exc}") from exc
            # Built after the worker, so a refused worker option leaves no server behind.
            worker.events, server = serve_worker_metrics(self, metrics_port, metrics_addr, events)
            worker.stop_hooks.append(server.close)
        return worker

    def drain(self, kinds: Sequence[str] | None = None, *, wait_for: Duration = 0) -> int:
        """Run every due job inline in this thread until none is left; returns runs.

        Retries and pauses that come due while draining run too. With ``wait_for`` it
        also waits, until that many seconds after the call, for jobs that come due by
        then (a retry's backoff, a short delay). Leases are renewed by
        ``ctx.extend_lease()`` only: there is no heartbeat. For tests and scripts.
        """
        self._check_process()
        return drain(self.store, self.definitions, kinds, to_seconds(wait_for, "wait_for"))

    def add_hook(self, hook: StoreHook) -> None:
        """Have ``hook`` watch every write of this queue's store: each enqueue (also
        of many jobs and of a workflow) and each run's settlement, by any worker built
        from this queue in this process (see `venturi.store.hooks`). Tracing
        (`venturi.contrib.otel.instrument`) and the inline test mode attach this way."""
        self.store.hooks.add(hook)

    def remove_hook(self, hook: StoreHook) -> None:
        """Stop ``hook`` watching this queue's store (nothing if it was not added)."""
        self.store.hooks.remove(hook)

    def close(self) -> None:
        """Stop the waiters' listener; close the connection pools this queue opened."""
        self.close_waiters()
        self.store.close()
        if self.read_store is not None:
            self.read_store.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _listen_dsn(value: str | None) -> str | None:
    # ``listen_dsn`` as given, else env ``VENTURI_LISTEN_DSN`` (unset or empty: None).
    return value if value is not None else os.environ.get("VENTURI_LISTEN_DSN") or None
