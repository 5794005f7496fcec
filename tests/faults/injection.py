"""Fault injection at the store's seam: a chosen statement fails for real on the server.

`InjectingStore` is a `PostgresStore` whose statements (``_run``, named after their
sql/ file; ``settle`` for every run's end) and enqueues run as usual until a `Faults`
plan says otherwise. Then, on the
very connection the statement was about to use and just before it runs, the server
raises a genuine error of the chosen class:

- a statement timeout (57014): a side connection holds the jobs table in ACCESS
  EXCLUSIVE mode while the statement's connection, under ``statement_timeout = 50ms``,
  reads the table;
- a lock timeout (55P03): the same, under ``lock_timeout = 50ms``;
- a deadlock (40P01): the connection and a side session take two advisory locks in
  opposite orders, and the server's deadlock detector aborts the connection's statement;
- a terminated backend (57P01): a side connection ends the connection's backend with
  ``pg_terminate_backend`` and the statement itself then fails on the dead connection.

The error is raised inside the checkout of the store's `Connections`, so whatever the store
does with errors of its statements (map, retry) it does with these.
"""

from __future__ import annotations

import enum
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Final

import attrs
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from ulid import ULID

from tests.support import wait_until
from venturi.models import JobRecord, NewJob
from venturi.prefix import Prefix
from venturi.settlements import Claim, Settlement
from venturi.store.connections import Connections
from venturi.store.postgres import PostgresStore, Written

SETTING_MS: Final = 50


class ErrorClass(enum.Enum):
    """The transient error classes the harness raises, by SQLSTATE."""

    STATEMENT_TIMEOUT = "57014"
    LOCK_TIMEOUT = "55P03"
    DEADLOCK = "40P01"
    TERMINATED = "57P01"


@attrs.define
class Faults:
    """The plan: the next ``times`` runs of ``statement`` fail with ``error``.

    ``fired`` lists the statements that were made to fail, in order; ``errors`` the
    exceptions the server raised for them (a terminated backend's arrives later, from
    the statement itself, and is not listed).
    """

    statement: str | None = None
    error: ErrorClass = ErrorClass.STATEMENT_TIMEOUT
    times: int = 0
    fired: list[str] = attrs.field(factory=list)
    errors: list[BaseException] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def arm(self, statement: str, error: ErrorClass, times: int = 1) -> None:
        with self._lock:
            self.statement, self.error, self.times = statement, error, times

    def take(self, statement: str | None) -> ErrorClass | None:
        """The error to raise for this run of ``statement``, if the plan has one left."""
        with self._lock:
            if statement is None or statement != self.statement or self.times <= 0:
                return None
            self.times -= 1
            self.fired.append(statement)
            return self.error

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.fired)


class InjectingConnections(Connections):
    """`Connections` whose checkouts fail as the `Faults` plan says for the statement the
    thread names (`InjectingStore.statement`); its side pools (the heartbeat's, the
    reaper's) follow the same plan."""

    def __init__(
        self, base: Connections, faults: Faults, current: threading.local, jobs: sql.Identifier
    ) -> None:
        super().__init__(base.source, owned=base.owned, target=base.target)
        self.faults = faults
        self.current = current
        self.jobs = jobs

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        with super().connection() as conn:
            error = self.faults.take(getattr(self.current, "name", None))
            if error is not None:
                try:
                    _inject(error, conn, self.target.text, self.jobs)
                except psycopg.Error as exc:
                    self.faults.errors.append(exc)
                    raise
            yield conn

    def side(self, pool_size: int, label: str) -> Connections:
        side = super().side(pool_size, label)
        return InjectingConnections(side, self.faults, self.current, self.jobs)


class InjectingStore(PostgresStore):
    """A `PostgresStore` that fails statements as its `Faults` plan says (see module doc):
    each named operation names what runs on this thread's connections meanwhile, and
    its `InjectingConnections` fail the checkout. Its `sibling` (the heartbeat's and
    reaper's store) follows the same plan."""

    _current = threading.local()

    @classmethod
    def open(cls, dsn: str, prefix: str, faults: Faults, **options: Any) -> InjectingStore:
        """A migrated store over its own pool, failing statements as ``faults`` says."""
        plain = PostgresStore.from_dsn(dsn, Prefix(prefix), **options)
        store = cls.injecting(plain, faults)
        store.migrate()
        return store

    @classmethod
    def injecting(cls, store: PostgresStore, faults: Faults) -> InjectingStore:
        """``store``'s connections, failing statements as ``faults`` says."""
        jobs = sql.Identifier(f"{store.prefix.name}_jobs")
        return cls(
            InjectingConnections(store.connections, faults, cls._current, jobs),
            store.prefix,
            max_payload_bytes=store.max_payload_bytes,
            listen=store.listen,
            hooks=store.hooks,
        )

    @property
    def faults(self) -> Faults:
        assert isinstance(self.connections, InjectingConnections)
        return self.connections.faults

    @contextmanager
    def statement(self, name: str) -> Iterator[None]:
        """Name what runs on this thread's connections meanwhile (as the plan knows it)."""
        previous = getattr(self._current, "name", None)
        self._current.name = name
        try:
            yield
        finally:
            self._current.name = previous

    def _run(
        self,
        name: str,
        params: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        with self.statement(name):
            return super()._run(name, params, conn)

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
        # claim.sql or claim_floored.sql, run on a connection the claim checks out itself
        with self.statement("claim"):
            return super().claim(worker, leases, limit, priority_floor, limited=limited, conn=conn)

    def next_visible_at(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> datetime | None:
        with self.statement("next_visible_at"):
            return super().next_visible_at(kinds, priority_floor)

    def seconds_until_visible(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> float | None:
        with self.statement("next_visible_at"):
            return super().seconds_until_visible(kinds, priority_floor)

    def settle_many(
        self,
        items: Sequence[tuple[Claim, Settlement]],
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[Written]:
        with self.statement("settle"):
            return super().settle_many(items, conn)

    def settle_and_pass(
        self,
        claim: Claim,
        settlement: Settlement,
        kind: str,
        lease: float,
        priority_floor: int | None = None,
    ) -> tuple[Written, list[JobRecord]]:
        with self.statement("settle_and_pass"):
            return super().settle_and_pass(claim, settlement, kind, lease, priority_floor)

    def enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None = None) -> ULID:
        with self.statement("enqueue"):
            return super().enqueue(job, conn)

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        with self.statement("enqueue_many"):
            return super().enqueue_many(jobs, conn)

    def sibling(self, pool_size: int = 1) -> PostgresStore:
        # The side store's connections inject (`InjectingConnections.side`); its named
        # operations are this class's.
        side = super().sibling(pool_size)
        return InjectingStore(
            side.connections,
            side.prefix,
            max_payload_bytes=side.max_payload_bytes,
            listen=side.listen,
            hooks=side.hooks,
        )


def _inject(
    error: ErrorClass, conn: psycopg.Connection[Any], dsn: str, jobs: sql.Identifier
) -> None:
    if error is ErrorClass.STATEMENT_TIMEOUT:
        _under_table_lock(conn, dsn, jobs, "statement_timeout")
    elif error is ErrorClass.LOCK_TIMEOUT:
        _under_table_lock(conn, dsn, jobs, "lock_timeout")
    elif error is ErrorClass.DEADLOCK:
        _deadlock(conn, dsn)
    else:
        _terminate(conn, dsn)


def _under_table_lock(
    conn: psycopg.Connection[Any], dsn: str, jobs: sql.Identifier, setting: str
) -> None:
    """Raise the setting's error on ``conn``: it reads the table a side session locked."""
    with psycopg.connect(dsn) as side:  # a transaction: the lock lasts until it ends
        side.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(jobs))
        conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(setting), SETTING_MS))
        try:
            conn.execute(sql.SQL("SELECT FROM {} LIMIT 0").format(jobs))
        finally:
            conn.execute(sql.SQL("RESET {}").format(sql.Identifier(setting)))
            side.rollback()
    raise AssertionError(f"{setting} did not fire under the table lock")


# The advisory-lock namespace of the harness's deadlocks (the two-key form's first key).
_DEADLOCK_SPACE: Final = 0x7E57


def _deadlock(conn: psycopg.Connection[Any], dsn: str) -> None:
    """A real deadlock between ``conn`` and a side session, which the server breaks by
    aborting ``conn``'s statement (its deadlock check is the first to run)."""
    first, second = secrets.randbelow(2**30), secrets.randbelow(2**30) + 2**30
    side_holds_first = threading.Event()
    with psycopg.connect(dsn) as side:
        side.execute("SET deadlock_timeout = '10s'")
        side.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_DEADLOCK_SPACE, first))
        side_holds_first.set()

        def close_the_cycle() -> None:
            # Wait for ``conn`` to hold ``second``, then ask for it: ``conn`` then waits
            # for ``first`` behind us, and we for ``second`` behind it.
            with psycopg.connect(dsn, autocommit=True) as watch:
                _wait_for_lock(watch, conn.info.backend_pid, second, granted=True)
            side.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_DEADLOCK_SPACE, second))
            side.rollback()

        closer = threading.Thread(target=close_the_cycle, name="fault-deadlock", daemon=True)
        closer.start()
        conn.execute("SET deadlock_timeout = '100ms'")
        try:
            conn.execute(
                sql.SQL(
                    "DO $$ BEGIN"
                    " PERFORM pg_advisory_xact_lock({space}, {second});"
                    " WHILE NOT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
                    "   AND classid = {space} AND objid = {second} AND NOT granted) LOOP"
                    "   PERFORM pg_sleep(0.005);"
                    " END LOOP;"
                    " PERFORM pg_advisory_xact_lock({space}, {first});"
                    " END $$"
                ).format(
                    space=sql.Literal(_DEADLOCK_SPACE),
                    first=sql.Literal(first),
                    second=sql.Literal(second),
                )
            )
        finally:
            conn.execute("RESET deadlock_timeout")
            closer.join(10)
    raise AssertionError("the staged deadlock did not abort the statement")


def _wait_for_lock(watch: psycopg.Connection[Any], pid: int, key: int, *, granted: bool) -> None:
    def holds() -> bool:
        row = watch.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s"
            " AND objid = %s AND pid = %s AND granted = %s",
            (_DEADLOCK_SPACE, key, pid, granted),
        ).fetchone()
        return bool(row and row[0])

    state = "hold" if granted else "wait for"
    wait_until(holds, 10, interval=0.005, what=f"backend {pid} to {state} advisory lock {key}")


def _terminate(conn: psycopg.Connection[Any], dsn: str) -> None:
    """End ``conn``'s backend (waiting until it is gone); its statement fails next."""
    with psycopg.connect(dsn, autocommit=True) as side:
        side.execute("SELECT pg_terminate_backend(%s, 5000)", (conn.info.backend_pid,))


def with_setting(dsn: str, setting: str, value: str) -> str:
    """``dsn`` whose sessions start with ``setting = value`` (libpq's ``options``)."""
    return make_conninfo(dsn, options=f"-c {setting}={value}")


class TableLock:
    """A prefix's jobs table held in ACCESS EXCLUSIVE mode by a side session, from
    construction until `release` or for ``seconds`` at most, whichever comes first."""

    def __init__(self, dsn: str, prefix: str, seconds: float) -> None:
        self._held = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(
            target=self._hold, args=(dsn, prefix, seconds), name="test-table-lock", daemon=True
        )
        self._thread.start()
        if not self._held.wait(10):
            raise AssertionError("could not lock the jobs table")

    def _hold(self, dsn: str, prefix: str, seconds: float) -> None:
        with psycopg.connect(dsn) as side:
            table = sql.Identifier(f"{prefix}_jobs")
            side.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
            self._held.set()
            self._release.wait(seconds)
            side.rollback()

    def join(self) -> None:
        """Wait until the lock is gone."""
        self._thread.join()

    def release(self) -> None:
        self._release.set()
        self.join()
