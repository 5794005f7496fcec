"""Where a store's statements run: the connections of one database, the one way a
statement is executed, and what every checkout checks.

`Connections` is built once around its source (a pool venturi opened and closes, a
caller's pool it never closes, or a lender of an outside connection such as Django's
test connection); which of them it is never needs asking again. Every checkout first
makes sure this is still the process that built it (a pool cannot cross `os.fork()`),
and maps database errors to venturi's.
"""

from __future__ import annotations

import atexit
import functools
import os
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, Final, Literal, Protocol

import psycopg
from psycopg import errors, pq
from psycopg.rows import tuple_row
from psycopg.types.json import JsonbLoader, JsonLoader
from psycopg_pool import ConnectionPool, PoolTimeout

from venturi.errors import ConfigurationError, ForkedError, StoreUnavailable, first_line
from venturi.store import retrying, sqlfiles
from venturi.store.dsn import Dsn, redact_dsn
from venturi.store.failover import PrimaryWatch

# psycopg's own default: a statement is prepared on its fifth run on a connection.
PREPARE_THRESHOLD: Final = 5
_BEGIN: Final = b"BEGIN"
_IDLE: Final = pq.TransactionStatus.IDLE
# For one transaction: its statements run with the plan made for any values, and never
# compiled (a generic plan's estimates may pass jit_above_cost, and compiling such a
# statement took 100-130 ms on every run, many times the run itself).
_GENERIC_PLAN: Final = (
    b"SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    b" set_config('jit', 'off', true)"
)
_COMMIT: Final = b"COMMIT"
# psycopg_pool retries a failed connection with a doubling, uncapped delay until this
# many seconds pass, so after a long outage its next attempt could come minutes after
# the server is back. Giving up sooner lets the next request start a fresh attempt at
# once: workers resume within seconds of the database, whatever the outage's length.
RECONNECT_TIMEOUT: Final = 10.0

# Whether a pool's connections prepare statements: always, never, or "auto" (only those
# straight to the server).
Preparation = bool | Literal["auto"]

# Bumped in a forked child: connections made before it belong to the parent. Compared
# at each checkout, it costs an int comparison where `os.getpid()` is a system call.
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


class StoreConnection(psycopg.Connection[Any]):
    """A connection of a pool venturi opened (`new_pool`) or of its listener, which keeps
    one tuple-row cursor for the store's statements (`statement_cursor`).

    A psycopg cursor remembers the dumper of each parameter type and the loader of each
    column type it has met; a new cursor per statement looks them all up again, and
    builds and closes itself: on a two-core machine about 20 us of a single enqueue's
    100-150 us of client CPU. The kept cursor holds its last result until the
    connection's next statement; a pooled connection serves one thread at a time, and so
    does its cursor.
    """

    _statements: psycopg.Cursor[tuple[Any, ...]] | None = None

    def statement_cursor(self) -> psycopg.Cursor[tuple[Any, ...]]:
        # Nothing closes the kept cursor: it lives as long as its connection.
        cursor = self._statements
        if cursor is None:
            cursor = self._statements = self.cursor(row_factory=tuple_row)
        return cursor


def statement_cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[tuple[Any, ...]]:
    """A tuple-row cursor for one statement on ``conn``: the one a `StoreConnection`
    keeps, else a new one that reads JSON as venturi does (a caller's connection may load
    it otherwise: Django's loads jsonb as text). Never closed by its user: a client-side
    cursor holds no server resource."""
    if isinstance(conn, StoreConnection):
        return conn.statement_cursor()
    cursor = conn.cursor(row_factory=tuple_row)
    cursor.adapters.register_loader("json", JsonLoader)
    cursor.adapters.register_loader("jsonb", JsonbLoader)
    return cursor


def execute(
    conn: psycopg.Connection[Any],
    statement: bytes,
    params: dict[str, Any] | None = None,
    *,
    prepare: bool | None = None,
) -> list[tuple[Any, ...]]:
    """Run one statement on ``conn`` and return its rows (none for a statement without).

    The one way every statement of the store runs. ``statement`` is a composed SQL file
    (`venturi.store.sqlfiles.statement`); ``prepare`` is psycopg's (None: the
    connection's threshold decides)."""
    cur = statement_cursor(conn)
    cur.execute(statement, params, prepare=prepare)
    return cur.fetchall() if returned_rows(cur) else []


def execute_generic(
    conn: psycopg.Connection[Any], statement: bytes, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """`execute` a prepared ``statement`` with the plan PostgreSQL made for any values
    (``plan_cache_mode = force_generic_plan``, and ``jit = off``, set for its own
    transaction only), for a statement whose plan is as good for any values and costs
    more to make than to run.

    The transaction and the setting travel with the statement in one round trip (a
    pipeline). On a connection that prepares nothing (behind a pooling proxy) every
    statement is planned afresh anyway, and in a caller's transaction the setting would
    outlive the statement: there it runs as `execute` would."""
    idle = conn.info.transaction_status == _IDLE
    if conn.prepare_threshold is None or not conn.autocommit or not idle:
        return execute(conn, statement, params, prepare=True)
    cur = statement_cursor(conn)
    with conn.pipeline():
        conn.execute(_BEGIN)
        conn.execute(_GENERIC_PLAN)
        cur.execute(statement, params, prepare=True)
        conn.execute(_COMMIT)
    return cur.fetchall() if returned_rows(cur) else []


def returned_rows(cur: psycopg.Cursor[Any]) -> bool:
    """Whether ``cur``'s last statement returned rows (zero or more), as a SELECT or
    RETURNING does; `Cursor.description` tells the same but builds a column object per
    column each time it is read, which a claim's 19 columns pay on every call."""
    result = cur.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Raise psycopg errors of a caller's connection as venturi's, never retried: the
    caller's transaction is aborted and only the caller may roll it back."""
    try:
        yield
    except psycopg.Error as exc:
        raise retrying.store_error(exc) from exc


class Lender(Protocol):
    """A source of one outside connection per statement, standing in for a pool (Django's
    test connection, whose transaction the queue must work in): ``connection()`` lends
    it, ``conninfo`` (a string) reaches the same database for side connections."""

    conninfo: str

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


Source = ConnectionPool[Any] | Lender


class Connections:
    """The connections of one database that a store works on, one per statement or short
    transaction. Thread-safe. `close` closes the pool only if venturi opened it."""

    def __init__(
        self,
        source: Source,
        *,
        owned: bool,
        target: Dsn | None = None,
        watch: PrimaryWatch | None = None,
    ) -> None:
        self.source = source
        self.owned = owned
        # Shared with side pools and listeners: a pool whose server turned read-only
        # drops its connections, and every listener LISTENs again (`venturi.store.failover`).
        self.watch = PrimaryWatch() if watch is None else watch
        self._pool = source if isinstance(source, ConnectionPool) else None
        # Built from the pool's own parameters when not given, so side connections (the
        # listener, a worker's side pool) match the pool's, TLS included.
        self.target = target if target is not None else Dsn.parse(_conninfo(source))
        self._generation = _generation
        self._pid = os.getpid()

    @property
    def pool(self) -> ConnectionPool[Any] | None:
        """The psycopg pool, or None for a lender."""
        return self._pool

    @property
    def timeout(self) -> float:
        return self._pool.timeout if self._pool is not None else 0.0

    @property
    def size(self) -> int:
        return self._pool.max_size if self._pool is not None else 1

    def check_process(self) -> None:
        """Raise `ForkedError` in a child of the process that built these connections."""
        if self._generation != _generation:
            raise ForkedError(
                f"this Queue was created in process {self._pid} before os.fork(); create a "
                "new Queue in the child (for gunicorn, in a post_fork hook)"
            )

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection for one statement or transaction. Errors become venturi's
        (`retrying.store_error`): outages, pool exhaustion and other passing failures
        `StoreUnavailable`, a missing table `SchemaError`, any other database error
        `StoreError`. A unique violation stays raw for the store's dedup handling, and
        anything that is not a database error passes as it is."""
        self.check_process()
        pool = self._pool
        return _Lent(self, pool) if pool is not None else self._borrowed()

    @contextmanager
    def _borrowed(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self.source.connection() as conn:
                yield conn
        except BaseException as exc:
            self._raise_mapped(exc)
            raise

    def _raise_mapped(self, exc: BaseException) -> None:
        """Raise venturi's error for ``exc``, met on a checkout, as `connection` says;
        return if ``exc`` stays as it is (the store's own callers read a unique
        violation: a dedup key taken by a racing enqueue)."""
        pool = self._pool
        if isinstance(exc, PoolTimeout):
            raise StoreUnavailable(
                f"no database connection within {self.timeout:g}s "
                f"({redact_dsn(self.target.text)}): {self._why_no_connection()}"
            ) from exc
        if not isinstance(exc, psycopg.Error) or isinstance(exc, errors.UniqueViolation):
            return
        if pool is not None and self.watch.noticed(pool, exc):
            pass  # the server is read-only: every connection was dropped
        elif pool is not None and retrying.outcome_unknown(exc):
            # After a server restart every idle pooled connection is dead, and each
            # would fail one request in turn (a worker backing off between claims
            # would need a minute to get through them); test and replace them now.
            pool.check()
        raise retrying.store_error(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection in an open transaction (commits when the block ends, rolls back if
        it raises)."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def run(
        self,
        statement: bytes,
        params: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        """`execute` ``statement`` on a connection of these (each statement its own
        transaction), or on ``conn``, a caller's, inside its transaction (errors mapped,
        never retried)."""
        if conn is not None:
            self.check_process()
            with mapped_errors():
                return execute(conn, statement, params)
        with self.connection() as own:
            return execute(own, statement, params)

    @contextmanager
    def dedicated(self) -> Iterator[psycopg.Connection[Any]]:
        """An autocommit connection of its own, closed after, for one long statement (a
        VACUUM) that must hold no connection the pool's users wait for. Errors become
        venturi's, as `connection`'s do."""
        self.check_process()
        try:
            with psycopg.connect(self.target.text, **self.keywords(), autocommit=True) as conn:
                yield conn
        except psycopg.Error as exc:
            raise retrying.store_error(exc) from exc

    def keywords(self) -> dict[str, Any]:
        """The pool's connect keywords (less autocommit), resolving callables, so that side
        connections match the pool's."""
        pool = self._pool
        raw = (pool.kwargs() if callable(pool.kwargs) else pool.kwargs) if pool else {}
        return {k: v for k, v in (raw or {}).items() if k != "autocommit"}

    def side(self, pool_size: int, label: str) -> Connections:
        """A pool of ``pool_size`` connections of its own to the same database (the same
        parameters), for work a busy main pool must not starve; closed by its owner."""
        kwargs = self.keywords()
        # Never preparing if the main pool's keywords don't say it may (a caller's pool
        # may lead to a pooler), else only straight to the server.
        prepared: Preparation = False if kwargs.get("prepare_threshold") is None else "auto"
        timeout = self.timeout or DEFAULT_SIDE_TIMEOUT
        pool = new_pool(self.target, kwargs, pool_size, timeout, label, prepared=prepared)
        open_owned(pool)
        return Connections(pool, owned=True, target=self.target, watch=self.watch)

    def _why_no_connection(self) -> str:
        """Why the pool had nothing to give. The pool only logs its connection errors, so
        one direct attempt finds the reason (a refused certificate, a wrong password);
        if that attempt succeeds, the pool's connections were all busy."""
        try:
            # libpq's shortest timeout: the caller has already waited for the pool.
            kwargs = {**self.keywords(), "connect_timeout": 2}
            psycopg.connect(self.target.text, **kwargs).close()
        except psycopg.Error as exc:
            return first_line(exc)
        return f"all {self.size} pooled connections were busy"

    def close(self) -> None:
        """Close the pool if venturi opened it; a borrowed pool (or a lender) is left alone."""
        if self.owned and self._pool is not None:
            self._pool.close()


# A side pool of a store over a lender waits this long for its connection.
DEFAULT_SIDE_TIMEOUT: Final = 10.0


def _conninfo(source: Source) -> str:
    conninfo = source.conninfo
    return str(conninfo() if callable(conninfo) else conninfo)


class _Lent:
    """`Connections.connection` from a pool, as one object: psycopg_pool's connection
    context without its generator and its usage statistics, with the store's error
    mapping. Every statement of the store checks out here. A checkout and return take
    3.9 us of client CPU in a tight loop; with a generator for the error mapping around
    it, 6.3 us, and with the pool's own generator too, more again (and several times
    that between round trips, where the caches are cold). Like psycopg's connection
    context it commits, or on an error rolls back, before the connection goes back; on
    an autocommit connection with no transaction open (the common case) there is nothing
    to end, and psycopg's commit, which finds that out under a lock, is skipped."""

    __slots__ = ("_conn", "_connections", "_pool")

    def __init__(self, connections: Connections, pool: ConnectionPool[Any]) -> None:
        self._connections = connections
        self._pool = pool

    def __enter__(self) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self._pool.getconn()
        except BaseException as exc:
            self._connections._raise_mapped(exc)
            raise
        self._conn = conn
        return conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn = self._conn
        try:
            try:
                if exc is not None or conn.pgconn.transaction_status != _IDLE:
                    conn.__exit__(exc_type, exc, traceback)
            finally:
                self._pool.putconn(conn)
        except BaseException as ending:  # the commit or the rollback failed
            self._connections._raise_mapped(ending)
            raise
        if exc is not None:
            self._connections._raise_mapped(exc)


class LastReturnedFirstPool(ConnectionPool[Any]):
    """psycopg's pool, handing out the connection returned last instead of the one idle
    longest. A single thread enqueueing one job after another then talks to one server
    process: taking turns round two connections cost each enqueue about 15 us of client
    CPU and 25 us of wall time (each process and connection object cold in the caches
    every other time). The others stay in the order they were returned, so the pool's
    shrinking after ``max_idle`` still closes the one idle longest."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        # Called under the pool's lock: the newest connection becomes the first, the
        # one psycopg takes.
        self._pool.rotate(1)
        return super()._get_ready_connection(timeout)


def new_pool(
    target: Dsn,
    kwargs: dict[str, Any],
    size: int,
    timeout: float,
    name: str,
    *,
    min_size: int = 1,
    prepared: Preparation = "auto",
) -> ConnectionPool[Any]:
    """An unopened pool of autocommit connections to ``target``: each statement is its
    own transaction.

    It opens ``min_size`` connections (one by default; a read pool none) and grows on
    demand (a request that finds none idle adds one), so a worker's two users of the
    queue's pool, its dispatcher and its settler, keep it at two whatever the worker's
    concurrency.

    ``prepared``: True lets psycopg prepare a statement on its fifth run, False never;
    "auto" prepares on connections straight to the server and never on one through a
    pooling proxy (`prepare_unless_pooled`)."""
    kwargs = {**kwargs, "autocommit": True}
    if prepared is False:
        kwargs["prepare_threshold"] = None
    else:
        kwargs.setdefault("prepare_threshold", PREPARE_THRESHOLD)
    return LastReturnedFirstPool(
        target.text,
        connection_class=StoreConnection,
        min_size=min(min_size, size),
        max_size=size,
        kwargs=kwargs,
        configure=prepare_unless_pooled if prepared == "auto" else None,
        timeout=timeout,
        reconnect_timeout=RECONNECT_TIMEOUT,
        name=name,
        open=False,
    )


def check_preparation(value: object) -> Preparation:
    """``value`` as a `Preparation`, or `ConfigurationError`."""
    if value is True or value is False or value == "auto":
        return value
    raise ConfigurationError(f'prepared_statements must be True, False or "auto", got {value!r}')


def check_pool_size(value: object) -> int:
    """``value`` as a pool size, or `ConfigurationError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"pool_size must be a positive int, got {value!r}")
    return value


def prepare_unless_pooled(conn: psycopg.Connection[Any]) -> None:
    """A new pooled connection's set-up under ``prepared_statements="auto"``: one that
    leads to a pooling proxy never prepares. Behind a transaction pooler the next
    statement may run on another server connection, where a prepared statement is
    missing or names another query."""
    if leads_to_pooling_proxy(conn):
        conn.prepare_threshold = None


def leads_to_pooling_proxy(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` leads to a pooling proxy rather than the server itself.

    A pooling proxy such as PgBouncer announces a process id of its own instead of the
    server's: it must answer cancel requests itself, since the server connection behind
    a client changes. A direct connection, or a proxy that only forwards bytes, announces
    the server's. Whether the proxy lends server connections per transaction or keeps
    one per client cannot be told for certain from here (a second client lands on
    another server connection only some of the time), so any pooling proxy counts.
    """
    row = conn.execute(sqlfiles.statement("backend_pid")).fetchone()
    assert row is not None
    return int(row[0]) != conn.info.backend_pid


# Pools venturi opened, while they live. On Python 3.13 the garbage collector reaches an
# unclosed pool only after the interpreter has stopped its daemon threads, and the pool's
# __del__ then waits 5 s for each of its threads (20 s and four warnings at exit);
# closing the ones still open at exit, while their threads still run, takes milliseconds.
_OWNED_POOLS: Final[weakref.WeakSet[ConnectionPool[Any]]] = weakref.WeakSet()


def open_owned(pool: ConnectionPool[Any]) -> None:
    """Open a pool venturi owns; it is closed at interpreter exit if nobody closed it."""
    _close_owned_pools_at_exit()
    _OWNED_POOLS.add(pool)
    pool.open(wait=False)


@functools.cache
def _close_owned_pools_at_exit() -> None:
    atexit.register(_close_owned_pools)


def _close_owned_pools() -> None:
    for pool in list(_OWNED_POOLS):
        pool.close()
