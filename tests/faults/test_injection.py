"""The fault harness itself: each injected error class is a genuine server error, and
the thread check reports a worker's dead threads."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import venturi
from tests.faults.injection import ErrorClass, Faults, InjectingStore
from tests.faults.workload import STATEMENT_THREADS, missing_threads, threads_before
from venturi.errors import VenturiError

# What a failing statement may raise: the server's error, or the store's word for it.
FAILURES = (psycopg.Error, VenturiError)


@pytest.fixture
def injecting(database_dsn: str, prefix: str) -> Iterator[InjectingStore]:
    store = InjectingStore.open(database_dsn, prefix, Faults(), pool_size=2)
    yield store
    store.close()


def _server_error(exc: BaseException | None) -> psycopg.Error | None:
    """The psycopg error behind ``exc`` (the store may have wrapped it)."""
    while exc is not None and not isinstance(exc, psycopg.Error):
        exc = exc.__cause__ or exc.__context__
    return exc


@pytest.mark.parametrize("error", list(ErrorClass), ids=lambda e: e.name.lower())
def test_each_error_class_is_raised_by_the_server(
    injecting: InjectingStore, error: ErrorClass
) -> None:
    injecting.faults.arm("probe", error)
    with (
        pytest.raises(FAILURES) as caught,
        injecting.statement("probe"),
        injecting.connection() as conn,
    ):
        conn.execute("SELECT 1")
    raised = _server_error(caught.value)
    assert raised is not None, f"not a server error: {caught.value!r}"
    # A terminated backend says so when the server's goodbye arrives before the hang-up.
    expected = {error.value, None} if error is ErrorClass.TERMINATED else {error.value}
    assert raised.sqlstate in expected, f"{raised.sqlstate}: {raised}"
    assert injecting.faults.fired == ["probe"]


def test_other_statements_and_later_runs_are_left_alone(injecting: InjectingStore) -> None:
    injecting.faults.arm("probe", ErrorClass.STATEMENT_TIMEOUT, times=1)
    assert injecting.reads.stats().kinds == ()
    with pytest.raises(FAILURES), injecting.statement("probe"), injecting.connection() as conn:
        conn.execute("SELECT 1")
    with injecting.statement("probe"), injecting.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert injecting.faults.count == 1


def test_missing_threads_names_the_threads_of_a_stopped_worker(
    database_dsn: str, prefix: str
) -> None:
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
        queue.job("harness.noop")(lambda: None)
        worker = queue.worker(concurrency=2)
        before = threads_before()
        worker.start()
        assert missing_threads(before, 2) == set()
        worker.stop(5)
        assert missing_threads(before, 2) == {
            "venturi-handler-0",
            "venturi-handler-1",
            *STATEMENT_THREADS,
        }
