"""The store's plumbing: running one statement, a new pool, errors of a caller's
connection, and waiting out a row another session holds locked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import psycopg
from psycopg import pq, sql
from psycopg.rows import tuple_row
from psycopg.types.json import JsonbLoader, JsonLoader
from psycopg_pool import ConnectionPool

from venturi.errors import ConfigurationError
from venturi.settlements import Busy
from venturi.store import retrying

JSONB_OID: Final = psycopg.postgres.types["jsonb"].oid

T = TypeVar("T")

# psycopg_pool retries a failed connection with a doubling, uncapped delay until this
# many seconds pass, so after a long outage its next attempt could come minutes after
# the server is back. Giving up sooner lets the next request start a fresh attempt at
# once: workers resume within seconds of the database, whatever the outage's length.
RECONNECT_TIMEOUT: Final = 10.0
BUSY_BACKOFF: Final = retrying.Backoff(base=0.01, cap=0.5)


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


def new_pool(
    conninfo: str,
    kwargs: dict[str, Any],
    size: int,
    timeout: float,
    name: str,
    *,
    min_size: int = 1,
) -> ConnectionPool[Any]:
    """An unopened pool of autocommit connections: each statement is its own transaction.

    It opens ``min_size`` connections (one by default; a read pool none) and grows on
    demand (a request that finds none idle adds one), so a worker's two users of the
    queue's pool, its dispatcher and its completer, keep it at two whatever the worker's
    concurrency."""
    return ConnectionPool(
        conninfo,
        min_size=min(min_size, size),
        max_size=size,
        kwargs={**kwargs, "autocommit": True},
        timeout=timeout,
        reconnect_timeout=RECONNECT_TIMEOUT,
        name=name,
        open=False,
    )


def check_batch(batch: object, operation: str) -> None:
    # A batch of 0 changes nothing yet never comes back "short": the loop would not end.
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigurationError(f"{operation} batch must be a positive int, got {batch!r}")


def run_statement(
    conn: psycopg.Connection[Any],
    query: sql.Composed | bytes,
    params: dict[str, Any] | None = None,
) -> list[tuple[Any, ...]]:
    """Run one statement. Pool connections autocommit, or (a borrowed pool's) commit when
    `ConnectionPool.connection` returns them, so each statement is its own transaction.

    JSON columns come back decoded even on a connection that loads them as text: Django's
    own, which `venturi.contrib.django.testing` lends the store as its pool."""
    with conn.cursor(row_factory=tuple_row) as cur:
        if conn.adapters.get_loader(JSONB_OID, pq.Format.TEXT) is not JsonbLoader:
            cur.adapters.register_loader("jsonb", JsonbLoader)
            cur.adapters.register_loader("json", JsonLoader)
        cur.execute(query, params)
        return cur.fetchall() if cur.description else []


def run_prepared(
    conn: psycopg.Connection[Any], query: sql.Composed | bytes, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """Run one statement as a server-side prepared statement (planned once per
    connection) on an autocommit connection straight to the server, never one behind a
    transaction-pooling proxy. Errors become venturi's (`mapped_errors`)."""
    with mapped_errors(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(query, params, prepare=True)
        return cur.fetchall() if cur.description else []


def run_read(
    conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """`run_statement` on a caller's connection, inside its transaction, with JSON read as
    venturi reads it: the caller may load it otherwise (Django loads jsonb as text)."""
    with mapped_errors(), conn.cursor(row_factory=tuple_row) as cur:
        cur.adapters.register_loader("json", JsonLoader)
        cur.adapters.register_loader("jsonb", JsonbLoader)
        cur.execute(query, params)
        return cur.fetchall() if cur.description else []
