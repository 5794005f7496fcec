"""The store's operations beside a job's run: the schema, reads, the listener's
connection, and housekeeping (cleanup, cancel, requeue). `PostgresStore` inherits them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Final

import attrs
import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool, PoolTimeout
from ulid import ULID

from venturi.errors import DuplicateJob, StoreUnavailable, first_line
from venturi.models import (
    SMALLINT_MIN,
    CleanupCriteria,
    HistoryCursor,
    HistoryFilter,
    JobId,
    JobRecord,
    JournalRecord,
    KindStats,
    StatsSnapshot,
    to_uuid,
)
from venturi.prefix import Prefix
from venturi.store import migrations, retrying, sqlfiles
from venturi.store.dsn import connect_defaults, parse_dsn, redact_dsn
from venturi.store.notifier import PostgresNotifier
from venturi.store.statements import check_batch, run_read, run_statement

# The statements that drop a prefix, in order: its tables, then its function and the
# domains its tables' columns used (one statement per SQL file).
DROP_PREFIX_STATEMENTS: Final = ("drop_prefix", "drop_prefix_function", "drop_prefix_types")


class Housekeeping:
    """Operations of `PostgresStore` outside a job's run, over its pool and prefix."""

    pool: ConnectionPool[Any]
    prefix: Prefix
    migration_lock_timeout: float
    listen_dsn: str | None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection. Errors become venturi's (`venturi.store.retrying.store_error`):
        outages, pool exhaustion and other passing failures `StoreUnavailable`, a missing
        table `SchemaError`, anything else `StoreError`. A unique violation stays raw for
        the store's dedup handling."""
        pool = self.pool
        # A psycopg pool lends through `_Lent`; anything else standing in for one (Django's
        # test connection) through its own `connection()`.
        lent = _Lent(pool) if isinstance(pool, ConnectionPool) else pool.connection()
        try:
            with lent as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"no database connection within {pool.timeout:g}s "
                f"({redact_dsn(self.connection_params()[0])}): {self._why_no_connection()}"
            ) from exc
        except errors.UniqueViolation:
            raise  # the store's own callers read it (a dedup key taken by a racing enqueue)
        except psycopg.Error as exc:
            if retrying.outcome_unknown(exc):
                # After a server restart every idle pooled connection is dead, and each
                # would fail one request in turn (a worker backing off between claims
                # would need a minute to get through them); test and replace them now.
                pool.check()
            raise retrying.store_error(exc) from exc

    def _why_no_connection(self) -> str:
        """Why the pool had nothing to give. The pool only logs its connection errors, so
        one direct attempt finds the reason (a refused certificate, a wrong password);
        if that attempt succeeds, the pool's connections were all busy."""
        conninfo, kwargs = self.connection_params()
        try:
            # libpq's shortest timeout: the caller has already waited for the pool.
            psycopg.connect(conninfo, **{**kwargs, "connect_timeout": 2}).close()
        except psycopg.Error as exc:
            return first_line(exc)
        return f"all {self.pool.max_size} pooled connections were busy"

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in an open transaction (commits when the block ends, rolls
        back if it raises)."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def _fetch(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run ``sql/<name>.sql`` on a pooled connection (prepared as the connection
        decides)."""
        with self.connection() as conn:
            return run_statement(conn, sqlfiles.statement(name, self.prefix), params)

    def _read(
        self, name: str, params: dict[str, Any], conn: psycopg.Connection[Any] | None
    ) -> list[tuple[Any, ...]]:
        """`_fetch`, or the same read on ``conn`` (inside its transaction) if given."""
        if conn is None:
            return self._fetch(name, params)
        return run_read(conn, sqlfiles.query(name, self.prefix), params)

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
        floor = SMALLINT_MIN if priority_floor is None else priority_floor
        rows = self._fetch("next_visible_at", {"kinds": list(kinds), "priority_floor": floor})
        return (rows[0][0], rows[0][1]) if rows else (None, None)

    # -- schema -----------------------------------------------------------------------

    def migrate(self) -> list[str]:
        with self.connection() as conn:
            return migrations.migrate(conn, self.prefix, self.migration_lock_timeout)

    def check_schema(self) -> None:
        with self.connection() as conn:
            migrations.check(conn, self.prefix)

    def schema_script(self, after: int = 0, made_by: str = "venturi") -> str:
        return migrations.schema_script(self.prefix, after, self.migration_lock_timeout, made_by)

    def drop_prefix(self) -> None:
        for name in DROP_PREFIX_STATEMENTS:
            self._fetch(name)

    def ping(self) -> str:
        with self.connection() as conn:
            # A pooled connection may be stale: one statement proves this one works.
            run_statement(conn, sqlfiles.query("now", self.prefix))
            return conn.info.parameter_status("server_version") or "?"

    def now(self) -> datetime:
        value: datetime = self._fetch("now")[0][0]
        return value

    def notifier(self) -> PostgresNotifier:
        """A new listener built from the pool's own connection parameters (TLS included),
        or from ``listen_dsn`` when set (straight to the server past a transaction-pooling
        proxy), with the pool's connect keywords under the ones that DSN sets itself."""
        return self._listener(finished=False)

    def finished_notifier(self) -> PostgresNotifier:
        """A listener like `notifier` on the channel of finished jobs (waiters)."""
        return self._listener(finished=True)

    def _listener(self, *, finished: bool) -> PostgresNotifier:
        conninfo, kwargs = self.connection_params()
        if self.listen_dsn is None:
            return PostgresNotifier(conninfo, kwargs, self.prefix, finished=finished)
        own = parse_dsn(self.listen_dsn, "listen_dsn")
        kwargs = {**connect_defaults(own), **kwargs}
        kwargs = {k: v for k, v in kwargs.items() if k not in own}
        return PostgresNotifier(self.listen_dsn, kwargs, self.prefix, finished=finished)

    def connection_params(self) -> tuple[str, dict[str, Any]]:
        """The pool's conninfo and connect keywords (less autocommit), resolving a pool
        configured with callables, so side connections match the pool's (TLS included)."""
        conninfo = self.pool.conninfo() if callable(self.pool.conninfo) else self.pool.conninfo
        raw = self.pool.kwargs() if callable(self.pool.kwargs) else self.pool.kwargs
        kwargs = {k: v for k, v in (raw or {}).items() if k != "autocommit"}
        return conninfo, kwargs

    def notify(self, payload: str) -> None:
        self._fetch("notify", {"payload": payload})

    # -- reading and housekeeping -----------------------------------------------------

    def get(self, job_id: JobId, conn: psycopg.Connection[Any] | None = None) -> JobRecord | None:
        rows = self._read("get", {"id": to_uuid(job_id)}, conn)
        return JobRecord.from_row(rows[0]) if rows else None

    def journal(
        self, job_id: JobId, conn: psycopg.Connection[Any] | None = None
    ) -> list[JournalRecord]:
        rows = self._read("journal", {"id": to_uuid(job_id)}, conn)
        return [JournalRecord.from_row(r) for r in rows]

    def last_notes(self, job_ids: Sequence[JobId]) -> dict[ULID, str]:
        """Each job's latest non-empty journal note (jobs without one are left out)."""
        if not job_ids:
            return {}
        rows = self._fetch("last_notes", {"ids": [to_uuid(i) for i in job_ids]})
        return {ULID.from_uuid(row[0]): row[1] for row in rows}

    def history(
        self, filter: HistoryFilter, before: HistoryCursor | None = None, limit: int = 50
    ) -> list[JobRecord]:
        params = {
            "kind": filter.kind,
            "status": None if filter.status is None else filter.status.value,
            "finished_since": filter.finished_since,
            "finished_until": filter.finished_until,
            "before_id": None if before is None else before.id.to_uuid(),
            "limit": limit,
        }
        return [JobRecord.from_row(r) for r in self._fetch("history", params)]

    def cleanup(self, criteria: CleanupCriteria, batch: int = 1000) -> int:
        check_batch(batch, "cleanup")
        params = {
            "finished_before": criteria.finished_before,
            "kind": criteria.kind,
            "status": None if criteria.status is None else criteria.status.value,
            "batch": batch,
        }
        total = 0
        while True:
            deleted = int(self._fetch("cleanup", params)[0][0])
            total += deleted
            if deleted < batch:
                return total

    def stats(self) -> StatsSnapshot:
        rows = self._fetch("stats")
        kinds = tuple(KindStats(*row[:8]) for row in rows)
        kinds = tuple(
            attrs.evolve(k, paused=row[9], waiting=row[10])
            for k, row in zip(kinds, rows, strict=True)
        )
        taken_at = rows[0][8] if rows else self.now()
        return StatsSnapshot(kinds, taken_at)

    def pending_jobs(
        self, kind: str | None = None, conn: psycopg.Connection[Any] | None = None
    ) -> list[JobRecord]:
        """The jobs waiting to run (due or scheduled), of ``kind`` or all, oldest first;
        read on ``conn`` when given, so a transaction sees the jobs it enqueued itself."""
        rows = self._read("pending_jobs", {"kind": kind}, conn)
        return [JobRecord.from_row(r) for r in rows]

    def advance_clock(self, seconds: float, conn: psycopg.Connection[Any] | None = None) -> None:
        """Move unfinished jobs ``seconds`` into the past, as if that much time had gone by:
        pending jobs come due that much earlier and claims expire that much earlier."""
        self._read("advance_clock", {"seconds": seconds}, conn)

    def cancel(self, job_id: JobId, note: str | None = None) -> bool:
        return bool(self._fetch("cancel", {"id": to_uuid(job_id), "note": note}))

    def requeue(self, job_id: JobId, note: str | None = None) -> bool:
        try:
            return bool(self._fetch("requeue", {"id": to_uuid(job_id), "note": note}))
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
                count = len(self._fetch("requeue_dead", params))
            except errors.UniqueViolation as exc:
                # An enqueue took a key mid-statement; nothing changed, so try again.
                races += 1
                if races > 20:
                    raise DuplicateJob("requeue kept racing enqueues for dedup keys") from exc
                continue
            total += count
            if count < batch:
                return total


class _Lent:
    """`ConnectionPool.connection` without its generator and its usage statistics: every
    statement of the store takes its connection here, and the two nested generators it
    went through before (the pool's inside the store's) cost a single enqueue about 8 us
    of client CPU. psycopg's connection context commits, or on an error rolls back (a
    no-op on an autocommit connection), before the connection goes back."""

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool

    def __enter__(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = self._pool.getconn()
        self._conn = conn
        return conn.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._conn.__exit__(exc_type, exc, traceback)
        finally:
            self._pool.putconn(self._conn)
