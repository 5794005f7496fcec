"""What an enqueue raises when the database refuses it (issue 10: one error policy).

An own-pool enqueue retries transient errors (statement and lock timeouts among them)
within a bound and then raises `StoreUnavailable`; a retried insert never duplicates.
On a caller's ``conn=`` nothing is retried behind the caller's back: `StoreUnavailable`
at once, and the caller's rollback leaves nothing written. Permanent errors (the schema
dropped, a privilege revoked) raise a `StoreError` that is not `StoreUnavailable`, at
once and without retrying. No raw psycopg error reaches the caller.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import psycopg
import pytest
from psycopg import sql
from ulid import ULID

import venturi
from tests.faults.injection import TableLock, with_setting
from tests.faults.scenario import Watch
from tests.support import drop_prefix

# The settings under which a held table lock becomes an error, and the error each makes.
SETTINGS: Final = {"statement_timeout": "QueryCanceled", "lock_timeout": "LockNotAvailable"}
# How long an own-pool enqueue may retry (the documented bound, about 10 s) plus slack.
RETRY_BOUND: Final = 20.0
PROMPT: Final = 3.0

Enqueue = Callable[[venturi.Queue, "psycopg.Connection[Any] | None"], list[ULID]]


def _one(queue: venturi.Queue, conn: psycopg.Connection[Any] | None = None) -> list[ULID]:
    return [queue.enqueue("fault.any", {"n": 1}, conn=conn)]


def _many(queue: venturi.Queue, conn: psycopg.Connection[Any] | None = None) -> list[ULID]:
    jobs = [venturi.NewJob("fault.any", {"n": n}) for n in range(3)]
    return queue.enqueue_many(jobs, conn=conn)


ENQUEUES: Final = {"enqueue": _one, "enqueue_many": _many}
EACH_SETTING_AND_ENQUEUE: Final = pytest.mark.parametrize(
    ("setting", "enqueue"),
    [(setting, enqueue) for setting in SETTINGS for enqueue in ENQUEUES.values()],
    ids=[f"{setting}-{name}" for setting in SETTINGS for name in ENQUEUES],
)


@pytest.fixture
def watch(database_dsn: str, shared_prefix: str) -> Iterator[Watch]:
    with venturi.Queue(database_dsn, prefix=shared_prefix) as queue:
        queue.migrate()
    watch = Watch(database_dsn, shared_prefix)
    yield watch
    watch.close()


def _count(watch: Watch) -> int:
    return int(watch.rows(sql.SQL("SELECT count(*) FROM {}").format(watch.jobs))[0][0])


@EACH_SETTING_AND_ENQUEUE
@pytest.mark.timeout(60)
def test_an_own_pool_enqueue_retries_through_a_passing_lock(
    database_dsn: str, shared_prefix: str, watch: Watch, setting: str, enqueue: Enqueue
) -> None:
    """A 1 s table lock under a 50 ms timeout: the enqueue waits it out, written once."""
    with venturi.Queue(with_setting(database_dsn, setting, "50"), prefix=shared_prefix) as queue:
        lock = TableLock(database_dsn, shared_prefix, 1.0)
        ids = enqueue(queue, None)
        lock.join()
    assert watch.count("pending") == _count(watch) == len(ids)


@pytest.mark.slow
@EACH_SETTING_AND_ENQUEUE
@pytest.mark.timeout(120)
def test_an_own_pool_enqueue_gives_up_as_store_unavailable(
    database_dsn: str, shared_prefix: str, watch: Watch, setting: str, enqueue: Enqueue
) -> None:
    """The lock outlasts the retry bound: `StoreUnavailable` from the server's error."""
    with venturi.Queue(with_setting(database_dsn, setting, "50"), prefix=shared_prefix) as queue:
        lock = TableLock(database_dsn, shared_prefix, RETRY_BOUND + 5)
        began = time.monotonic()
        try:
            with pytest.raises(venturi.StoreUnavailable) as caught:
                enqueue(queue, None)
            took = time.monotonic() - began
        finally:
            lock.release()
    assert 1.0 < took < RETRY_BOUND, f"gave up after {took:.1f}s"
    assert type(caught.value.__cause__).__name__ == SETTINGS[setting], repr(caught.value.__cause__)
    assert _count(watch) == 0


@EACH_SETTING_AND_ENQUEUE
@pytest.mark.timeout(60)
def test_an_enqueue_on_the_callers_connection_is_never_retried(
    database_dsn: str, shared_prefix: str, watch: Watch, setting: str, enqueue: Enqueue
) -> None:
    """``conn=``: `StoreUnavailable` at once; after the caller's rollback, nothing."""
    with (
        venturi.Queue(database_dsn, prefix=shared_prefix) as queue,
        psycopg.connect(database_dsn) as conn,
    ):
        conn.execute(sql.SQL("SET {} = 50").format(sql.Identifier(setting)))
        lock = TableLock(database_dsn, shared_prefix, 10.0)
        began = time.monotonic()
        try:
            with pytest.raises(venturi.StoreUnavailable) as caught:
                enqueue(queue, conn)
            took = time.monotonic() - began
            conn.rollback()
        finally:
            lock.release()
    assert took < PROMPT, f"raised after {took:.1f}s: retried behind the caller's back"
    assert type(caught.value.__cause__).__name__ == SETTINGS[setting], repr(caught.value.__cause__)
    assert _count(watch) == 0


def _assert_permanent(queue: venturi.Queue, enqueue: Enqueue) -> None:
    began = time.monotonic()
    with pytest.raises(venturi.StoreError) as caught:
        enqueue(queue, None)
    took = time.monotonic() - began
    assert not isinstance(caught.value, venturi.StoreUnavailable), repr(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.Error), repr(caught.value.__cause__)
    assert took < PROMPT, f"a permanent error was retried for {took:.1f}s"


@pytest.mark.parametrize("enqueue", ENQUEUES.values(), ids=ENQUEUES.keys())
@pytest.mark.timeout(60)
def test_an_enqueue_into_a_dropped_schema_is_a_permanent_error(
    database_dsn: str, shared_prefix: str, watch: Watch, enqueue: Enqueue
) -> None:
    with venturi.Queue(database_dsn, prefix=shared_prefix) as queue:
        drop_prefix(database_dsn, shared_prefix)
        _assert_permanent(queue, enqueue)


@pytest.fixture
def powerless_role(database_dsn: str) -> Iterator[str]:
    """A role without any privilege on the test's tables (dropped afterwards)."""
    role = f"t_powerless_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
    yield role
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("enqueue", ENQUEUES.values(), ids=ENQUEUES.keys())
@pytest.mark.timeout(60)
def test_an_enqueue_without_privilege_is_a_permanent_error(
    database_dsn: str, shared_prefix: str, watch: Watch, powerless_role: str, enqueue: Enqueue
) -> None:
    """The sessions switch to a role that may not insert (``-c role=...``)."""
    dsn = with_setting(database_dsn, "role", powerless_role)
    with venturi.Queue(dsn, prefix=shared_prefix) as queue:
        _assert_permanent(queue, enqueue)
    assert _count(watch) == 0
