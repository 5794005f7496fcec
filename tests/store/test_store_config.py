"""The store's pool: its own (sized by pool_size, closed by close()) or a caller's (never
closed by venturi); an unreachable database raises StoreUnavailable."""

from __future__ import annotations

import socket

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from tests.support import wait_until
from venturi.errors import StoreError, StoreUnavailable
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


def test_pool_size_caps_the_pool(database_dsn: str, prefix: str) -> None:
    store = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=3)
    try:
        assert store.pool.max_size == 3
        assert store.owns_pool
    finally:
        store.close()
    assert store.pool.closed


def test_the_pool_lends_the_connection_returned_last(database_dsn: str, prefix: str) -> None:
    """One thread's statements one after another run on one server process, however many
    connections the pool holds; the others keep the order they were returned in."""
    store = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=4)
    try:
        store.migrate()
        pool = store.pool
        first, second, third = pool.getconn(), pool.getconn(), pool.getconn()
        for conn in (first, second, third):
            pool.putconn(conn)
        pids = set()
        for _ in range(20):
            store.enqueue(NewJob("k"))
            with store.connections.connection() as conn:
                pids.add(conn.info.backend_pid)
        assert pids == {third.info.backend_pid}
        taken = [pool.getconn() for _ in range(3)]
        assert taken == [third, second, first]
        for conn in taken:
            pool.putconn(conn)
    finally:
        store.close()


def test_a_checkout_ends_what_its_user_left_open_and_maps_database_errors(
    database_dsn: str, prefix: str
) -> None:
    """A transaction left open in a checkout commits when the block ends and rolls back
    when it raises; a database error leaves as venturi's, anything else as it is, and
    every connection goes back to the pool idle."""
    store = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=1)
    committed, rolled_back = f"{prefix}_committed", f"{prefix}_rolled_back"

    def tables() -> set[str]:
        with psycopg.connect(database_dsn) as conn:
            rows = conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename = ANY(%s)",
                ([committed, rolled_back],),
            ).fetchall()
        return {name for (name,) in rows}

    try:
        with store.connections.connection() as conn:
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {committed} ()")
        with (
            pytest.raises(RuntimeError, match="the user's own"),
            store.connections.connection() as conn,
        ):
            conn.execute("BEGIN")
            conn.execute(f"CREATE TABLE {rolled_back} ()")
            raise RuntimeError("the user's own")
        with pytest.raises(StoreError) as raised, store.connections.connection() as conn:
            conn.execute("SELECT 1 / 0")
        assert isinstance(raised.value.__cause__, psycopg.errors.DivisionByZero)
        assert tables() == {committed}
        with store.connections.connection() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.pool.get_stats()["pool_available"] == 1
    finally:
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {committed}, {rolled_back}")
        store.close()


def test_a_borrowed_pool_works_and_is_never_closed(database_dsn: str, prefix: str) -> None:
    with ConnectionPool(database_dsn, min_size=1, max_size=2, open=True) as pool:
        store = PostgresStore.from_pool(pool, Prefix(prefix))
        assert store.migrate()
        job_id = store.enqueue(NewJob("k", dedup_key="d"))
        assert store.enqueue(NewJob("k", dedup_key="d")) == job_id
        [job] = store.claim("w", {"k": 30}, 1)
        assert store.settle(Claim.of(job), Settlement.complete())
        notifier = store.notifier()
        try:
            notifier.connect()
            store.enqueue(NewJob("k"))
            assert wait_until(lambda: notifier.wait(1), timeout=10, what="the notification")
        finally:
            notifier.close()
        store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_database_raises_store_unavailable_without_the_password() -> None:
    dsn = f"postgresql://venturi:s3cret-pw@127.0.0.1:{_closed_port()}/nowhere?connect_timeout=1"
    store = PostgresStore.from_dsn(dsn, Prefix("unreachable"), pool_size=1, pool_timeout=0.5)
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.enqueue(NewJob("k"))
        assert "s3cret-pw" not in str(info.value)
        assert "0.5s" in str(info.value)
        with pytest.raises(StoreUnavailable):
            store.migrate()
    finally:
        store.close()


def test_operational_errors_that_are_not_outages_surface_as_they_are(
    store: PostgresStore,
) -> None:
    """A lock timeout is the caller's to see, not a "database unavailable"."""
    with (
        psycopg.connect(store.connections.target.text, autocommit=True) as holder,
        holder.transaction(),
    ):
        holder.execute(f"LOCK TABLE {store.prefix.jobs} IN ACCESS EXCLUSIVE MODE")
        with store.connection() as conn, pytest.raises(psycopg.errors.LockNotAvailable):
            conn.execute("SET lock_timeout = '50ms'")
            conn.execute(f"SELECT 1 FROM {store.prefix.jobs}")
