"""`PostgresStore`: the store protocol over a psycopg connection pool."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Final, TypeVar

import attrs
import psycopg
from psycopg_pool import ConnectionPool
from ulid import ULID

from venturi.errors import ConfigurationError, InvalidJob, StoreError
from venturi.models import SMALLINT_MIN, JobRecord, NewJob, Outcome
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES
from venturi.prefix import Prefix
from venturi.settlements import (
    BUSY,
    LOST_FACTS_JSON,
    BatchOutcome,
    Busy,
    Claim,
    SettleAction,
    Settlement,
)
from venturi.store import migrations, retrying, sqlfiles
from venturi.store.dependencies import Dependencies
from venturi.store.dsn import connect_defaults, parse_dsn
from venturi.store.enqueueing import Enqueuer
from venturi.store.flow import FlowControl, completion_params, lease_params
from venturi.store.hooks import Settled, StoreHooks
from venturi.store.ids import new_id, new_ids
from venturi.store.observing import Observing
from venturi.store.owned_pools import open_owned
from venturi.store.repending import Repending, Written
from venturi.store.scheduling import Scheduling
from venturi.store.statements import (
    Preparation,
    check_preparation,
    mapped_errors,
    new_pool,
    run_prepared,
    run_read,
    while_busy,
)

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
# with `venturi bench --compare-unprepared` (README, "Behind PgBouncer").
DEFAULT_PREPARED_STATEMENTS: Final[Preparation] = "auto"


# A dict-backed class (no slots), so a test may replace one operation of one instance.
@attrs.define(eq=False, slots=False)
class PostgresStore(FlowControl, Scheduling, Dependencies, Observing, Repending):
    """The store over a `psycopg_pool.ConnectionPool`, under one table-name prefix.

    Built with `from_dsn` (it opens and later closes its own pool) or `from_pool` (it
    borrows the caller's pool and never closes it). Thread-safe: every operation takes a
    pooled connection for one statement or one short transaction. Database outages
    surface as `StoreUnavailable`.
    """

    pool: ConnectionPool[Any]
    prefix: Prefix
    owns_pool: bool = attrs.field(kw_only=True)
    max_payload_bytes: int = attrs.field(default=DEFAULT_MAX_PAYLOAD_BYTES, kw_only=True)
    migration_lock_timeout: float = attrs.field(
        default=migrations.DEFAULT_LOCK_TIMEOUT, kw_only=True
    )
    listen_dsn: str | None = attrs.field(default=None, kw_only=True)
    # Shared with the store's siblings, so a worker's side stores are watched too.
    hooks: StoreHooks = attrs.field(factory=StoreHooks, kw_only=True)
    _enqueuer: Enqueuer = attrs.field(init=False)

    @max_payload_bytes.validator
    def _check_max_payload_bytes(self, _: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ConfigurationError(f"max_payload_bytes must be positive, got {value}")

    @listen_dsn.validator
    def _check_listen_dsn(self, _: attrs.Attribute[str | None], value: str | None) -> None:
        if value is not None:
            parse_dsn(value, "listen_dsn")

    @_enqueuer.default
    def _new_enqueuer(self) -> Enqueuer:
        return Enqueuer(self.prefix, self.max_payload_bytes)

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
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
        size = DEFAULT_POOL_SIZE if pool_size is None else pool_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"pool_size must be a positive int, got {pool_size!r}")
        prepared = check_preparation(prepared_statements)
        kwargs = connect_defaults(parse_dsn(dsn, "dsn"))
        name = f"venturi-{prefix.name}"
        pool = new_pool(dsn, kwargs, size, pool_timeout, name, prepared=prepared)
        store = cls(pool, prefix, owns_pool=True, **options)  # may refuse an option
        open_owned(pool)  # only now, so a refused option leaves no pool running
        return store

    @classmethod
    def from_pool(cls, pool: ConnectionPool[Any], prefix: Prefix, **options: Any) -> PostgresStore:
        """Borrow a caller's pool; venturi never closes it."""
        return cls(pool, prefix, owns_pool=False, **options)

    # -- enqueue ----------------------------------------------------------------------

    # Each public write passes through `hooks` once; the private twins below call each
    # other (a job with parents is a graph, a refused batch is completed job by job)
    # without passing the same write through the hooks twice.

    def enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None = None) -> ULID:
        if not self.hooks:
            return self._enqueue(job, conn)
        return self.hooks.enqueue([job], conn, lambda jobs: [self._enqueue(jobs[0], conn)])[0]

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
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
        """Write jobs with parents (``after``; a parent may be an earlier job of ``jobs``)
        under ``ids`` in one transaction, each waiting, pending or cancelled as its parents
        decide; an unknown parent raises `InvalidJob` and nothing is written."""
        return self.hooks.enqueue(
            jobs, conn, lambda passed: self._enqueue_graph(passed, ids, workflow_id, conn)
        )

    def _enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None) -> ULID:
        job_id = new_id()
        if job.depends_on:
            return self._enqueue_graph([job], [job_id], None, conn)[0]
        if conn is not None:
            with mapped_errors():
                return self._enqueuer.enqueue(conn, job, job_id)
        return self._write_own(
            lambda own: self._enqueuer.enqueue(own, job, job_id),
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
        if conn is not None:
            with mapped_errors():
                return self._enqueuer.enqueue_many(conn, jobs, ids)
        plain = [i for i, j in zip(ids, jobs, strict=True) if j.dedup_key is None]
        return self._write_own(
            lambda own: self._enqueuer.enqueue_many(own, jobs, ids),
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
        if conn is not None:
            with mapped_errors():
                return self._write_graph(conn, jobs, ids, workflow_id, self.max_payload_bytes)
        return self._write_own(
            lambda own: self._write_graph(own, jobs, ids, workflow_id, self.max_payload_bytes),
            ids,
            list(ids),
            repeatable=True,
            what=f"enqueue of {len(jobs)} jobs with parents",
        )

    def _write_own(
        self,
        write: Callable[[psycopg.Connection[Any]], T],
        ids: Sequence[ULID],
        written_result: T,
        *,
        repeatable: bool,
        what: str,
    ) -> T:
        """Run an enqueue on a pooled connection, retrying passing errors for up to
        `ENQUEUE_RETRY_SECONDS`. The ids were made before the first attempt, so a retry
        after a lost answer first looks for them: a write that did commit is recognised
        (returning ``written_result``), never made twice. A write that cannot be
        recognised (``repeatable`` False) is not retried after a lost answer."""
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

    # -- claim and settle -------------------------------------------------------------

    def claim(
        self,
        worker: str,
        leases: dict[str, float],
        limit: int,
        priority_floor: int | None = None,
        *,
        limited: Collection[str] = (),
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[JobRecord]:
        """Claim up to ``limit`` due jobs. Kinds in ``limited`` (those with limits) are
        claimed first and within their limits; the others by the plain claim, which
        leaves out any kind the database holds paused or limited: on ``conn`` if given
        (an autocommit connection straight to the server), as a prepared statement."""
        if limit < 1 or not leases:
            return []
        jobs: list[JobRecord] = []
        if limited:
            turns = {k: v for k, v in leases.items() if k in limited}
            jobs = self.claim_limited(worker, turns, limit, priority_floor)
            leases = {k: v for k, v in leases.items() if k not in limited}
            limit -= len(jobs)
            if limit < 1 or not leases:
                return _in_claim_order(jobs)
        params = {
            "kinds": list(leases),
            "leases": [float(v) for v in leases.values()],
            "priority_floor": SMALLINT_MIN if priority_floor is None else priority_floor,
            "limit": limit,
            "worker": worker,
        }
        if conn is None:
            rows = self._fetch("claim", params)
        else:
            rows = run_prepared(conn, sqlfiles.statement("claim", self.prefix), params)
        jobs.extend(JobRecord.from_row(row) for row in rows)
        return _in_claim_order(jobs)

    def settle(self, claim: Claim, settlement: Settlement) -> Outcome | None:
        if settlement.action is SettleAction.COMPLETE:
            done = while_busy(lambda: self._complete_one(claim, settlement))
            outcome = Outcome.COMPLETED if done else None
        else:
            outcome = while_busy(lambda: self._repend_or_fallback((claim, settlement)))
        if self.hooks:
            self.hooks.settled([Settled(claim, settlement, outcome)])
        return outcome

    def settle_many(self, items: Sequence[tuple[Claim, Settlement]]) -> list[Written]:
        written = self._settle_many(items)
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

    def _complete_one(self, claim: Claim, settlement: Settlement) -> bool | Busy:
        outcome = self._complete_many([(claim, settlement)])
        return BUSY if outcome.busy else claim.job_id in outcome.applied

    def complete_many(self, items: Sequence[tuple[Claim, Settlement]]) -> BatchOutcome:
        """Complete ``items`` in one statement. When the database refuses a value of the
        batch (`retrying.refusal`), each run is completed alone, and the one refused by
        its `Settlement.fallback`: still completed, without what was refused."""
        result = self._complete_many(items)
        if self.hooks:
            self.hooks.settled(_batch_settled(items, result))
        return result

    def complete_and_claim(
        self,
        claim: Claim,
        settlement: Settlement,
        kind: str,
        lease: float,
        priority_floor: int | None = None,
    ) -> tuple[BatchOutcome, list[JobRecord]]:
        result, jobs = self._complete_and_claim(claim, settlement, kind, lease, priority_floor)
        if self.hooks:
            self.hooks.settled(_batch_settled([(claim, settlement)], result))
        return result, jobs

    def _complete_many(self, items: Sequence[tuple[Claim, Settlement]]) -> BatchOutcome:
        if not items:
            return BatchOutcome()
        try:
            return self._complete_batch(items)
        except (StoreError, UnicodeError) as exc:
            refused = retrying.refusal(exc)
            if refused is None:
                raise
            if len(items) > 1:
                return BatchOutcome.merged([self._complete_many([item]) for item in items])
            ((claim, settlement),) = items
            return self._complete_batch([(claim, settlement.fallback(refused))])

    def _complete_batch(self, items: Sequence[tuple[Claim, Settlement]]) -> BatchOutcome:
        params = completion_params(items, within_lease=False)
        return BatchOutcome.from_rows(self._fetch("settle_complete", params))

    def complete_in(
        self, conn: psycopg.Connection[Any], claim: Claim, settlement: Settlement
    ) -> bool:
        params = completion_params([(claim, settlement)], within_lease=True)
        query = sqlfiles.query("settle_complete", self.prefix)

        def attempt() -> bool | Busy:
            outcome = BatchOutcome.from_rows(run_read(conn, query, params))
            return BUSY if outcome.busy else claim.job_id in outcome.applied

        applied = while_busy(attempt)
        if self.hooks:
            # A transactional run: written in its transaction, which commits right after.
            self.hooks.settled([Settled(claim, settlement, Outcome.COMPLETED if applied else None)])
        return applied

    def extend_lease(self, leases: Sequence[tuple[Claim, float]]) -> BatchOutcome:
        if not leases:
            return BatchOutcome()
        return BatchOutcome.from_rows(self._fetch("extend_lease", lease_params(leases)))

    def find_stale(self, limit: int = 100) -> list[JobRecord]:
        return [JobRecord.from_row(r) for r in self._fetch("find_stale", {"limit": limit})]

    def recover(self, job: JobRecord, delay: float = 0.0) -> Outcome | None:
        params = {
            "id": job.id.to_uuid(),
            "owner": job.claimed_by,
            "run": job.run_count,
            "lapsed": True,
            "delay": float(delay),
            "set_carry": False,
            "carry": None,
            "note": f"lease held by {job.claimed_by or '?'} expired",
            "facts": LOST_FACTS_JSON,
        }
        outcome = self._repend("fail_run", params)
        # A row locked meanwhile is left for the next scan: one lock never stalls the reaper.
        return None if outcome is BUSY else outcome

    def sibling(self, pool_size: int = 1) -> PostgresStore:
        """A store on the same database and prefix with a small pool of its own (built
        from the same connection parameters), for work a busy main pool must not starve."""
        conninfo, kwargs = self.connection_params()
        name = f"venturi-{self.prefix.name}-side"
        # Never preparing if the main pool's keywords don't say it may (a caller's pool
        # may lead to a pooler), else only straight to the server.
        prepared: Preparation = False if kwargs.get("prepare_threshold") is None else "auto"
        pool = new_pool(conninfo, kwargs, pool_size, self.pool.timeout, name, prepared=prepared)
        open_owned(pool)
        return PostgresStore(
            pool,
            self.prefix,
            owns_pool=True,
            max_payload_bytes=self.max_payload_bytes,
            listen_dsn=self.listen_dsn,
            hooks=self.hooks,
        )

    def with_prefix(self, prefix: Prefix) -> PostgresStore:
        return PostgresStore(
            self.pool,
            prefix,
            owns_pool=False,
            max_payload_bytes=self.max_payload_bytes,
            migration_lock_timeout=self.migration_lock_timeout,
            listen_dsn=self.listen_dsn,
        )

    def close(self) -> None:
        """Close the pool if this store opened it; a borrowed pool is left alone."""
        if self.owns_pool:
            self.pool.close()


def _batch_settled(
    items: Sequence[tuple[Claim, Settlement]], result: BatchOutcome
) -> list[Settled]:
    """The runs of ``items`` that ``result`` completed or fenced out (busy ones are
    written again later)."""
    return [
        Settled(claim, settlement, Outcome.COMPLETED if claim.job_id in result.applied else None)
        for claim, settlement in items
        if claim.job_id not in result.busy
    ]


def _in_claim_order(jobs: list[JobRecord]) -> list[JobRecord]:
    """Highest priority first, then the longest visible."""
    jobs.sort(key=lambda j: (-j.priority, j.visible_at, j.id))
    return jobs
