"""Claims from floors run with the plan PostgreSQL makes for any values (their custom
plans cost more to make than to run) and are never compiled: ``plan_cache_mode`` and
``jit`` are set for the statement's own transaction only, never left on the connection,
and never inside a caller's transaction or on a connection that prepares nothing."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from venturi.store.connections import execute, execute_generic
from venturi.store.postgres import PostgresStore

MODE = b"SELECT current_setting('plan_cache_mode') || ' ' || current_setting('jit') AS mode"
GENERIC = [("force_generic_plan off",)]


def test_a_statement_runs_with_its_generic_plan_and_the_setting_ends_with_it(
    make_store: Callable[..., PostgresStore], prefix: str
) -> None:
    store = make_store(prefix, pool_size=1)
    with store.connection() as conn:
        before = execute(conn, MODE)
        assert before != GENERIC
        assert execute_generic(conn, MODE, {}) == GENERIC
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert execute(conn, MODE) == before


def test_a_failed_statement_leaves_the_connection_as_it_was(
    make_store: Callable[..., PostgresStore], prefix: str
) -> None:
    store = make_store(prefix, pool_size=1)
    with store.connection() as conn:
        before = execute(conn, MODE)
        with pytest.raises(psycopg.errors.DivisionByZero):
            execute_generic(conn, b"SELECT 1 / 0", {})
    with store.connection() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert execute(conn, MODE) == before


def test_in_a_callers_transaction_the_setting_is_left_alone(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.prepare_threshold = 0
        before = execute(conn, MODE)  # the caller's transaction is open
        assert execute_generic(conn, MODE, {}) == before != GENERIC
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def test_a_connection_that_prepares_nothing_runs_it_as_it_is(database_dsn: str) -> None:
    with psycopg.connect(database_dsn, autocommit=True, prepare_threshold=None) as conn:
        assert execute_generic(conn, MODE, {}) == execute(conn, MODE) != GENERIC
