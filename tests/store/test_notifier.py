"""The notifier: a dedicated LISTEN connection (never from the pool) built from the pool's
own connection parameters; wait/wake/close; reconnects after losing its connection."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.support import wait_until
from venturi.models import NewJob
from venturi.store import sqlfiles
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore


@pytest.fixture
def notifier(store: PostgresStore) -> Iterator[PostgresNotifier]:
    instance = store.notifier()
    instance.connect()
    yield instance
    instance.close()


def test_wait_times_out_quietly_with_nothing_sent(notifier: PostgresNotifier) -> None:
    started = time.monotonic()
    assert notifier.wait(0.2) is False
    assert time.monotonic() - started >= 0.19


def test_an_enqueue_wakes_a_waiter_promptly(
    store: PostgresStore, notifier: PostgresNotifier
) -> None:
    woke: list[float] = []

    def waiter() -> None:
        if notifier.wait(30):
            woke.append(time.monotonic())

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_until(thread.is_alive, what="the waiter to start")
    sent = time.monotonic()
    store.enqueue(NewJob("k"))
    thread.join(30)
    assert woke, "the waiter never woke"
    print(f"notifier woke {1000 * (woke[0] - sent):.1f} ms after the enqueue")
    assert notifier.wait(0) is False, "one enqueue, one wakeup"


def test_wake_interrupts_a_wait_from_another_thread(notifier: PostgresNotifier) -> None:
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(notifier.wait(60)))
    started = time.monotonic()
    thread.start()
    notifier.wake()
    thread.join(10)
    assert results == [False]
    assert time.monotonic() - started < 10


def test_close_ends_waiting(notifier: PostgresNotifier) -> None:
    notifier.close()
    assert notifier.wait(5) is False
    assert notifier.connected is False
    notifier.close()  # idempotent


def test_after_close_its_old_descriptors_are_never_touched(notifier: PostgresNotifier) -> None:
    # Once closed, the wake pipe's descriptor numbers are free and the next file or socket
    # opened gets them; a late wake() or a second close() must not write to or close it.
    notifier.close()
    read_fd, write_fd = os.pipe()
    try:
        notifier.wake()
        notifier.close()
        os.fstat(read_fd), os.fstat(write_fd)  # still open
        ready, _, _ = select.select([read_fd], [], [], 0)
        assert ready == [], "wake() after close() wrote into an unrelated descriptor"
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_close_from_another_thread_ends_a_wait_and_releases_the_connection(
    notifier: PostgresNotifier, database_dsn: str
) -> None:
    pid = notifier.backend_pid()
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(notifier.wait(60)))
    thread.start()
    wait_until(thread.is_alive, timeout=10, what="the waiting thread to start")
    notifier.close()
    thread.join(10)
    assert results == [False]
    assert not notifier.connected
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        wait_until(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                == (0,)
            ),
            timeout=10,
            what="the LISTEN connection to close",
        )


def test_it_reconnects_after_losing_its_connection(
    store: PostgresStore, notifier: PostgresNotifier, database_dsn: str
) -> None:
    pid = notifier.backend_pid()
    assert pid is not None
    with psycopg.connect(database_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # True after reconnecting: a notification may have been missed meanwhile.
    assert wait_until(lambda: notifier.wait(1), timeout=30, what="the notifier to reconnect")
    assert notifier.reconnects >= 1
    assert notifier.backend_pid() not in (None, pid)
    store.enqueue(NewJob("k"))
    assert wait_until(lambda: notifier.wait(1), timeout=10, what="a notification after reconnect")


def test_it_uses_the_pools_connection_parameters_but_not_a_pool_connection(
    store: PostgresStore, database_dsn: str
) -> None:
    name = f"venturi-notifier-{store.prefix.name}"[:63]
    sep = "&" if "?" in database_dsn else "?"
    tagged = PostgresStore.from_dsn(
        f"{database_dsn}{sep}application_name={name}", store.prefix, pool_size=1, pool_timeout=2
    )
    notifier = tagged.notifier()
    try:
        notifier.connect()
        with psycopg.connect(database_dsn, autocommit=True) as admin:
            row = admin.execute(
                "SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                (notifier.backend_pid(),),
            ).fetchone()
        assert row == (name,)
        # The pool's only connection is still free: the listener is not one of them.
        with tagged.connection() as conn:
            assert conn.info.backend_pid != notifier.backend_pid()
        tagged.enqueue(NewJob("k"))
        assert wait_until(lambda: notifier.wait(1), timeout=10, what="the notification")
    finally:
        notifier.close()
        tagged.close()


def test_stop_listening_unlistens_closes_and_leaves_wait_a_sleep(
    store: PostgresStore, notifier: PostgresNotifier, database_dsn: str
) -> None:
    pid = notifier.backend_pid()
    notifier.stop_listening()
    assert notifier.polling and not notifier.connected and notifier.backend_pid() is None
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
        wait_until(
            lambda: conn.execute(query, [pid]).fetchone() == (0,),
            what="the listener's server process to end",
        )
    store.enqueue(NewJob("k"))
    started = time.monotonic()
    assert notifier.wait(0.2) is False, "a notification reached a notifier that stopped"
    assert time.monotonic() - started >= 0.19
    notifier.connect()  # never listens again
    assert not notifier.connected
    thread = threading.Thread(target=lambda: notifier.wait(60))
    thread.start()
    notifier.wake()
    thread.join(5)
    assert not thread.is_alive(), "wake did not end a polling wait"


def _notify_on(conn: psycopg.Connection[object], store: PostgresStore) -> None:
    """A NOTIFY on the listener's own connection: its answer carries the notification."""
    conn.execute(sqlfiles.query("notify", store.prefix), {"payload": "own"})


def test_a_claim_on_the_borrowed_connection_is_prepared_and_misses_no_notification(
    store: PostgresStore, notifier: PostgresNotifier
) -> None:
    store.enqueue(NewJob("k"))
    assert notifier.wait(30) is True, "the enqueue's notification"
    with notifier.borrowed() as conn:
        assert conn is not None, "just answered: lent"
        assert conn.info.backend_pid == notifier.backend_pid()
        [job] = store.claim("w", {"k": 60.0}, 5, conn=conn)
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared is not None and prepared[0] == 1, "the claim is a prepared statement"
        _notify_on(conn, store)  # arrives during the borrow
    assert store.reads.get(job.id) is not None and job.status == "claimed"
    assert notifier.wait(0) is True, "the notification that came during the borrow"
    assert notifier.wait(0) is False


def test_only_the_first_statement_after_a_notification_borrows(
    store: PostgresStore, notifier: PostgresNotifier
) -> None:
    # A connection cut off silently never answers, and a statement on it would block
    # its caller: only one that just delivered a notification is lent, and only once.
    assert notifier.wait(0) is False
    with notifier.borrowed() as conn:
        assert conn is None, "lent with no notification"
    store.notify("wake")
    assert notifier.wait(30) is True
    with notifier.borrowed() as conn:
        assert conn is not None
    with notifier.borrowed() as again:
        assert again is None, "lent twice for one notification"


def test_a_polling_notifier_lends_nothing(store: PostgresStore, notifier: PostgresNotifier) -> None:
    store.notify("wake")
    assert notifier.wait(30) is True
    notifier.stop_listening()
    with notifier.borrowed() as conn:
        assert conn is None


def test_close_during_a_borrow_closes_the_connection_after_it(
    store: PostgresStore, notifier: PostgresNotifier
) -> None:
    store.notify("wake")
    assert notifier.wait(30) is True
    with notifier.borrowed() as conn:
        assert conn is not None
        notifier.close()
        assert not conn.closed, "closed under the borrower's feet"
        conn.execute("SELECT 1")
    assert conn.closed
    with notifier.borrowed() as again:
        assert again is None
