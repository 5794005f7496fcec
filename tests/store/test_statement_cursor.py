"""The store's own connections keep one cursor for its statements (psycopg's dumpers and
loaders found once per connection, not once per statement); a caller's connection, or
one of a pool the caller made, gets a new cursor for each."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from venturi.errors import StoreError
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store.connections import StoreConnection, execute, statement_cursor
from venturi.store.postgres import PostgresStore


def _last_column(cursor: psycopg.Cursor[tuple[object, ...]]) -> str:
    result = cursor.pgresult
    assert result is not None
    return (result.fname(0) or b"").decode()


def test_an_enqueue_runs_on_the_cursor_its_pooled_connection_keeps(
    make_store: Callable[..., PostgresStore], prefix: str
) -> None:
    store = make_store(prefix, pool_size=1)
    store.migrate()
    with store.connection() as conn:
        assert isinstance(conn, StoreConnection)
        kept = statement_cursor(conn)
        assert statement_cursor(conn) is kept
        execute(conn, b"SELECT 1 AS before_enqueue")
    assert _last_column(kept) == "before_enqueue"

    store.enqueue(NewJob("k", {"n": 1}))

    with store.connection() as conn:
        assert statement_cursor(conn) is kept
    # The enqueue's own statement (INSERT ... SELECT pg_notify) was the cursor's last.
    assert _last_column(kept) == "pg_notify"
    assert store.reads.stats().total("pending") == 1


def test_a_failed_statement_leaves_the_kept_cursor_usable(
    make_store: Callable[..., PostgresStore], prefix: str
) -> None:
    store = make_store(prefix, pool_size=1)
    store.migrate()
    with pytest.raises(StoreError), store.connection() as conn:
        kept = statement_cursor(conn)
        execute(conn, b"SELECT 1 / 0")
    store.enqueue(NewJob("k", {"n": 1}))
    with store.connection() as conn:
        assert statement_cursor(conn) is kept
        assert execute(conn, b"SELECT 2") == [(2,)]
    assert store.reads.stats().total("pending") == 1


def test_a_callers_connection_gets_a_new_cursor_for_each_statement(
    database_dsn: str, store: PostgresStore
) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        first = statement_cursor(conn)
        assert statement_cursor(conn) is not first
        assert not hasattr(conn, "statement_cursor")
        job_id = store.enqueue(NewJob("k", {"n": 1}), conn=conn)
    job = store.reads.get(job_id)
    assert job is not None
    assert job.payload == {"n": 1}


def test_a_callers_pool_serves_the_store_with_plain_connections(
    database_dsn: str, prefix: str
) -> None:
    with ConnectionPool(database_dsn, min_size=1, max_size=1, open=True) as pool:
        store = PostgresStore.from_pool(pool, Prefix(prefix))
        store.migrate()
        store.enqueue(NewJob("k", {"n": 1}))
        with store.connection() as conn:
            assert not isinstance(conn, StoreConnection)
        assert store.reads.stats().total("pending") == 1
        store.close()


def test_the_listeners_connection_keeps_a_cursor_for_the_claim_it_lends(
    store: PostgresStore,
) -> None:
    notifier = store.notifier()
    try:
        notifier.connect()
        store.enqueue(NewJob("k", {"n": 1}))
        assert notifier.wait(10)
        with notifier.borrowed() as conn:
            assert isinstance(conn, StoreConnection)
            [job] = store.claim("w", {"k": 30}, 1, conn=conn)
            kept = statement_cursor(conn)
        assert _last_column(kept) == "id"
        assert job.kind == "k"
    finally:
        notifier.close()
