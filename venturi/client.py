"""`Queue`: the public entry point for registering, enqueueing, reading, controlling and
working a queue: one table-name prefix in one PostgreSQL database.

Everything a caller does goes through here, and everything that reaches the database
goes through the queue's store (`venturi.store.postgres.PostgresStore`, its writes) or
its reads (`venturi.store.reads.ReadStore`, on ``read_dsn`` when given).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, Unpack

import attrs
import psycopg
from psycopg_pool import ConnectionPool
from ulid import ULID

from venturi.durable import check_name
from venturi.durations import Duration, to_seconds
from venturi.errors import (
    ConfigurationError,
    InvalidPayload,
    JobCancelled,
    JobFailed,
    ListenerPolling,
    UnknownKind,
)
from venturi.events import WorkerEvents
from venturi.flow.limits import FairKey, KindState, checked_kinds, checked_weights
from venturi.models import (
    CleanupCriteria,
    HistoryCursor,
    HistoryFilter,
    JobId,
    JobRecord,
    JobStatus,
    JournalRecord,
    NewJob,
    OnDuplicate,
    OnParentFailure,
    StatsSnapshot,
    to_uuid,
    validate_kind,
)
from venturi.observations import DeadGroup, Overview, Throughput, WorkerInfo
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES, encode_json
from venturi.prefix import Prefix
from venturi.registry import (
    DEFAULT_MAX_RESULT_BYTES,
    JobDefinition,
    JobFunction,
    JobOptions,
)
from venturi.schedules.retention import DEFAULT_RETENTION, RETENTION_SCHEDULE, Retention
from venturi.schedules.schedule import (
    DEFAULT_MAX_CATCH_UP,
    CatchUp,
    Schedule,
    ScheduleInfo,
    schedule_for,
)
from venturi.store.connections import Lender, Preparation
from venturi.store.dsn import Dsn
from venturi.store.failover import DatabaseServer
from venturi.store.hooks import StoreHook
from venturi.store.postgres import DEFAULT_PREPARED_STATEMENTS, PostgresStore
from venturi.store.reads import ReadStore, open_read_store
from venturi.upkeep import VacuumHealth
from venturi.waiting import Waiters
from venturi.worker.draining import drain
from venturi.worker.runtime import Worker
from venturi.workflows import Workflow, WorkflowJob, WorkflowStatus

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_PREFIX = "venturi"
DEFAULT_WAIT_SECONDS = 30.0


class Queue:
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
    connections (a replica, or a read-only role); see `venturi.store.reads`.
    """

    def __init__(
        self,
        dsn: str | Dsn | None = None,
        prefix: str = DEFAULT_PREFIX,
        pool_size: int | None = None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        strict: bool = False,
        pool_timeout: float = 10.0,
        listen_dsn: str | Dsn | None = None,
        prepared_statements: Preparation = DEFAULT_PREPARED_STATEMENTS,
        store: PostgresStore | None = None,
        retention: Retention | Mapping[str, Any] | None = DEFAULT_RETENTION,
        read_dsn: str | Dsn | None = None,
    ) -> None:
        self.retention = Retention.of(retention)
        if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int):
            raise ConfigurationError(f"max_result_bytes must be an int, got {max_result_bytes!r}")
        if max_result_bytes < 1:
            raise ConfigurationError(f"max_result_bytes must be positive, got {max_result_bytes}")
        self.max_result_bytes = max_result_bytes
        # Each connection string is parsed once, here, and refused before any pool opens.
        if store is None:
            reading = Dsn.resolve(read_dsn, "read_dsn")
        else:  # a borrowed pool may hold a test's transaction: never the environment's
            reading = None if read_dsn is None else Dsn.parse(read_dsn, "read_dsn")
        if store is None:
            store = PostgresStore.from_dsn(
                Dsn.resolve(dsn) or Dsn.parse(""),
                Prefix(prefix),
                pool_size=pool_size,
                pool_timeout=pool_timeout,
                prepared_statements=prepared_statements,
                max_payload_bytes=max_payload_bytes,
                listen=Dsn.resolve(listen_dsn, "listen_dsn"),
            )
        self.store = store
        # Reads go to ``read_dsn`` when given (a replica, or a read-only role), else to
        # the store's own connections.
        self.reads: ReadStore = store.reads
        self._own_reads = reading is not None
        if reading is not None:
            self.reads = open_read_store(
                reading,
                store.prefix,
                pool_timeout=pool_timeout,
                prepared_statements=prepared_statements,
            )
        self.strict = strict
        self.definitions: dict[str, JobDefinition] = {}
        self.schedules: dict[str, Schedule] = {}
        self._lock = threading.Lock()
        self._waiters: Waiters | None = None

    @classmethod
    def from_pool(
        cls,
        pool: ConnectionPool[Any] | Lender,
        prefix: str = DEFAULT_PREFIX,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        strict: bool = False,
        listen_dsn: str | Dsn | None = None,
        retention: Retention | Mapping[str, Any] | None = DEFAULT_RETENTION,
        read_dsn: str | Dsn | None = None,
    ) -> Queue:
        """Share an application's pool (or a `Lender` of its connection); venturi never
        closes it.

        Behind a transaction-pooling proxy, build the pool with
        ``kwargs={"prepare_threshold": None}`` and pass ``listen_dsn`` (default: env
        ``VENTURI_LISTEN_DSN``). ``read_dsn`` is taken only as given, never from the
        environment: the pool may hold a test's transaction, whose jobs only it can read.
        """
        store = PostgresStore.from_pool(
            pool,
            Prefix(prefix),
            max_payload_bytes=max_payload_bytes,
            listen=Dsn.resolve(listen_dsn, "listen_dsn"),
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

    # -- registration --------------------------------------------------------

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
        ``concurrency_key``) and ``rate`` (``"N/s"``, ``"N/m"`` or ``"N/h"`` runs started);
        ``fair=True`` claims the kind's due jobs in turn across their ``concurrency_key``
        values (weights: `set_weights`). The payload's keys are the function's keyword
        arguments (checked at enqueue).
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

    def periodic(
        self,
        kind: str,
        *,
        cron: str | None = None,
        every: Duration | str | None = None,
        tz: str | None = None,
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        catch_up: CatchUp = "latest",
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
        concurrency_key: str | None = None,
        **options: Unpack[JobOptions],
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register the decorated function as ``kind``'s handler (any `Queue.job` option)
        and a schedule for it, named ``name`` (default ``kind``); see `schedule`."""

        timing: dict[str, Any] = {
            "cron": cron,
            "every": every,
            "tz": tz,
            "name": name,
            "payload": payload,
            "catch_up": catch_up,
            "max_catch_up": max_catch_up,
            "concurrency_key": concurrency_key,
        }

        def register(func: Callable[P, R]) -> JobFunction[P, R]:
            definition = self._define(kind, func, options)
            self._add(definition, timing, register_kind=True)
            return JobFunction(self, definition, func)

        return register

    def schedule(
        self,
        kind: str,
        *,
        cron: str | None = None,
        every: Duration | str | None = None,
        tz: str | None = None,
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        catch_up: CatchUp = "latest",
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
        concurrency_key: str | None = None,
    ) -> Schedule:
        """Add a schedule for the registered ``kind``: a job with ``payload`` at every slot.

        ``cron``: a 5-field expression (or ``@hourly``, ``@daily``, ...) in ``tz`` (a
        zoneinfo name, default UTC); ``every``: a fixed interval of at least 1 s (seconds,
        a timedelta or text like ``"30s"``). Exactly one of them. A handler with a
        ``scheduled_at`` parameter receives the slot's time (aware, UTC). After downtime,
        ``catch_up`` enqueues the ``"latest"`` missed slot, ``"all"`` of them (at most
        ``max_catch_up``, the most recent) or ``"none"``. ``concurrency_key``: the key of
        every job fired, required for a kind with ``key_concurrency`` and refused for any
        other. Workers started later fire it, each slot exactly once. Raises
        `UnknownKind`, `ConfigurationError` or `InvalidJob` (a payload that does not fit
        the handler).
        """
        definition = self.definitions.get(kind)
        if definition is None:
            raise UnknownKind(f"schedule for kind {kind!r}: no handler is registered for it")
        timing: dict[str, Any] = {
            "cron": cron,
            "every": every,
            "tz": tz,
            "name": name,
            "payload": payload,
            "catch_up": catch_up,
            "max_catch_up": max_catch_up,
            "concurrency_key": concurrency_key,
        }
        return self._add(definition, timing, register_kind=False)

    def _add(
        self, definition: JobDefinition, timing: dict[str, Any], *, register_kind: bool
    ) -> Schedule:
        """Check ``timing`` against ``definition`` and record the schedule (and, for
        `periodic`, the kind's handler) under the lock, or raise and record nothing."""
        schedule = schedule_for(definition, **timing)
        with self._lock:
            if schedule.name in self.schedules:
                raise ConfigurationError(
                    f"schedule {schedule.name!r} already exists; give the new one its own name="
                )
            if register_kind:
                if definition.kind in self.definitions:
                    raise ConfigurationError(f"kind {definition.kind!r} is already registered")
                self.definitions[definition.kind] = definition
            self.schedules[schedule.name] = schedule
        return schedule

    def _define(self, kind: str, func: Callable[..., Any], options: JobOptions) -> JobDefinition:
        """The definition of ``kind`` as registered here, the queue's result limit its
        default."""
        merged: JobOptions = {"max_result_bytes": self.max_result_bytes, **options}
        return JobDefinition(kind, func, **merged)

    # -- enqueue -------------------------------------------------------------

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
        job = self.new_job(kind, payload, **options)
        return self.store.enqueue(job, conn=conn)

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        """Enqueue many jobs in one round trip (per dedup key, one more); returns ids."""
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

    def workflow(self, conn: psycopg.Connection[Any] | None = None) -> Workflow:
        """A graph of jobs inserted in one transaction when the ``with`` block ends
        (on ``conn``, inside the caller's transaction, if given); nothing is written if
        the block raises. See `Workflow`."""
        return Workflow(self.new_job, self.store, conn)

    # -- reading -------------------------------------------------------------

    def get(
        self,
        job_id: JobId,
        *,
        primary: bool = False,
        conn: psycopg.Connection[Any] | None = None,
    ) -> JobRecord | None:
        """The job's record, or None for an id no job has. Read on ``read_dsn`` if set,
        unless ``primary`` (the queue's own database: what it just wrote) or ``conn`` (in
        that connection's transaction) is given. Its ``durable`` lists the steps its runs
        recorded, the signals sent to it and what it waits for (read on the primary)."""
        record = self._reads_for(primary, conn).get(job_id, conn)
        if record is None:
            return None
        # Steps, signals and wait are written on the primary: read them there.
        return attrs.evolve(record, durable=self.store.durable_state(record.id, conn))

    def journal(
        self,
        job_id: JobId,
        *,
        primary: bool = False,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[JournalRecord]:
        """The job's journal, oldest first (read where `get` reads)."""
        return self._reads_for(primary, conn).journal(job_id, conn)

    def _reads_for(self, primary: bool, conn: psycopg.Connection[Any] | None) -> ReadStore:
        return self.store.reads if primary or conn is not None else self.reads

    def history(
        self,
        *,
        kind: str | None = None,
        status: JobStatus | str | None = None,
        finished_since: datetime | None = None,
        finished_until: datetime | None = None,
        before: JobRecord | HistoryCursor | JobId | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """One page of jobs, newest id first; pass the last record as ``before`` for the next.

        Ids are ULIDs, so this is enqueue time as the enqueuing hosts' clocks saw it (one
        process's jobs in the order it enqueued them). ``before`` may also be a job id (a
        ULID, its string form) or a `HistoryCursor` of one, even of a job deleted since;
        anything else raises `InvalidJob`.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"limit must be an int within [1, 10000], got {limit!r}")
        cursor = (
            before.cursor
            if isinstance(before, JobRecord)
            else before
            if before is None or isinstance(before, HistoryCursor)
            else HistoryCursor(before)  # a job id; anything else raises InvalidJob
        )
        return self.reads.history(
            HistoryFilter(kind, status, finished_since, finished_until),
            cursor,
            limit,
        )

    def stats(self) -> StatsSnapshot:
        """Counts of each kind's jobs by status (read on ``read_dsn`` if set)."""
        return self.reads.stats()

    def workflow_status(self, workflow_id: JobId) -> WorkflowStatus:
        """Every job of a workflow with its parents and state, in the order added."""
        jobs = self.reads.workflow_jobs(workflow_id)
        return WorkflowStatus(
            ULID.from_uuid(to_uuid(workflow_id)),
            tuple(WorkflowJob(record, tuple(parents)) for record, parents in jobs),
        )

    def schedule_rows(self) -> list[ScheduleInfo]:
        """Every schedule row of this prefix (inactive ones too), as `venturi schedules`."""
        return self.reads.schedules()

    # -- results -------------------------------------------------------------

    def wait(self, job_id: JobId, timeout: Duration = DEFAULT_WAIT_SECONDS) -> JobRecord:
        """The job once it has finished (completed, dead or cancelled).

        Marks the job awaited, so that its finishing transaction notifies (jobs nobody
        waits for never do), and is woken by that notification; every wait of this
        queue shares one LISTEN connection. Raises `TimeoutError` after ``timeout``
        seconds and `UnknownJob` for an id no job has.
        """
        seconds = to_seconds(timeout, "timeout")
        key = ULID.from_uuid(to_uuid(job_id))
        with self._lock:
            if self._waiters is None:
                self._waiters = Waiters(self.store)
            waiters = self._waiters
        return waiters.wait(key, seconds)

    def result(self, job_id: JobId, timeout: Duration = DEFAULT_WAIT_SECONDS) -> Any:
        """The handler's return value once the job has completed (`wait`, then its
        completion's attachment). Raises `JobFailed` if it ended dead, `JobCancelled` if
        it was cancelled (each with the last journal note), `TimeoutError`."""
        record = self.wait(job_id, timeout)
        if record.status is JobStatus.COMPLETED:
            return self.store.reads.results([record.id]).get(record.id)
        note = self.store.reads.last_notes([record.id]).get(record.id)
        if record.status is JobStatus.DEAD:
            raise JobFailed(record.id, note)
        raise JobCancelled(record.id, note)

    # -- flow control --------------------------------------------------------

    def pause(self, *kinds: str) -> list[str]:
        """Pause ``kinds`` for every worker, until `resume`; returns those newly paused.

        Workers stop claiming them at once (the claim reads the flag); running jobs
        finish, enqueues are still accepted, and the pause outlives worker restarts.
        """
        return self.store.pause_kinds(checked_kinds(kinds))

    def resume(self, *kinds: str) -> list[str]:
        """Resume paused ``kinds`` (idle workers are woken); returns those that were paused."""
        return self.store.resume_kinds(checked_kinds(kinds))

    def paused(self) -> set[str]:
        """The kinds paused now."""
        return {limits.kind for limits, paused in self.reads.kind_limits() if paused}

    def kinds(self) -> list[KindState]:
        """Each kind's flow control as the database holds it: paused, the latest
        declared limits and fairness (and who declared them), and its jobs claimed now."""
        return self.reads.kinds()

    def set_weights(self, kind: str, weights: Mapping[str, float | None]) -> None:
        """Give keys of the fair ``kind`` their share of its claims: over a busy period,
        keys with due jobs are claimed in proportion to their weights (a key without
        one weighs 1; None sets a key back to 1). Stored in the database, so every
        worker on every host follows them at once, for the keys' pending jobs too.

        Raises `ConfigurationError` for a weight that is not a number within
        (0, 1,000,000] or a bad key, and `UnknownKind` unless a worker has declared
        ``kind`` fair; nothing is written then.
        """
        checked = checked_weights(weights)
        self.store.set_weights(validate_kind(kind), checked)

    def weights(self, kind: str | None = None) -> dict[str, dict[str, float]]:
        """The weights set for each fair kind's keys (those of ``kind`` only, if given)."""
        return self.reads.weights(None if kind is None else validate_kind(kind))

    def fair_keys(
        self, kinds: Sequence[str] | None = None, limit: int = 10
    ) -> dict[str, list[FairKey]]:
        """For each fair kind (of ``kinds``, if given), the ``limit`` keys with the most
        due jobs, with how many of their jobs run now."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"limit must be an int >= 1, got {limit!r}")
        return self.reads.fair_keys(None if kinds is None else checked_kinds(kinds), limit)

    # -- operators -----------------------------------------------------------

    def workers(self) -> list[WorkerInfo]:
        """Every running worker of the queue (its registry), by name. A worker writes its
        row at start and at every heartbeat and removes it when it stops; a row not
        refreshed for three beats and half a minute (a killed worker) is left out and
        later deleted."""
        return self.reads.workers()

    def overview(self) -> Overview:
        """Each kind's jobs by status. Pending, scheduled and running jobs are counted;
        on a table of 100,000 jobs or more, waiting and finished jobs are estimated from
        the statistics ANALYZE keeps (`Overview.estimated`), so this stays fast."""
        return self.reads.overview()

    def throughput(self, minutes: int = 60, bucket: int = 5) -> Throughput:
        """Completed and failed runs per kind in ``bucket``-minute buckets over the last
        ``minutes`` minutes, from the journal."""
        if minutes < 1 or bucket < 1:
            raise ValueError(f"minutes and bucket must be at least 1, got {minutes}, {bucket}")
        return self.reads.throughput(minutes, bucket)

    def dead_groups(self, sample: int = 500) -> list[DeadGroup]:
        """The newest ``sample`` dead jobs grouped by kind and the first line of the
        note they died with, largest group first."""
        if sample < 1:
            raise ValueError(f"sample must be at least 1, got {sample}")
        return self.reads.dead_groups(sample)

    def retry_now(self, job_id: JobId) -> bool:
        """Make a pending job that waits for a later time (scheduled, or backing off after
        a failure) due now, journaled as ``requeued``; False if the job is not one."""
        return self.store.retry_now(job_id, "made due now by an operator")

    def trigger(self, name: str) -> ULID:
        """Enqueue one run of schedule ``name`` now, outside its slot bookkeeping (keyed
        as the schedule registered on this queue keys its jobs)."""
        if name == RETENTION_SCHEDULE:
            raise ConfigurationError(
                f"{name!r} prunes inside the workers and enqueues no job; run `venturi cleanup` "
                "for a one-off prune"
            )
        known = self.schedules.get(name)
        job_id = self.store.trigger_schedule(name, None if known is None else known.concurrency_key)
        if job_id is None:
            raise ConfigurationError(
                f"no schedule named {name!r} in prefix {self.store.prefix.name!r}"
            )
        return job_id

    def migrate(self) -> list[str]:
        """Create or upgrade this prefix's tables; returns the migrations applied."""
        return self.store.migrate()

    def check_schema(self) -> None:
        """Raise `SchemaError` unless this prefix's tables are what this code expects."""
        self.store.check_schema()

    def schema_script(self, after: int = 0, made_by: str = "venturi") -> str:
        """The DDL of the migrations after version ``after``, as one script to apply by
        hand (taking the same lock and writing the same history as `migrate`)."""
        return self.store.schema_script(after, made_by)

    def drop_prefix(self) -> None:
        """Drop every table of this queue's prefix, with its jobs and journal (tests,
        demos, benchmarks); other prefixes are untouched."""
        self.store.drop_prefix()

    def ping(self) -> str:
        """One round trip to the queue's database; returns the server's version."""
        return self.store.ping()

    def server(self) -> DatabaseServer:
        """The server the queue's own connections (not ``read_dsn``'s) are on: host and
        port as libpq reached them, and whether it takes writes (`writable`). After a
        failover it names the new primary once the pool has moved there; False means
        workers can neither claim nor settle, nor producers enqueue, on that server."""
        return self.store.server()

    def vacuum_health(self) -> VacuumHealth:
        """What keeps VACUUM from cleaning the jobs table, read on the queue's own
        connections (the primary, whose horizon its vacuums obey): the table's dead and
        live row versions and the oldest holders of the xmin horizon (sessions, slots,
        prepared transactions), each with its cause and fix (`VacuumHealth.warnings`)."""
        return self.store.vacuum_health()

    def now(self) -> datetime:
        """The database's clock (every time that decides eligibility is read on it)."""
        return self.store.now()

    def probe_listener(self, timeout: float = 2.0) -> float:
        """Send a NOTIFY on the queue's channel and wait for a LISTEN connection, built
        as a worker's is, to hear it; returns the round trip in seconds. Raises
        `ListenerPolling` when that connection leads to a transaction-pooling proxy or
        nothing came back within ``timeout`` seconds (workers would poll)."""
        notifier = self.store.notifier()
        try:
            notifier.connect()
            if notifier.polling:
                raise ListenerPolling("the LISTEN connection leads to a transaction-pooling proxy")
            started = time.monotonic()
            self.store.notify(f"probe:{uuid.uuid4().hex}")
            deadline = started + timeout
            while (left := deadline - time.monotonic()) > 0:
                if notifier.wait(left):
                    return time.monotonic() - started
            raise ListenerPolling(
                f"no NOTIFY came back within {timeout:g}s (a transaction-pooling proxy?)"
            )
        finally:
            notifier.close()

    def prune(
        self, retention: Retention | None = None, stopping: threading.Event | None = None
    ) -> dict[str, int] | None:
        """Delete the finished jobs past ``retention`` (default: this queue's) now, as
        workers do on the retention's schedule: the count deleted per status, or None
        when another session is pruning this prefix (or every job is kept). Stops early
        once ``stopping`` is set."""
        keep = self.retention if retention is None else retention
        if keep is None:
            return None
        return self.store.prune(keep, stopping or threading.Event())

    def with_prefix(self, prefix: str) -> Queue:
        """A queue on this queue's connections under another prefix, with no jobs
        registered; closing it leaves the connections open."""
        return Queue(store=self.store.with_prefix(Prefix(prefix)), retention=self.retention)

    @contextmanager
    def pointed_at(self, store: PostgresStore) -> Iterator[Queue]:
        """Point this queue, its registrations and its hooks at ``store`` (another prefix)
        until the block ends, reads included: tests that run the project's own queue
        under a fresh prefix (`venturi.testing.QueueFactory`)."""
        for hook in self.store.hooks:  # an instrumented queue stays instrumented
            store.hooks.add(hook)
        saved = self.store, self.reads
        self.store, self.reads = store, store.reads
        try:
            yield self
        finally:
            self.store, self.reads = saved

    def cleanup(
        self,
        *,
        finished_before: datetime,
        kind: str | None = None,
        status: JobStatus | str | None = None,
    ) -> int:
        """Delete terminal jobs finished before a time (with their journal); returns count."""
        return self.store.cleanup(CleanupCriteria(finished_before, kind, status))

    def signal(
        self,
        job_id: JobId,
        name: str,
        payload: Any = None,
        *,
        conn: psycopg.Connection[Any] | None = None,
    ) -> bool:
        """Send signal ``name`` with a JSON ``payload`` to a job (a durable handler's
        `JobContext.wait_for` returns it); True when it made a waiting job due now.

        Signals are kept: one sent before the job waits is returned when it does. With
        ``conn`` the signal joins that connection's transaction (a rollback delivers
        nothing). Raises `UnknownJob` for an id no job has, `SignalRefused` for a finished
        job, `InvalidJob` for a bad name or payload; nothing is written then.
        """
        check_name(name, "signal")
        text = None if payload is None else encode_json(payload, "signal payload")
        if text is not None and len(text.encode()) > self.store.max_payload_bytes:
            raise InvalidPayload(
                f"signal payload is {len(text.encode())} bytes of JSON; at most "
                f"{self.store.max_payload_bytes} (max_payload_bytes)"
            )
        return self.store.signal(job_id, name, text, conn)

    def cancel(self, job_id: JobId) -> bool:
        """Cancel a pending or running job; False if unknown or already finished."""
        return self.store.cancel(job_id)

    def requeue(self, job_id: JobId) -> bool:
        """Put a dead, cancelled or completed job back in line; False if not finished."""
        return self.store.requeue(job_id)

    def requeue_with_children(self, job_id: JobId) -> int | None:
        """Requeue a finished job (`Queue.requeue`) and the descendants its end cancelled
        (back to waiting for it), in one transaction; None when the job was not finished,
        else how many descendants went back."""
        return self.store.requeue_with_children(job_id, note="requeued with its parent")

    def requeue_dead(self, kind: str | None = None) -> int:
        """Put every dead job (of ``kind``) back in line; returns how many went back.

        A dead job whose dedup key a pending job holds stays dead.
        """
        return self.store.requeue_dead(kind, note="requeued with all dead jobs")

    # -- working -------------------------------------------------------------

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
        metrics_port = options.pop("metrics_port", None)
        metrics_addr = options.pop("metrics_addr", "127.0.0.1")
        settings: dict[str, Any] = {
            "kinds": kinds,
            "concurrency": concurrency,
            "priority_floor": priority_floor,
            "name": name,
            "poll_interval": to_seconds(poll_interval, "poll_interval", allow_zero=False),
            "schedules": list(self.schedules.values()),
            "retention": options.pop("retention", self.retention),
            **options,
        }
        if metrics_port is None:
            return Worker(self.store, self.definitions, events=events, **settings)
        # Every option is checked before a metrics server starts, so a refused one leaves
        # no server behind.
        Worker(self.store, self.definitions, events=events, **settings)
        try:
            from venturi.metrics import serve_worker_metrics
        except ImportError as exc:
            raise ConfigurationError(f"metrics_port: {exc}") from exc
        metered, server = serve_worker_metrics(self, metrics_port, metrics_addr, events)
        return Worker(
            self.store, self.definitions, events=metered, stop_hooks=[server.close], **settings
        )

    def drain(self, kinds: Sequence[str] | None = None, *, wait_for: Duration = 0) -> int:
        """Run every due job inline in this thread until none is left; returns runs.

        Retries and pauses that come due while draining run too. With ``wait_for`` it
        also waits, until that many seconds after the call, for jobs that come due by
        then (a retry's backoff, a short delay). Leases are renewed by
        ``ctx.extend_lease()`` only: there is no heartbeat. For tests and scripts.
        """
        return drain(self.store, self.definitions, kinds, to_seconds(wait_for, "wait_for"))

    @property
    def hooks(self) -> tuple[StoreHook, ...]:
        """The hooks watching this queue's writes, in the order they were added."""
        return tuple(self.store.hooks)

    def add_hook(self, hook: StoreHook) -> None:
        """Have ``hook`` watch every write of this queue's store: each enqueue (also
        of many jobs and of a workflow) and each run's settlement, by any worker built
        from this queue in this process (see `venturi.store.hooks`). Tracing
        (`venturi.contrib.otel.instrument`) and the inline test mode attach this way."""
        self.store.hooks.add(hook)

    def remove_hook(self, hook: StoreHook) -> None:
        """Stop ``hook`` watching this queue's store (nothing if it was not added)."""
        self.store.hooks.remove(hook)

    # -- closing -------------------------------------------------------------

    def close_waiters(self) -> None:
        """Stop the waiters' listener (`close` does)."""
        with self._lock:
            waiters, self._waiters = self._waiters, None
        if waiters is not None:
            waiters.close()

    def close(self) -> None:
        """Stop the waiters' listener; close the connection pools this queue opened."""
        self.close_waiters()
        self.store.close()
        if self._own_reads:
            self.reads.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
