"""The store's plumbing: running one statement, a new pool (preparing statements only
on connections straight to the server), errors of a caller's connection, and waiting out
a row another session holds locked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal, TypeVar

import psycopg
from psycopg import pq, sql
from psycopg.rows import tuple_row
from psycopg.types.json import JsonbLoader, JsonLoader
from psycopg_pool import ConnectionPool

from venturi.errors import ConfigurationError
from venturi.settlements import Busy
from venturi.store import retrying, sqlfiles

JSONB_OID: Final = psycopg.postgres.types["jsonb"].oid
# psycopg's own default: a statement is prepared on its fifth run on a connection.
PREPARE_THRESHOLD: Final = 5

# Whether a pool's connections prepare statements: always, never, or "auto" (only those
# straight to the server).
Preparation = bool | Literal["auto"]

T = TypeVar("T")

# psycopg_pool retries a failed connection with a doubling, uncapped delay until this
# many seconds pass, so after a long outage its next attempt could come minutes after
# the server is back. Giving up sooner lets the next request start a fresh attempt at
# once: workers resume within seconds of the database, whatever the outage's length.
RECONNECT_TIMEOUT: Final = 10.0
BUSY_BACKOFF: Final = retrying.RetryDelays(base=0.01, cap=0.5)


def while_busy(step: Callable[[], T | Busy]) -> T:
    """Run ``step`` until the row it settles is free, as a one-row UPDATE would wait for
    it (the statements themselves skip locked rows, so they never deadlock)."""
    failures = 0
    while True:
        result = step()
        if not isinstance(result, Busy):
            return result
        failures += 1
        time.sleep(BUSY_BACKOFF.delay(failures))


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Raise psycopg errors of a caller's connection as venturi's, never retried: the
    caller's transaction is aborted and only the caller may roll it back."""
    try:
        yield
    except psycopg.Error as exc:
        raise retrying.store_error(exc) from exc


class StoreConnection(psycopg.Connection[Any]):
    """A connection of a pool the store opened (`new_pool`) or of its listener, which
    keeps one tuple-row cursor for the store's statements (`statement_cursor`).

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
    keeps, else a new one (a caller's connection, or one of a pool the caller made).
    Never closed by its user: a client-side cursor holds no server resource."""
    if isinstance(conn, StoreConnection):
        return conn.statement_cursor()
    return conn.cursor(row_factory=tuple_row)


def new_pool(
    conninfo: str,
    kwargs: dict[str, Any],
    size: int,
    timeout: float,
    name: str,
    *,
    min_size: int = 1,
    prepared: Preparation = "auto",
) -> ConnectionPool[Any]:
    """An unopened pool of autocommit connections: each statement is its own transaction.

    It opens ``min_size`` connections (one by default; a read pool none) and grows on
    demand (a request that finds none idle adds one), so a worker's two users of the
    queue's pool, its dispatcher and its completer, keep it at two whatever the worker's
    concurrency.

    ``prepared``: True lets psycopg prepare a statement on its fifth run, False never;
    "auto" prepares on connections straight to the server and never on one through a
    pooling proxy (`prepare_unless_pooled`)."""
    kwargs = {**kwargs, "autocommit": True}
    if prepared is False:
        kwargs["prepare_threshold"] = None
    else:
        kwargs.setdefault("prepare_threshold", PREPARE_THRESHOLD)
    return ConnectionPool(
        conninfo,
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
    row = conn.execute(sqlfiles.text("backend_pid")).fetchone()
    assert row is not None
    return int(row[0]) != conn.info.backend_pid


def check_batch(batch: object, operation: str) -> None:
    # A batch of 0 changes nothing yet never comes back "short": the loop would not end.
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigurationError(f"{operation} batch must be a positive int, got {batch!r}")


def run_statement(
    conn: psycopg.Connection[Any],
    query: sql.Composed | bytes,
    params: dict[str, Any] | None = None,
    prepare: bool | None = None,
) -> list[tuple[Any, ...]]:
    """Run one statement. Pool connections autocommit, or (a borrowed pool's) commit when
    `ConnectionPool.connection` returns them, so each statement is its own transaction.
    ``prepare`` is psycopg's: None lets the connection's threshold decide.

    JSON columns come back decoded even on a connection that loads them as text: Django's
    own, which `venturi.contrib.django.testing` lends the store as its pool."""
    cur = statement_cursor(conn)
    if conn.adapters.get_loader(JSONB_OID, pq.Format.TEXT) is not JsonbLoader:
        cur.adapters.register_loader("jsonb", JsonbLoader)
        cur.adapters.register_loader("json", JsonLoader)
    cur.execute(query, params, prepare=prepare)
    return cur.fetchall() if returned_rows(cur) else []


def returned_rows(cur: psycopg.Cursor[Any]) -> bool:
    """Whether ``cur``'s last statement returned rows (zero or more), as a SELECT or
    RETURNING does; `Cursor.description` tells the same but builds a column object per
    column each time it is read, which a claim's 19 columns pay on every call."""
    result = cur.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK


def run_prepared(
    conn: psycopg.Connection[Any], query: sql.Composed | bytes, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """Run one statement as a server-side prepared statement (planned once per
    connection) on an autocommit connection straight to the server, never one behind a
    transaction-pooling proxy. Errors become venturi's (`mapped_errors`)."""
    with mapped_errors():
        return run_statement(conn, query, params, prepare=True)


def run_read(
    conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """`run_statement` on a caller's connection, inside its transaction, with JSON read as
    venturi reads it: the caller may load it otherwise (Django loads jsonb as text)."""
    with mapped_errors(), conn.cursor(row_factory=tuple_row) as cur:
        cur.adapters.register_loader("json", JsonLoader)
        cur.adapters.register_loader("jsonb", JsonbLoader)
        cur.execute(query, params)
        return cur.fetchall() if returned_rows(cur) else []
