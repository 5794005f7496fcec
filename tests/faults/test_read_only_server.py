"""A server that turns read-only under a running queue (a primary demoted in place, with
no other host to go to): the listener notices at its next ping and LISTENs again, and the
store refuses writes with `StoreUnavailable` while the server stays read-only (it drops
its pool's connections to look for a writable host, no more than once a second), then
works again once the server takes writes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import venturi
import venturi.store.notifier
from tests.faults.server import ThrowawayServer
from tests.support import wait_until
from venturi.store.failover import DROP_INTERVAL
from venturi.store.notifier import PostgresNotifier


@pytest.fixture
def admin(own_server: ThrowawayServer) -> Iterator[psycopg.Connection[Any]]:
    """A session of the private server that makes it read-only (`read_only`); the server
    takes writes again on the way out."""
    with psycopg.connect(own_server.dsn, autocommit=True) as conn:
        try:
            yield conn
        finally:
            read_only(conn, False)


def read_only(conn: psycopg.Connection[Any], on: bool) -> None:
    """Makes the server read-only (or writable again) and returns once it has taken the
    setting: `pg_reload_conf()` only asks the postmaster to reload, and a session it has
    not yet signalled would still take a write. A new session sees the postmaster's own
    settings, and the postmaster signals every session before it accepts another."""
    if on:
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
    else:
        conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
    conn.execute("SELECT pg_reload_conf()")
    wanted = "on" if on else "off"

    def taken() -> bool:
        with psycopg.connect(conn.info.dsn, autocommit=True) as fresh:
            row = fresh.execute("SHOW default_transaction_read_only").fetchone()
        return row is not None and row[0] == wanted

    wait_until(taken, 30, 0.01, "the server to take the setting")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_listener_leaves_a_server_that_turned_read_only(
    own_server: ThrowawayServer,
    own_prefix: str,
    admin: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(venturi.store.notifier, "PING_INTERVAL", 0.2)
    caplog.set_level(logging.INFO, logger="venturi.notifier")
    with venturi.Queue(own_server.dsn, prefix=own_prefix) as queue:
        notifier = queue.store.notifier()
        assert isinstance(notifier, PostgresNotifier)
        notifier.connect()
        first = notifier.backend_pid()
        read_only(admin, True)
        # Nothing else touches the store: only the listener's own ping can tell.
        wait_until(lambda: notifier.wait(0.3), 30, what="the listener to reconnect")
        notifier.close()
    lost = [r.getMessage() for r in caplog.records if "listener connection lost" in r.getMessage()]
    assert lost and "read-only" in lost[0]
    assert notifier.reconnects == 1 and first is not None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_store_waits_out_a_read_only_server_with_no_other_host(
    own_server: ThrowawayServer,
    own_prefix: str,
    admin: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="venturi.store")
    with venturi.Queue(own_server.dsn, prefix=own_prefix, pool_size=2) as queue:
        queue.migrate()
        queue.enqueue("k", {})
        read_only(admin, True)
        started = wait_until(lambda: (queue.store.now(),), what="a read")[0]
        # Refused for as long as the server stays read-only: there is no other host.
        with pytest.raises(venturi.StoreUnavailable, match="25006"):
            queue.enqueue("k", {})
        assert not queue.server().writable
        drops = [r for r in caplog.records if "dropping the connections" in r.getMessage()]
        elapsed = (queue.store.now() - started).total_seconds()
        # Each retry of the enqueue was refused; the connections were dropped (to look
        # for a writable host: there is none) no more than once a second.
        assert 1 <= len(drops) <= elapsed / DROP_INTERVAL + 2
        read_only(admin, False)
        wait_until(lambda: queue.server().writable, 30, what="the server to take writes")
        queue.enqueue("k", {})
