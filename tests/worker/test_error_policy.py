"""The error policy (venturi.store.retrying) on real server errors, the retry helper and
the supervisor that restarts worker threads (its pure parts: tests/unit)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from venturi.errors import SchemaError, StoreError, StoreUnavailable, WorkerFailed
from venturi.store import retrying
from venturi.store.retrying import ErrorClass, RetryDelays, classify, retry, store_error
from venturi.worker import supervision


@pytest.fixture
def conn(database_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_dsn, autocommit=True) as connection:
        yield connection


def _error_of(conn: psycopg.Connection[Any], *statements: str) -> psycopg.Error:
    """The error the server raises for the last of ``statements``."""
    *setup, failing = statements
    for statement in setup:
        conn.execute(statement.encode())
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(failing.encode())
    return caught.value


def _raised(state: str) -> str:
    return f"DO $$ BEGIN RAISE EXCEPTION 'staged' USING ERRCODE = '{state}'; END $$"


SERVER_ERRORS: dict[str, tuple[tuple[str, ...], ErrorClass, type[StoreError]]] = {
    "statement timeout": (
        ("SET statement_timeout = 20", "SELECT pg_sleep(2)"),
        ErrorClass.TRANSIENT,
        StoreUnavailable,
    ),
    "deadlock": ((_raised("40P01"),), ErrorClass.TRANSIENT, StoreUnavailable),
    "serialization": ((_raised("40001"),), ErrorClass.TRANSIENT, StoreUnavailable),
    "lock not available": ((_raised("55P03"),), ErrorClass.TRANSIENT, StoreUnavailable),
    "too many connections": ((_raised("53300"),), ErrorClass.TRANSIENT, StoreUnavailable),
    "read-only standby": (
        ("SET default_transaction_read_only = on", "CREATE TEMP TABLE t_ro (x int)"),
        ErrorClass.TRANSIENT,
        StoreUnavailable,
    ),
    "missing table": (("SELECT * FROM venturi_no_such_table",), ErrorClass.FATAL, SchemaError),
    "permission": ((_raised("42501"),), ErrorClass.FATAL, StoreError),
    "division by zero": (("SELECT 1 / 0",), ErrorClass.STATEMENT, StoreError),
    "check violation": ((_raised("23514"),), ErrorClass.STATEMENT, StoreError),
}


@pytest.mark.parametrize("case", sorted(SERVER_ERRORS))
def test_server_errors_are_classified_and_mapped(conn: psycopg.Connection[Any], case: str) -> None:
    statements, expected_class, expected_type = SERVER_ERRORS[case]
    error = _error_of(conn, *statements)
    assert classify(error) is expected_class
    mapped = store_error(error)
    assert type(mapped) is expected_type, mapped
    assert error.sqlstate is not None and error.sqlstate in str(mapped)
    mapped.__cause__ = error
    assert classify(mapped) is expected_class
    assert not retrying.outcome_unknown(error)  # the server answered: nothing committed


def test_a_terminated_backend_is_transient_and_its_outcome_unknown(database_dsn: str) -> None:
    with (
        psycopg.connect(database_dsn, autocommit=True) as victim,
        psycopg.connect(database_dsn, autocommit=True) as killer,
    ):
        killer.execute("SELECT pg_terminate_backend(%s)", [victim.info.backend_pid])
        with pytest.raises(psycopg.OperationalError) as caught:
            victim.execute("SELECT 1")
    assert classify(caught.value) is ErrorClass.TRANSIENT
    assert retrying.outcome_unknown(caught.value)
    assert isinstance(store_error(caught.value), StoreUnavailable)


def _failing(conn: psycopg.Connection[Any], times: int, *statements: str) -> Callable[[], int]:
    calls = 0

    def operation() -> int:
        nonlocal calls
        calls += 1
        if calls <= times:
            raise _error_of(conn, *statements)
        return calls

    return operation


FAST = RetryDelays(base=0.001, cap=0.01)
LOG = __import__("logging").getLogger("venturi.test")


def test_retry_passes_transient_errors(conn: psycopg.Connection[Any]) -> None:
    operation = _failing(conn, 3, _raised("40P01"))
    assert retry(operation, what="op", logger=LOG, backoff=FAST) == 4


def test_retry_gives_up_at_once_on_other_errors(conn: psycopg.Connection[Any]) -> None:
    for statement in ("SELECT * FROM venturi_no_such_table", "SELECT 1 / 0"):
        operation = _failing(conn, 1, statement)
        with pytest.raises(psycopg.Error):
            retry(operation, what="op", logger=LOG, backoff=FAST)
        assert operation() == 2  # it was called once before


def test_retry_stops_at_its_deadline_and_when_told(conn: psycopg.Connection[Any]) -> None:
    operation = _failing(conn, 10**6, _raised("55P03"))
    started = time.monotonic()
    with pytest.raises(psycopg.errors.LockNotAvailable):
        retry(operation, what="op", logger=LOG, backoff=FAST, deadline=started + 0.3)
    assert time.monotonic() - started < 5
    stop = threading.Event()
    stop.set()
    with pytest.raises(psycopg.errors.LockNotAvailable):
        retry(operation, what="op", logger=LOG, backoff=FAST, stop=stop)


def test_retry_does_not_repeat_a_write_whose_outcome_is_unknown(database_dsn: str) -> None:
    calls = 0

    def operation() -> None:
        nonlocal calls
        calls += 1
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(psycopg.OperationalError):
        retry(operation, what="op", logger=LOG, backoff=FAST, retry_unknown_outcome=False)
    assert calls == 1


# -- the supervisor -------------------------------------------------------------------


@pytest.fixture
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervision, "_RESTART_BACKOFF", RetryDelays(base=0.001, cap=0.001))


class Recorder:
    def __init__(self) -> None:
        self.failures: list[BaseException] = []
        self.restarts: list[str] = []


def _supervise(body: Callable[[], object]) -> tuple[threading.Thread, Recorder]:
    seen = Recorder()
    supervisor = supervision.Supervisor(
        seen.failures.append, seen.restarts.append, threading.Event()
    )
    thread = supervisor.thread("venturi-test", body)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert supervisor.dead() == ["venturi-test"]
    return thread, seen


@pytest.mark.usefixtures("quick_restarts")
def test_a_thread_that_raises_is_restarted() -> None:
    runs = 0

    def body() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError("boom")

    _, seen = _supervise(body)
    assert runs == 3
    assert seen.restarts == ["venturi-test", "venturi-test"]
    assert seen.failures == []


@pytest.mark.usefixtures("quick_restarts")
def test_a_thread_that_keeps_failing_fails_the_worker() -> None:
    runs = 0

    def body() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("boom")

    _, seen = _supervise(body)
    assert runs == supervision.RESTART_LIMIT + 1
    [failure] = seen.failures
    assert isinstance(failure, WorkerFailed) and isinstance(failure.__cause__, RuntimeError)


def test_a_fatal_database_error_fails_the_worker_at_once(
    conn: psycopg.Connection[Any],
) -> None:
    error = _error_of(conn, "SELECT * FROM venturi_no_such_table")

    def body() -> None:
        raise store_error(error) from error

    _, seen = _supervise(body)
    assert seen.restarts == []
    [failure] = seen.failures
    assert isinstance(failure, SchemaError)


def test_all_running_only_once_every_thread_started_and_while_none_ended() -> None:
    supervisor = supervision.Supervisor(lambda exc: None, lambda name: None, threading.Event())
    assert not supervisor.all_running()  # no threads yet
    release = threading.Event()
    first = supervisor.thread("venturi-first", release.wait)
    second = supervisor.thread("venturi-second", release.wait)
    first.start()
    assert not supervisor.all_running()  # the second is built but not started
    second.start()
    assert supervisor.all_running()
    release.set()
    first.join(30)
    second.join(30)
    assert not supervisor.all_running()
