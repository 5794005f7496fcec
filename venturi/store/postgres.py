"""`PostgresStore`: the one door to the database for everything that writes or works.

Every statement of the queue, its workers and its tools that changes a table runs here,
on its `Connections`: the schema, enqueues (one job, many, a graph of jobs with parents),
claims, every run's end (one statement, `settle.sql`, for each outcome and for the
reaper's recovery), leases, flow control, schedules and retention, the worker registry,
and an operator's changes to jobs. Reads of what a dashboard shows live in `ReadStore`
(`PostgresStore.reads`), which a queue may open on a replica instead.

Layers (tracing, the test modes) watch every write of new jobs and every run's end
through `StoreHooks`, which each public write passes through exactly once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

import attrs
import psycopg
from psycopg import errors
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool
from ulid import ULID

from venturi.durable import SignalRefused
from venturi.errors import (
    ConfigurationError,
    DuplicateJob,
    InvalidJob,
    StoreError,
    UnknownJob,
    UnknownKind,
)
from venturi.flow.limits import KindLimits
from venturi.models import (
    SMALLINT_MIN,
    CleanupCriteria,
    DurableState,
    JobId,
    JobRecord,
    JobStatus,
    NewJob,
    Outcome,
    SignalRecord,
    StepRecord,
    WaitRecord,
    to_uuid,
)
from venturi.observations import WorkerPresence
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES
from venturi.prefix import Prefix
from venturi.schedules.retention import Retention
from venturi.schedules.schedule import Firing, Schedule, ScheduleState
from venturi.settlements import BUSY, BatchOutcome, Busy, Claim, Settlement
from venturi.store import migrations, retrying, sqlfiles
from venturi.store.connections import (
    Connections,
    Preparation,
    Source,
    check_pool_size,
    check_preparation,
    execute,
    execute_generic,
    mapped_errors,
    new_pool,
    open_owned,
)
from venturi.store.dsn import Dsn
from venturi.store.enqueueing import Enqueuer
from venturi.store.failover import DatabaseServer, write_session_keywords
from venturi.store.floors import FLOORS_AFTER_DEAD_ROWS, ClaimFloors, FloorLook, FloorSwitch
from venturi.store.hooks import Settled, StoreHooks
from venturi.store.ids import new_id, new_ids
from venturi.store.notifier import PostgresNotifier
from venturi.store.reads import ReadStore
from venturi.upkeep import HOLDERS_READ, VacuumHealth, VacuumPace

logger = logging.getLogger("venturi.store")
T = TypeVar("T")

DEFAULT_POOL_SIZE: Final = 10
DEFAULT_POOL_TIMEOUT: Final = 10.0
# How long an enqueue on the store's own pool keeps retrying a passing error (a deadlock,
# a lock or statement timeout, a restart) before it raises `StoreUnavailable`.
ENQUEUE_RETRY_SECONDS: Final = 10.0
# Server-side prepared statements (psycopg prepares a query on its fifth run) save the
# server planning every statement again, most of the CPU time of a claim, a completion
# or an enqueue. "auto" prepares on connections straight to PostgreSQL and never behind
# a pooling proxy: a transaction pooler such as PgBouncer hands each transaction another
# server connection, where the statement is missing or means another query. Measured
# with `venturi bench --compare-unprepared` (docs, "Behind PgBouncer").
DEFAULT_PREPARED_STATEMENTS: Final[Preparation] = "auto"
# The statements that drop a prefix, in order: its tables, then its function and the
# domains its tables' columns used (one statement per SQL file).
DROP_PREFIX_STATEMENTS: Final = ("drop_prefix", "drop_prefix_function", "drop_prefix_types")
# How long a declaration that turns a kind fair waits for the writes of the jobs table
# in progress to end (`declare_kinds`); it holds new writes back meanwhile.
FAIR_LOCK_TIMEOUT: Final = 5.0
# How often a run's end is written again after racing enqueues took its job's dedup key.
_KEY_TAKEN_ATTEMPTS: Final = 5
# Waiting out a row another session holds locked (a one-run settlement, a transactional
# completion): the statements skip locked rows, so they never deadlock.
BUSY_BACKOFF: Final = retrying.RetryDelays(base=0.01, cap=0.5)


@attrs.frozen
class DeadRows:
    """The jobs table's row versions as the server's statistics count them: ``dead``
    ones wait for a vacuum; ``vacuumable``: this session's role may vacuum the table."""

    dead: int
    live: int
    vacuumable: bool


# After each batch a prune rests this many times as long as the batch took, so it takes
# at most a fifth of what it competes with workers for (`venturi bench --workload prune`:
# with a rest of 2 a c16 drain kept 0.82x of its throughput, median of 5 rounds).
PRUNE_REST: Final = 4.0

# What the store wrote for one run's end: the journal outcome; None when the run had
# lost its claim (fenced out, nothing changed); `BUSY` when another session held its row
# locked (nothing changed: try again); the `StoreError` of a statement the database
# refused for this run alone (its `Settlement.fallback` refused too).
Written = Outcome | Busy | StoreError | None


@attrs.define(eq=False, slots=False)
class PostgresStore:
    """The store of one table-name prefix, over `Connections` to one database.

    Built with `from_dsn` (it opens and later closes its own pool) or `from_pool` (it
    borrows the caller's pool, or a `Lender`, and never closes it). Thread-safe: every
    operation takes a connection for one statement or one short transaction. Database
    outages surface as `StoreUnavailable`; a use in a child of the process that built it
    as `ForkedError`.
    """

    connections: Connections
    prefix: Prefix
    max_payload_bytes: int = attrs.field(default=DEFAULT_MAX_PAYLOAD_BYTES, kw_only=True)
    migration_lock_timeout: float = attrs.field(
        default=migrations.DEFAULT_LOCK_TIMEOUT, kw_only=True
    )
    # Where LISTEN goes instead of the pool's database: the server itself when the pool
    # leads to a transaction-pooling proxy.
    listen: Dsn | None = attrs.field(default=None, kw_only=True)
    # Shared with the store's siblings, so a worker's side stores are watched too.
    hooks: StoreHooks = attrs.field(factory=StoreHooks, kw_only=True)
    # Claims start from floors once the jobs table holds this many dead row versions
    # (`venturi.store.floors`); 0: always.
    floors_after_dead_rows: int = attrs.field(default=FLOORS_AFTER_DEAD_ROWS, kw_only=True)
    reads: ReadStore = attrs.field(init=False)
    _enqueuer: Enqueuer = attrs.field(init=False)
    _floor_switch: FloorSwitch = attrs.field(init=False)
    # Shared with the store's siblings: the floors hold for any connection to the server,
    # and a worker's vacuuming goes on from where an earlier worker's stopped.
    claim_floors: ClaimFloors = attrs.field(factory=ClaimFloors, kw_only=True)
    vacuum_pace: VacuumPace = attrs.field(factory=VacuumPace, kw_only=True)

    @max_payload_bytes.validator
    def _check_max_payload_bytes(self, _: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ConfigurationError(f"max_payload_bytes must be positive, got {value}")

    @reads.default
    def _new_reads(self) -> ReadStore:
        return ReadStore(self.connections, self.prefix)

    @_enqueuer.default
    def _new_enqueuer(self) -> Enqueuer:
        return Enqueuer(self.prefix, self.max_payload_bytes)

    @_floor_switch.default
    def _new_floor_switch(self) -> FloorSwitch:
        return FloorSwitch(self.floors_after_dead_rows)

    @classmethod
    def from_dsn(
        cls,
        dsn: str | Dsn,
        prefix: Prefix,
        *,
        pool_size: int | None = None,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        prepared_statements: Preparation = DEFAULT_PREPARED_STATEMENTS,
        **options: Any,
    ) -> PostgresStore:
        """Open a pool of ``pool_size`` autocommit connections (libpq defaults for "").

        ``prepared_statements`` lets psycopg prepare statements it runs often on the
        server: "auto" on connections straight to the server only, True on every one
        (never behind a transaction-pooling proxy such as PgBouncer), False on none.
        """
        size = check_pool_size(DEFAULT_POOL_SIZE if pool_size is None else pool_size)
        prepared = check_preparation(prepared_statements)
        target = Dsn.parse(dsn)
        name = f"venturi-{prefix.name}"
        # A DSN of several hosts reaches the one that takes writes (`venturi.store.failover`).
        kwargs = {**target.connect_kwargs(), **write_session_keywords(dict(target.params))}
        pool = new_pool(target, kwargs, size, pool_timeout, name, prepared=prepared)
        connections = Connections(pool, owned=True, target=target)
        store = cls(connections, prefix, **options)  # may refuse an option
        open_owned(pool)  # only now, so a refused option leaves no pool running
        return store

    @classmethod
    def from_pool(cls, pool: Source, prefix: Prefix, **options: Any) -> PostgresStore:
        """Borrow a caller's pool (or a `Lender` of an outside connection); venturi never
        closes it."""
        return cls(Connections(pool, owned=False), prefix, **options)

    @property
    def pool(self) -> ConnectionPool[Any]:
        """The psycopg pool the store works on; `ConfigurationError` for a store that
        borrows a `Lender` instead."""
        pool = self.connections.pool
        if pool is None:
            raise ConfigurationError("this store borrows a lender's connection, not a pool")
        return pool

    @property
    def owns_pool(self) -> bool:
        return self.connections.owned

    # -- connections ------------------------------------------------------------------

    def connection(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        """A connection of the store's for one statement (errors become venturi's)."""
        return self.connections.connection()

    def transaction(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        """A connection in an open transaction: commits when the block ends, rolls back
        if it raises."""
        return self.connections.transaction()

    def _run(
        self,
        name: str,
        params: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        """Run ``sql/<name>.sql`` on a connection of the store's, or on ``conn``."""
        return self.connections.run(sqlfiles.statement(name, self.prefix), params, conn)

    def _statement(self, name: str) -> bytes:
        return sqlfiles.statement(name, self.prefix)

    def sibling(self, pool_size: int = 1) -> PostgresStore:
        """A store on the same database and prefix with a small pool of its own (built
        from the same connection parameters), for work a busy main pool must not starve."""
        side = self.connections.side(pool_size, f"venturi-{self.prefix.name}-side")
        return PostgresStore(
            side,
            self.prefix,
            max_payload_bytes=self.max_payload_bytes,
            listen=self.listen,
            hooks=self.hooks,
            floors_after_dead_rows=self.floors_after_dead_rows,
            claim_floors=self.claim_floors,
            vacuum_pace=self.vacuum_pace,
        )

    def with_prefix(self, prefix: Prefix) -> PostgresStore:
        """A store on the same connections under another prefix; closing it leaves them."""
        connections = self.connections
        borrowed = Connections(
            connections.source, owned=False, target=connections.target, watch=connections.watch
        )
        return PostgresStore(
            borrowed,
            prefix,
            max_payload_bytes=self.max_payload_bytes,
            migration_lock_timeout=self.migration_lock_timeout,
            listen=self.listen,
        )

    def close(self) -> None:
        """Close the pool if this store opened it; a borrowed pool is left alone."""
        self.connections.close()

    # -- the schema -------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Create or upgrade the prefix's tables; returns the migrations applied."""
        with self.connection() as conn:
            return migrations.migrate(conn, self.prefix, self.migration_lock_timeout)

    def check_schema(self) -> None:
        """Raise `SchemaError` unless the prefix's schema is what this code expects."""
        with self.connection() as conn:
            migrations.check(conn, self.prefix)

    def schema_script(self, after: int = 0, made_by: str = "venturi") -> str:
        """The DDL of the migrations after ``after``, as one script to apply by hand."""
        return migrations.schema_script(self.prefix, after, self.migration_lock_timeout, made_by)

    def drop_prefix(self) -> None:
        """Drop every object of the prefix: its tables, its function and its domains."""
        for name in DROP_PREFIX_STATEMENTS:
            self._run(name)

    def ping(self) -> str:
        """One round trip to the database; returns the server's version."""
        with self.connection() as conn:
            # A pooled connection may be stale: one statement proves this one works.
            execute(conn, self._statement("now"))
            return conn.info.parameter_status("server_version") or "?"

    def server(self) -> DatabaseServer:
        """The server the store's connections are on (host and port as libpq reached
        them) and whether it takes writes: False on a standby or a primary demoted in
        place, where every claim, settlement and enqueue would be refused."""
        with self.connection() as conn:
            return DatabaseServer.of(conn)

    def now(self) -> datetime:
        """The database's clock."""
        value: datetime = self._run("now")[0][0]
        return value

    # -- listening --------------------------------------------------------------------

    def notifier(self) -> PostgresNotifier:
        """A new listener on the channel of claimable jobs, built from the pool's own
        connection parameters (TLS included), or from ``listen`` when set (straight to
        the server past a transaction-pooling proxy), with the pool's connect keywords
        under the ones that DSN sets itself."""
        return self._listener(finished=False)

    def finished_notifier(self) -> PostgresNotifier:
        """A listener like `notifier` on the channel of finished jobs (waiters): a
        transaction that finishes an awaited job notifies it, once."""
        return self._listener(finished=True)

    def _listener(self, *, finished: bool) -> PostgresNotifier:
        kwargs = self.connections.keywords()
        target = self.connections.target
        if self.listen is not None:
            target = self.listen
            writing = write_session_keywords(dict(target.params))
            merged = {**target.connect_kwargs(), **writing, **kwargs}
            kwargs = {k: v for k, v in merged.items() if k not in target.params}
        watch = self.connections.watch
        return PostgresNotifier(target.text, kwargs, self.prefix, finished=finished, watch=watch)

    def notify(self, payload: str) -> None:
        """A notification on the prefix's channel (the listener's self-probe)."""
        self._run("notify", {"payload": payload})

    # -- enqueue ----------------------------------------------------------------------

    # Each public write passes through `hooks` once; the private twins below call each
    # other (a job with parents is a graph) without passing the same write through the
    # hooks twice.

    def enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None = None) -> ULID:
        """Write one job; returns its id (or the id of the pending job it merged into).
        With ``conn`` the write joins that connection's transaction."""
        if not self.hooks:
            return self._enqueue(job, conn)
        return self.hooks.enqueue([job], conn, lambda jobs: [self._enqueue(jobs[0], conn)])[0]

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        """Write many jobs in one round trip (per dedup key, one more); returns ids."""
        if not self.hooks:
            return self._enqueue_many(jobs, conn)
        return self.hooks.enqueue(jobs, conn, lambda passed: self._enqueue_many(passed, conn))

    def enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[ULID],
        workflow_id: ULID | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[ULID]:
        """Write jobs with parents (``depends_on``; a parent may be an earlier job of
        ``jobs``) under ``ids`` in one transaction, each waiting, pending or cancelled as
        its parents decide; an unknown parent raises `InvalidJob` and nothing is written."""
        return self.hooks.enqueue(
            jobs, conn, lambda passed: self._enqueue_graph(passed, ids, workflow_id, conn)
        )

    def _enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None) -> ULID:
        job_id = new_id()
        if job.depends_on:
            return self._enqueue_graph([job], [job_id], None, conn)[0]
        return self._write(
            lambda own: self._enqueuer.enqueue(own, job, job_id),
            conn,
            [job_id],
            job_id,
            repeatable=not callable(job.on_duplicate),
            what=f"enqueue of {job.kind!r}",
        )

    def _enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None
    ) -> list[ULID]:
        ids = new_ids(len(jobs))
        if any(j.depends_on for j in jobs):
            if any(j.dedup_key is not None for j in jobs):
                raise InvalidJob(
                    "enqueue jobs with depends_on= and jobs with a dedup_key separately"
                )
            return self._enqueue_graph(jobs, ids, None, conn)
        plain = [i for i, j in zip(ids, jobs, strict=True) if j.dedup_key is None]
        return self._write(
            lambda own: self._enqueuer.enqueue_many(own, jobs, ids),
            conn,
            plain,
            ids,
            # With no plain job in the batch nothing tells whether a lost attempt
            # committed, and a merge function must not merge twice.
            repeatable=bool(plain) and not any(callable(j.on_duplicate) for j in jobs),
            what=f"enqueue of {len(jobs)} jobs",
        )

    def _enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[ULID],
        workflow_id: ULID | None,
        conn: psycopg.Connection[Any] | None,
    ) -> list[ULID]:
        return self._write(
            lambda own: self._enqueuer.enqueue_graph(own, jobs, ids, workflow_id),
            conn,
            ids,
            list(ids),
            repeatable=True,
            what=f"enqueue of {len(jobs)} jobs with parents",
        )

    def _write(
        self,
        write: Callable[[psycopg.Connection[Any]], T],
        conn: psycopg.Connection[Any] | None,
        ids: Sequence[ULID],
        written_result: T,
        *,
        repeatable: bool,
        what: str,
    ) -> T:
        """Run an enqueue on ``conn`` (the caller's transaction: never retried), or on a
        connection of the store's, retrying passing errors for up to
        `ENQUEUE_RETRY_SECONDS`. The ids were made before the first attempt, so a retry
        after a lost answer first looks for them: a write that did commit is recognised
        (returning ``written_result``), never made twice. A write that cannot be
        recognised (``repeatable`` False) is not retried after a lost answer."""
        if conn is not None:
            self.connections.check_process()
            with mapped_errors():
                return write(conn)
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            with self.connection() as own:
                if attempts > 1 and ids and self._enqueuer.written(own, ids):
                    return written_result
                return write(own)

        return retrying.retry(
            attempt,
            what=what,
            logger=logger,
            deadline=time.monotonic() + ENQUEUE_RETRY_SECONDS,
            retry_unknown_outcome=repeatable,
        )

    # -- claims -----------------------------------------------------------------------

    def claim(
        self,
        worker: str,
        leases: dict[str, float],
        limit: int,
        priority_floor: int | None = None,
        *,
        limited: frozenset[str] | set[str] = frozenset(),
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[JobRecord]:
        """Claim up to ``limit`` due jobs of the kinds in ``leases`` (kind: lease seconds)
        for ``worker``, highest priority first, then the longest visible. Kinds in
        ``limited`` (those with limits) are claimed first and within their limits; the
        others by the plain claim, which leaves out any kind the database holds paused
        or limited: on ``conn`` if given (an autocommit connection straight to the
        server, such as `PostgresNotifier.borrowed`'s), as a prepared statement."""
        if limit < 1 or not leases:
            return []
        jobs: list[JobRecord] = []
        if limited:
            turns = {k: v for k, v in leases.items() if k in limited}
            jobs = self._claim_limited(worker, turns, limit, priority_floor)
            leases = {k: v for k, v in leases.items() if k not in limited}
            limit -= len(jobs)
            if limit < 1 or not leases:
                return _in_claim_order(jobs)
        floor = _floor(priority_floor)
        params = {
            "kinds": list(leases),
            "leases": [float(v) for v in leases.values()],
            "priority_floor": floor,
            "limit": limit,
            "worker": worker,
        }
        if conn is None:
            with self.connection() as own:
                rows = self._claim_on(own, params, floor)
        else:
            self.connections.check_process()
            with mapped_errors():
                rows = self._claim_on(conn, params, floor)
        jobs.extend(JobRecord.from_row(row) for row in rows)
        return _in_claim_order(jobs)

    def _claim_on(
        self, conn: psycopg.Connection[Any], params: dict[str, Any], floor: int
    ) -> list[tuple[Any, ...]]:
        """Run claim.sql on ``conn``, or claim_floored.sql from the store's floors while
        they pay (`_floors_in_use`); returns the claimed jobs' rows."""
        floors = self._floors_in_use(conn)
        if floors is None:
            return execute(conn, self._statement("claim"), params, prepare=True)
        params.update(floors.params(params["kinds"], floor))
        rows = execute_generic(conn, self._statement("claim_floored"), params)
        return floors.job_rows(rows, floor)

    def _floors_in_use(self, conn: psycopg.Connection[Any]) -> ClaimFloors | None:
        """The store's claim floors (`venturi.store.floors`) while they pay: the jobs
        table holds enough dead row versions (read on ``conn``; fewer once the workers'
        vacuum found the horizon held), or the horizon's oldest holder is old enough that
        the versions dying now will stay. Else None, and they are forgotten: a floor kept
        through a long pause would cost its first use."""

        def look() -> FloorLook | None:
            rows = self._run("floor_look", {"table": self.prefix.jobs}, conn)
            return FloorLook(*rows[0]) if rows else None

        if self._floor_switch.on(look, held=self.vacuum_pace.futile > 0):
            return self.claim_floors
        self.claim_floors.forget()
        return None

    def _claim_limited(
        self,
        worker: str,
        leases: dict[str, float],
        limit: int,
        priority_floor: int | None,
    ) -> list[JobRecord]:
        """Claim up to ``limit`` jobs of kinds with limits, within their room.

        One short transaction: lock the kinds' rows (claimers of one kind take turns),
        then claim in statements whose snapshots see every earlier turn's claims. Kinds
        with a key limit are claimed by their own statement (claim_keyed.sql), so the
        others pay nothing to plan the key walk.
        """
        if limit < 1 or not leases:
            return []
        jobs: list[JobRecord] = []
        last: psycopg.Cursor[tuple[Any, ...]] | None = None
        # Pipelined, in the transaction that the pipeline's one Sync ends (as in
        # `settle_and_pass`): the lock's reply is the one round trip taken while the
        # kinds' turn is held; the claims go out with the Sync, which commits them.
        with self.connection() as conn:
            with conn.pipeline(), _transaction_unless_autocommit(conn):
                locking = conn.cursor(row_factory=tuple_row)
                locking.execute(self._statement("claim_limited_lock"), {"kinds": list(leases)})
                keyed = {kind for kind, has_keys in locking.fetchall() if has_keys}
                groups = [
                    (name, kinds)
                    for name, kinds in (
                        ("claim_limited", [k for k in leases if k not in keyed]),
                        ("claim_keyed", [k for k in leases if k in keyed]),
                    )
                    if kinds
                ]
                for name, kinds in groups:
                    if last is not None:  # the second statement gets what the first left
                        jobs.extend(JobRecord.from_row(row) for row in last.fetchall())
                        last = None
                        if len(jobs) >= limit:
                            break
                    last = conn.cursor(row_factory=tuple_row)
                    params = {
                        "kinds": kinds,
                        "leases": [float(leases[k]) for k in kinds],
                        "priority_floor": _floor(priority_floor),
                        "limit": limit - len(jobs),
                        "worker": worker,
                    }
                    last.execute(self._statement(name), params)
            if last is not None:
                jobs.extend(JobRecord.from_row(row) for row in last.fetchall())
        return jobs

    def next_visible_at(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> datetime | None:
        """When the next pending job of ``kinds`` (at or above ``priority_floor``) is due."""
        return self._next_visible(kinds, priority_floor)[0]

    def seconds_until_visible(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> float | None:
        """Database-clock seconds until a pending job of ``kinds`` at or above
        ``priority_floor`` is due (0 if one is already); None when none is pending."""
        visible_at, now = self._next_visible(kinds, priority_floor)
        if visible_at is None or now is None:
            return None
        return max(0.0, (visible_at - now).total_seconds())

    def _next_visible(
        self, kinds: Sequence[str], priority_floor: int | None
    ) -> tuple[datetime | None, datetime | None]:
        if not kinds:
            return None, None
        floor = _floor(priority_floor)
        params: dict[str, Any] = {"kinds": list(kinds), "priority_floor": floor}
        with self.connection() as conn:
            floors = self._floors_in_use(conn)
            if floors is None:
                rows = execute(conn, self._statement("next_visible_at"), params)
            else:
                params.update(floors.params(kinds, floor))
                rows = execute_generic(conn, self._statement("next_visible_floored"), params)
                floors.learn(rows[0][2:], floor)
        return (rows[0][0], rows[0][1]) if rows else (None, None)

    # -- a run's end ------------------------------------------------------------------

    def settle(
        self,
        claim: Claim,
        settlement: Settlement,
        conn: psycopg.Connection[Any] | None = None,
    ) -> Outcome | None:
        """Write one run's end (`settle_many`), waiting out a row another session holds
        locked: the journal outcome the database recorded (a retry of the last allowed
        attempt is ``dead``), or None when the run had lost its claim and nothing
        changed. Raises the `StoreError` of a settlement the database refused.

        On ``conn`` (a transactional run's own transaction) it applies only while the
        run's lease still holds, commits with that transaction, and a refusal raises."""
        locked = 0
        while True:
            [written] = self.settle_many([(claim, settlement)], conn)
            if not isinstance(written, Busy):
                break
            locked += 1
            time.sleep(BUSY_BACKOFF.delay(locked))
        if isinstance(written, StoreError):
            raise written
        return written

    def settle_many(
        self,
        items: Sequence[tuple[Claim, Settlement]],
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[Written]:
        """Write the end of each run of ``items``, whatever it is, in one statement
        (settle.sql); returns what was written for each, in order (`Written`).

        When the database refuses the statement for one run's values (text it cannot
        store, a value out of range, a racing enqueue holding its job's dedup key), the
        runs are written one by one, and the refused one as its `Settlement.fallback`
        (the same outcome without what was refused). A passing error raises, having
        changed nothing (unless the batch was split, where runs already written come
        back fenced if it is written again). With ``conn``, see `settle`."""
        if not items:
            return []
        if conn is not None:
            self.connections.check_process()
            with mapped_errors():
                written = self._settle_rows(conn, items, within_lease=True)
        else:
            written = self._settle_own(items)
        if self.hooks:
            self.hooks.settled(
                [
                    Settled(claim, settlement, outcome)
                    for (claim, settlement), outcome in zip(items, written, strict=True)
                    # A busy run is written again later; a refused one is let go.
                    if not isinstance(outcome, (Busy, StoreError))
                ]
            )
        return written

    def settle_and_pass(
        self,
        claim: Claim,
        settlement: Settlement,
        kind: str,
        lease: float,
        priority_floor: int | None = None,
    ) -> tuple[Written, list[JobRecord]]:
        """Complete one run of ``kind`` (a kind with a concurrency and no key or rate
        limit) and, only if that applied, claim the kind's next due job for the same
        worker in the same transaction: settle.sql, the one statement of every run's end,
        then pass_place.sql, pipelined. The run's place passes straight on, never free
        in between, and the kind's claimed jobs never grow. A run fenced out, or whose row
        another session holds locked (`BUSY`), claims nothing; nor does a kind paused or
        whose limit is now below its claimed jobs (the place is then announced free).
        """
        passing = {
            "id": claim.job_id.to_uuid(),
            "kind": kind,
            "worker": claim.claimed_by,
            "lease": float(lease),
            "priority_floor": _floor(priority_floor),
        }
        # One round trip: on an autocommit connection the statements between two Syncs
        # are one transaction (PostgreSQL's protocol, "Pipelining"), so both go out with
        # the pipeline's one Sync, which commits them; the second claims only when the
        # first applied (it reads the row this transaction wrote). psycopg's
        # transaction() in a pipeline syncs at BEGIN, at COMMIT and at its end: four
        # round trips. A borrowed pool's connection that does not autocommit takes it.
        with self.connection() as conn:
            with conn.pipeline(), _transaction_unless_autocommit(conn):
                settling = conn.cursor(row_factory=tuple_row)
                params = settle_params([(claim, settlement)], within_lease=False, announce=False)
                settling.execute(self._statement("settle"), params)
                claiming = conn.cursor(row_factory=tuple_row)
                claiming.execute(self._statement("pass_place"), passing)
            [written] = _written([(claim, settlement)], settling.fetchall())
            jobs = [JobRecord.from_row(row) for row in claiming.fetchall()]
        if self.hooks and not isinstance(written, (Busy, StoreError)):
            self.hooks.settled([Settled(claim, settlement, written)])
        return written, jobs

    def _settle_own(self, items: Sequence[tuple[Claim, Settlement]]) -> list[Written]:
        try:
            with self.connection() as conn:
                return self._settle_rows(conn, items, within_lease=False)
        except (StoreError, UnicodeError, errors.UniqueViolation) as exc:
            if not _refused(exc):
                raise
            if len(items) > 1:
                return [written for item in items for written in self._settle_own([item])]
            return [self._settle_refused(items[0], exc)]

    def _settle_refused(self, item: tuple[Claim, Settlement], exc: BaseException) -> Written:
        """Write one run's end that the database refused (``exc``): again while racing
        enqueues take its job's dedup key (a few times), or as its fallback when a value
        was refused; the error itself when it is refused still."""
        claim, settlement = item
        for _ in range(_KEY_TAKEN_ATTEMPTS):
            refused = retrying.refusal(exc)
            if refused is not None:
                settlement = settlement.fallback(refused)
            elif not isinstance(exc, errors.UniqueViolation):
                break
            try:
                with self.connection() as conn:
                    return self._settle_rows(conn, [(claim, settlement)], within_lease=False)[0]
            except (StoreError, UnicodeError, errors.UniqueViolation) as again:
                if not _refused(again):
                    raise
                exc = again
        if isinstance(exc, StoreError):
            return exc
        error = (
            retrying.store_error(exc) if isinstance(exc, psycopg.Error) else StoreError(str(exc))
        )
        error.__cause__ = exc
        return error

    def _settle_rows(
        self,
        conn: psycopg.Connection[Any],
        items: Sequence[tuple[Claim, Settlement]],
        *,
        within_lease: bool,
    ) -> list[Written]:
        params = settle_params(items, within_lease=within_lease, announce=True)
        return _written(items, execute(conn, self._statement("settle"), params))

    def extend_lease(self, leases: Sequence[tuple[Claim, float]]) -> BatchOutcome:
        """Renew each run's lease for its number of seconds, in one statement: which
        applied, which were skipped while another session held their rows locked (any
        other run lost its lease)."""
        if not leases:
            return BatchOutcome()
        return BatchOutcome.from_rows(self._run("extend_lease", lease_params(leases)))

    def claimed_by(self, worker: str) -> list[JobRecord]:
        """The jobs claimed now under ``worker``'s name (those its worker holds, and any
        whose claim's answer it never received), by id."""
        return [JobRecord.from_row(r) for r in self._run("claimed_by", {"worker": worker})]

    def find_stale(self, limit: int = 100) -> list[JobRecord]:
        """Claimed jobs whose lease has expired (their worker crashed or froze)."""
        return [JobRecord.from_row(r) for r in self._run("find_stale", {"limit": limit})]

    # -- table upkeep -------------------------------------------------------------------

    def dead_rows(self, conn: psycopg.Connection[Any] | None = None) -> DeadRows | None:
        """The jobs table's dead and live row versions by the server's statistics, and
        whether this session may vacuum it; None before the table exists. On ``conn`` if
        given."""
        rows = self._run("dead_rows", {"table": self.prefix.jobs}, conn)
        return DeadRows(*rows[0]) if rows else None

    def horizon_holder(self) -> str | None:
        """The oldest transaction id seen holding back the database's xmin horizon, as
        text (a session's snapshot or transaction, a slot, a prepared transaction), or
        None when none is seen."""
        value: str | None = self._run("horizon_holder")[0][0]
        return value

    def vacuum_health(self, holders: int = HOLDERS_READ) -> VacuumHealth:
        """The jobs table's dead and live row versions and the oldest ``holders`` holders
        of the database's xmin horizon; what the role may not see reads as unknown."""
        params = {"table": self.prefix.jobs, "limit": holders}
        return VacuumHealth.from_rows(self._run("vacuum_health", params))

    def vacuum_jobs(self, opened: Callable[[psycopg.Connection[Any] | None], None]) -> None:
        """VACUUM the jobs table now, on a connection of its own (on a large table it can
        take minutes), returning at once if another vacuum of it runs. ``opened`` is
        given that connection before the VACUUM starts (so that another thread may cancel
        it) and None once it is closed."""
        with self.connections.dedicated() as conn:
            opened(conn)
            try:
                execute(conn, self._statement("vacuum_jobs"), prepare=False)
            finally:
                opened(None)

    # -- flow control -----------------------------------------------------------------

    def declare_kinds(self, limits: Sequence[KindLimits], declared_by: str) -> None:
        """Record these kinds' limits as ``declared_by``'s: the latest declaration wins.

        A kind declared fair that the database does not hold fair yet turns fair in a
        transaction that first waits for every write of the jobs table to end and holds
        new ones back while it tags the kind's jobs already written, so that no job of
        it is left without a tag (`FAIR_LOCK_TIMEOUT` bounds the wait; the worker's
        next refresh tries again)."""
        if not limits:
            return
        params = {
            "kinds": [d.kind for d in limits],
            "concurrencies": [d.concurrency for d in limits],
            "key_concurrencies": [d.key_concurrency for d in limits],
            "rate_limits": [None if d.rate is None else d.rate.count for d in limits],
            "rate_windows": [None if d.rate is None else d.rate.window for d in limits],
            "fairs": [d.fair for d in limits],
            "declared_by": declared_by,
        }
        if not any(d.fair for d in limits):
            self._run("declare_kinds", params)
            return
        with self.transaction() as conn:
            becoming = [row[0] for row in self._run("fair_becoming", params, conn)]
            self._run("declare_kinds", params, conn)
            if becoming:
                wait = migrations.lock_timeout_text(FAIR_LOCK_TIMEOUT)
                conn.execute(f"SET LOCAL lock_timeout = '{wait}'".encode())
                self._run("fair_jobs_lock", None, conn)
                self._run("fair_tag_existing", {"kinds": becoming}, conn)

    def set_weights(self, kind: str, weights: Mapping[str, float | None]) -> None:
        """Store each key's weight in the fair ``kind`` (None: back to the default, 1),
        and space the key's pending jobs by its new weight from the first of them, so
        that every claim follows the new weights at once. Raises `UnknownKind` unless
        the database holds ``kind`` fair; nothing is written then."""
        keys = list(weights)
        values = [weights[key] for key in keys]
        with self.transaction() as conn:
            rows = self._run(
                "fair_weights_set", {"kind": kind, "keys": keys, "weights": values}, conn
            )
            if not rows:
                raise UnknownKind(
                    f"kind {kind!r} is not fair here: a worker must declare it fair "
                    "(fair=True) before its weights are set"
                )

    def pause_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Pause ``kinds`` for every worker; returns those that were not paused yet."""
        return [row[0] for row in self._run("pause_kinds", {"kinds": list(kinds)})]

    def resume_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Resume ``kinds`` (waking idle workers); returns those that were paused."""
        return [row[0] for row in self._run("resume_kinds", {"kinds": list(kinds)})]

    def seconds_until_rate_room(self, kinds: Sequence[str]) -> float | None:
        """Database-clock seconds until one of ``kinds`` whose rate is used up may start
        a run again (0: one may now); None when none of them has a rate."""
        if not kinds:
            return None
        rows = self._run("rate_room", {"kinds": list(kinds)})
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    # -- an operator's changes --------------------------------------------------------

    def cancel(self, job_id: JobId, note: str | None = None) -> bool:
        """Cancel a pending, waiting or running job; False if unknown or finished."""
        return bool(self._run("cancel", {"id": to_uuid(job_id), "note": note}))

    def requeue(self, job_id: JobId, note: str | None = None) -> bool:
        """Put a finished job back in line; False if it is not finished."""
        try:
            return bool(self._run("requeue", {"id": to_uuid(job_id), "note": note}))
        except errors.UniqueViolation as exc:
            raise DuplicateJob(
                f"job {job_id} cannot be requeued: another pending job holds its dedup key"
            ) from exc

    def requeue_dead(
        self, kind: str | None = None, note: str | None = None, batch: int = 1000
    ) -> int:
        """Requeue every job dead now (of ``kind``), in bounded batches; returns the count.

        A dead job whose dedup key a pending job holds stays dead.
        """
        check_batch(batch, "requeue")
        params = {"kind": kind, "dead_before": self.now(), "note": note, "batch": batch}
        total = 0
        races = 0
        while True:
            try:
                count = len(self._run("requeue_dead", params))
            except errors.UniqueViolation as exc:
                # An enqueue took a key mid-statement; nothing changed, so try again.
                races += 1
                if races > 20:
                    raise DuplicateJob("requeue kept racing enqueues for dedup keys") from exc
                continue
            total += count
            if count < batch:
                return total

    def requeue_with_children(self, job_id: JobId, note: str | None = None) -> int | None:
        """Requeue a finished job and, in the same transaction, its cancelled descendants
        (back to waiting); None when the job was not finished, else how many went back."""
        params = {"id": to_uuid(job_id), "note": note}
        with self.transaction() as conn:
            if not execute(conn, self._statement("requeue"), params):
                return None
            execute(conn, self._statement("lock_descendants"), {"id": params["id"]})
            return len(execute(conn, self._statement("requeue_descendants"), params))

    def retry_now(self, job_id: JobId, note: str | None = None) -> bool:
        """Make a pending job that waits for a later time due now; False if it is not one."""
        return bool(self._run("retry_now", {"id": to_uuid(job_id), "note": note}))

    def cleanup(self, criteria: CleanupCriteria, batch: int = 1000) -> int:
        """Delete finished jobs matching ``criteria`` (with their journal), in batches;
        returns how many."""
        check_batch(batch, "cleanup")
        params = {
            "finished_before": criteria.finished_before,
            "kind": criteria.kind,
            "status": None if criteria.status is None else criteria.status.value,
            "batch": batch,
        }
        total = 0
        while True:
            deleted = int(self._run("cleanup", params)[0][0])
            total += deleted
            if deleted < batch:
                return total

    def advance_clock(self, seconds: float, conn: psycopg.Connection[Any] | None = None) -> None:
        """Move unfinished jobs ``seconds`` into the past, as if that much time had gone by:
        pending jobs come due that much earlier and claims expire that much earlier."""
        self._run("advance_clock", {"seconds": seconds}, conn)

    # -- durable handlers -------------------------------------------------------------

    def steps_of(self, job_id: JobId) -> list[StepRecord]:
        """The steps the job's runs recorded, in the order they were reached."""
        return [StepRecord.from_row(r) for r in self._run("steps_of", {"id": to_uuid(job_id)})]

    def record_step(
        self,
        claim: Claim,
        name: str,
        seq: int,
        result: str,
        conn: psycopg.Connection[Any] | None = None,
    ) -> bool:
        """Record step ``name`` (``result`` as JSON text) for ``claim``'s run, on ``conn``
        (in its transaction) or on its own; False when the run lost its claim."""
        params = {
            "id": claim.job_id.to_uuid(),
            "owner": claim.claimed_by,
            "run": claim.run_count,
            "name": name,
            "seq": seq,
            "result": result,
        }
        return bool(self._run("step_record", params, conn))

    def record_wait(self, claim: Claim, what: str, name: str, until: datetime) -> bool:
        """Record what ``claim``'s run is about to wait for; False when it lost its claim."""
        params = {
            "id": claim.job_id.to_uuid(),
            "owner": claim.claimed_by,
            "run": claim.run_count,
            "what": what,
            "name": name,
            "until": until,
        }
        return bool(self._run("wait_record", params))

    def first_signal(self, job_id: JobId, name: str) -> tuple[bool, Any]:
        """(True, payload) of the job's first signal ``name``, or (False, None)."""
        rows = self._run("first_signal", {"id": to_uuid(job_id), "name": name})
        return (True, rows[0][0]) if rows else (False, None)

    def job_outcome(self, job_id: JobId) -> tuple[JobStatus, Any] | None:
        """The job's status and, once completed, its return value; None if unknown."""
        job = self.reads.get(job_id)
        if job is None:
            return None
        if job.status is not JobStatus.COMPLETED:
            return job.status, None
        return job.status, self.reads.results([job.id]).get(job.id)

    def signal(
        self,
        job_id: JobId,
        name: str,
        payload: str | None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> bool:
        """Deliver signal ``name`` (``payload`` as JSON text) to the job, on ``conn`` (in
        the caller's transaction) or in one of its own; True when it woke the job. Raises
        `UnknownJob` or `SignalRefused` (finished job), having written nothing."""
        params = {"id": to_uuid(job_id), "name": name, "payload": payload}
        with contextlib.ExitStack() as stack:
            if conn is None:
                conn = stack.enter_context(self.transaction())
            rows = self._run("signal_lock", {"id": params["id"]}, conn)
            if not rows:
                raise UnknownJob(f"signal {name!r}: no job has id {job_id}")
            if JobStatus(rows[0][0]).terminal:
                raise SignalRefused(
                    f"signal {name!r}: job {job_id} is {rows[0][0]}; a finished job takes no "
                    "signals and nothing was written"
                )
            return bool(self._run("signal_send", params, conn)[0][1])

    def wake_signalled(self, claim: Claim) -> bool:
        """After ``claim``'s run settled waiting for a signal: make the job due now if
        the signal arrived while the run still held it; True when it did."""
        rows = self._run("wake_signalled", {"id": claim.job_id.to_uuid(), "run": claim.run_count})
        return bool(rows)

    def durable_state(
        self, job_id: JobId, conn: psycopg.Connection[Any] | None = None
    ) -> DurableState:
        """The job's recorded steps, the signals sent to it, and what it waits for."""
        uid = to_uuid(job_id)
        steps = tuple(StepRecord.from_row(r) for r in self._run("steps_of", {"id": uid}, conn))
        signals = tuple(SignalRecord(*r) for r in self._run("signals_of", {"id": uid}, conn))
        waits = self._run("wait_of", {"id": uid}, conn)
        return DurableState(steps, signals, WaitRecord(*waits[0]) if waits else None)

    # -- waiting for jobs -------------------------------------------------------------

    def await_job(self, job_id: ULID) -> JobRecord | None:
        """Mark the job awaited, so that the transaction finishing it notifies the channel
        of finished jobs, and read it afterwards; None if no job has this id. Call it once
        listening: a job that finishes after this is heard, one that finished before is
        read finished. Waits while a finishing transaction holds the job's row."""
        rows = self._run("await_job", {"id": job_id.to_uuid()})
        if rows:
            return JobRecord.from_row(rows[0])
        # Finished, marked by another waiter, or unknown: this later statement reads what
        # the mark's lock waited for.
        return self.reads.get(job_id)

    # -- schedules and retention ------------------------------------------------------

    def sync_schedules(self, schedules: Sequence[Schedule]) -> dict[str, str]:
        """Make the schedule rows match ``schedules``: add new ones, update changed ones
        (a changed timing starts at its next slot after now), mark the others inactive.
        Returns what happened to each row written ('added', 'changed', 'retired')."""
        now = self.now()
        rows = self._run(
            "schedules_sync",
            {
                "names": [s.name for s in schedules],
                "kinds": [s.kind for s in schedules],
                "expressions": [s.timing.expression for s in schedules],
                "zones": [s.timing.zone for s in schedules],
                "payloads": [s.payload_json for s in schedules],
                "with_slots": [s.with_slot for s in schedules],
                "priorities": [s.priority for s in schedules],
                "max_attempts": [s.max_attempts for s in schedules],
                "catch_ups": [s.catch_up for s in schedules],
                "max_catch_ups": [s.max_catch_up for s in schedules],
                "fingerprints": [s.fingerprint for s in schedules],
                "next_slots": [s.timing.after(now) for s in schedules],
            },
        )
        return {name: change for name, change in rows}

    def schedule_states(self, names: Sequence[str]) -> tuple[dict[str, ScheduleState], datetime]:
        """The rows of the named schedules, and the database's clock."""
        rows = self._run("schedules_due", {"names": list(names)})
        states = {r[0]: ScheduleState(*r[:4]) for r in rows if r[0] is not None}
        return states, rows[0][4]

    def fire_schedule(self, schedule: Schedule, expected: datetime, firing: Firing) -> int | None:
        """Enqueue ``firing.slots`` and move the row on to ``firing.next_slot`` in one
        statement, if its next slot is still ``expected``; returns the jobs inserted, or
        None when another worker fired first (nothing written). A built-in schedule
        only moves on: its slots start work in the worker, not jobs."""
        slots = [] if schedule.builtin else firing.slots
        rows = self._run(
            "schedule_fire",
            {
                "name": schedule.name,
                "fingerprint": schedule.fingerprint,
                "expected": expected,
                "last_slot": firing.slots[-1] if firing.slots else None,
                "next_slot": firing.next_slot,
                "kind": schedule.kind,
                "priority": schedule.priority,
                "max_attempts": schedule.max_attempts,
                "concurrency_key": schedule.concurrency_key,
                "ids": [new_id().to_uuid() for _ in slots],
                "payloads": [schedule.job_payload_json(slot) for slot in slots],
            },
        )
        fired, jobs = rows[0]
        return int(jobs) if fired else None

    def trigger_schedule(self, name: str, concurrency_key: str | None = None) -> ULID | None:
        """Enqueue one run of schedule ``name`` now (its job keyed ``concurrency_key``);
        None when there is no such schedule. Raises `ConfigurationError`, writing
        nothing, when its kind has a key limit and no key is given."""
        params = {"id": new_id().to_uuid(), "name": name, "concurrency_key": concurrency_key}
        rows = self._run("schedule_trigger", params)
        if not rows:
            return None
        job_id, needs_key = rows[0]
        if needs_key:
            raise ConfigurationError(
                f"schedule {name!r}: its kind has key_concurrency, so its job needs a "
                "concurrency key, which the schedule's declaration in the application's "
                "code gives; trigger it through the application's queue (queue.trigger, "
                "or its embedded CLI: flask venturi, manage.py venturi)"
            )
        return ULID.from_uuid(job_id)

    def prune(
        self, retention: Retention, stopping: threading.Event, *, dedicated: bool = False
    ) -> dict[str, int] | None:
        """Delete finished jobs past ``retention`` in batches of ``retention.batch``, each
        its own short transaction and followed by a rest (`PRUNE_REST`), until none is
        left or ``stopping`` is set. Returns the count per status, or None when another
        session is pruning this prefix.

        ``dedicated`` prunes on a connection opened for it and closed after (as
        `vacuum_jobs`), which never prepares its statements (it may lead to a pooler):
        no pooled connection is held or kept open for the prune."""
        key = {"key": self.prefix.prune_lock_key}
        with self.connections.dedicated() if dedicated else self.connection() as conn:
            if dedicated:
                conn.prepare_threshold = None
            if not execute(conn, self._statement("prune_lock"), key)[0][0]:
                _end_transaction(conn)
                return None
            try:
                return {
                    status: self._prune_status(conn, status, keep, retention.batch, stopping)
                    for status, keep in retention.kept().items()
                    if keep is not None
                }
            finally:
                execute(conn, self._statement("prune_unlock"), key)
                _end_transaction(conn)

    def _prune_status(
        self,
        conn: psycopg.Connection[Any],
        status: str,
        keep: float,
        batch: int,
        stopping: threading.Event,
    ) -> int:
        statement = self._statement("prune")
        params: dict[str, Any] = {"status": status, "keep": keep, "after": None, "batch": batch}
        total = 0
        while not stopping.is_set():
            started = time.monotonic()
            deleted, params["after"] = execute(conn, statement, params)[0]
            _end_transaction(conn)
            total += int(deleted)
            if deleted < batch:
                break
            stopping.wait((time.monotonic() - started) * PRUNE_REST)
        return total

    # -- the worker registry ----------------------------------------------------------

    def beat_worker(self, presence: WorkerPresence, running: int) -> None:
        """Write ``presence`` into the worker registry (and drop the rows of dead workers)."""
        self._run(
            "worker_beat",
            {
                "name": presence.name,
                "host": presence.host,
                "pid": presence.pid,
                "kinds": list(presence.kinds),
                "concurrency": presence.concurrency,
                "running": running,
                "beat_every": presence.beat_every,
            },
        )

    def leave_worker(self, name: str) -> None:
        """Remove a stopping worker from the registry."""
        self._run("worker_leave", {"name": name})


def _floor(priority_floor: int | None) -> int:
    return SMALLINT_MIN if priority_floor is None else priority_floor


def settle_params(
    items: Sequence[tuple[Claim, Settlement]], *, within_lease: bool, announce: bool
) -> dict[str, Any]:
    """The parameters of settle.sql for the runs of ``items``."""
    return {
        "ids": [c.job_id.to_uuid() for c, _ in items],
        "owners": [c.claimed_by for c, _ in items],
        "runs": [c.run_count for c, _ in items],
        "actions": [s.action.value for _, s in items],
        "delays": [s.delay for _, s in items],
        "ats": [s.at for _, s in items],
        "carries": [s.carry_json for _, s in items],
        "notes": [s.note for _, s in items],
        "attachments": [s.attachment_json for _, s in items],
        "facts": [s.facts_json for _, s in items],
        "within_lease": within_lease,
        "announce": announce,
    }


def lease_params(leases: Sequence[tuple[Claim, float]]) -> dict[str, Any]:
    """The parameters of extend_lease.sql for renewing each claim of ``leases`` for its
    number of seconds."""
    return {
        "ids": [c.job_id.to_uuid() for c, _ in leases],
        "owners": [c.claimed_by for c, _ in leases],
        "runs": [c.run_count for c, _ in leases],
        "leases": [float(seconds) for _, seconds in leases],
    }


def _written(
    items: Sequence[tuple[Claim, Settlement]], rows: list[tuple[Any, ...]]
) -> list[Written]:
    """What settle.sql's ``rows`` (id, outcome or NULL while locked) say of each run of
    ``items``, in order; a run without a row was fenced out."""
    found = {ULID.from_uuid(row[0]): row[1] for row in rows}
    written: list[Written] = []
    for claim, _ in items:
        if claim.job_id not in found:
            written.append(None)
        else:
            outcome = found[claim.job_id]
            written.append(BUSY if outcome is None else Outcome(outcome))
    return written


def _refused(exc: BaseException) -> bool:
    """Whether the database refused a run's end for what it carries (its values, a dedup
    key a racing enqueue holds, a constraint), not for a passing reason."""
    if isinstance(exc, (errors.UniqueViolation, UnicodeError)):
        return True
    return retrying.classify(exc) is retrying.ErrorClass.STATEMENT


def _in_claim_order(jobs: list[JobRecord]) -> list[JobRecord]:
    """Highest priority first, then the longest visible."""
    jobs.sort(key=lambda j: (-j.priority, j.visible_at, j.id))
    return jobs


def _transaction_unless_autocommit(
    conn: psycopg.Connection[Any],
) -> contextlib.AbstractContextManager[Any]:
    """Nothing on an autocommit connection (its pipeline's Sync ends the transaction),
    else an explicit transaction."""
    return contextlib.nullcontext() if conn.autocommit else conn.transaction()


def _end_transaction(conn: psycopg.Connection[Any]) -> None:
    # A borrowed pool's connections may not autocommit: commit each batch by hand so
    # that no transaction outlives it (the session's advisory lock survives commits).
    if not conn.autocommit:
        conn.commit()


def check_batch(batch: object, operation: str) -> None:
    # A batch of 0 changes nothing yet never comes back "short": the loop would not end.
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigurationError(f"{operation} batch must be a positive int, got {batch!r}")
