"""The LISTEN side: one dedicated autocommit connection that wakes idle workers."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import pq

from venturi.errors import first_line
from venturi.prefix import Prefix
from venturi.store import retrying, sqlfiles
from venturi.store.connections import PREPARE_THRESHOLD, StoreConnection, leads_to_pooling_proxy
from venturi.store.failover import PrimaryWatch

logger = logging.getLogger("venturi.notifier")

# How long a quiet connection may go before the listener proves it is alive with a
# round trip; a silently dropped connection is then noticed within this time plus the
# TCP keepalive window below.
PING_INTERVAL = 15.0
# How long the ping may wait for its answer. A connection that a middlebox silently
# stopped forwarding never answers, and its kernel still ACKs (so neither keepalives nor
# tcp_user_timeout fire): without a deadline the ping, and the dispatcher, would hang.
PING_TIMEOUT = 5.0
_RECONNECT_BACKOFF = retrying.RetryDelays(base=0.1, cap=5.0)
_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}


class PostgresNotifier:
    """Listens on the prefix's channel over its own connection, never one from the pool.

    `wait` never raises for a lost connection: it reconnects with capped backoff and
    returns True after reconnecting, since a notification may have been missed.
    `wake` interrupts a `wait` in another thread at once. Not shared between threads
    except for `wake` and `close`.

    Behind a transaction-pooling proxy (PgBouncer's ``pool_mode = transaction``) a LISTEN
    would stay on a server connection that other clients borrow, and they would get its
    notifications. `connect` recognises such a proxy and does not LISTEN; the notifier is
    then `polling`, as after `stop_listening`: `wait` only sleeps (or is woken).

    After a failover the connection may still be up on the old primary, left read-only,
    where no NOTIFY is sent any more: the listener reconnects (to the host that now takes
    writes) when ``watch`` counts a pool that found its server no longer the primary, or
    when its own session reports the server read-only after a ping.
    """

    def __init__(
        self,
        conninfo: str,
        kwargs: dict[str, Any],
        prefix: Prefix,
        *,
        finished: bool = False,
        watch: PrimaryWatch | None = None,
    ) -> None:
        # ``finished``: listen on the channel of finished jobs (waiters) instead of the
        # channel of claimable ones (workers).
        self._listen = "listen_done" if finished else "listen"
        self._unlisten = "unlisten_done" if finished else "unlisten"
        self._conninfo = conninfo
        # A pooling proxy makes the notifier poll (`connect`), so this connection always
        # leads to the server itself: server-side prepared statements are safe on it,
        # whatever the pool's setting (a `borrowed` claim is prepared).
        self._kwargs = {
            **_KEEPALIVES,
            **kwargs,
            "autocommit": True,
            "prepare_threshold": PREPARE_THRESHOLD,
        }
        self._prefix = prefix
        self._watch = watch
        self._generation = 0  # the watch's generation when this connection was opened
        self._conn: psycopg.Connection[Any] | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._closed = threading.Event()
        # Guards the wake pipe and the connection against `close` from another thread:
        # once closed, their descriptor numbers may be reused by unrelated files or
        # sockets, so nothing may write to, read from or close them again.
        self._lock = threading.Lock()
        self._waiting = False
        self._notified = False  # a notification collected after a borrowed statement
        # True from a `wait` that notifications ended until the one statement `borrowed`
        # lends the connection for (see there).
        self._lendable = False
        self._polling = False
        self._failures = 0
        self._last_activity = 0.0
        self.reconnects = 0

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @property
    def polling(self) -> bool:
        """True once the notifier stopped listening for good (see `stop_listening`)."""
        return self._polling

    def connect(self) -> None:
        """Open the connection and LISTEN; raises `psycopg.OperationalError` on failure.

        If the connection leads to a transaction-pooling proxy, close it instead and
        stop listening (`polling` becomes True).
        """
        if self._polling:
            return
        generation = 0 if self._watch is None else self._watch.generation
        conn = StoreConnection.connect(self._conninfo, **self._kwargs)
        try:
            shared = leads_to_pooling_proxy(conn)
            if not shared:
                conn.execute(sqlfiles.statement(self._listen, self._prefix))
        except BaseException:
            conn.close()
            raise
        if shared:
            conn.close()
            self._polling = True
            return
        self._conn = conn
        self._generation = generation
        self._last_activity = time.monotonic()

    def stop_listening(self) -> None:
        """UNLISTEN and close the connection; from now on `wait` only sleeps (or is
        woken) and never reconnects. For a worker whose NOTIFYs do not come back: its
        LISTEN must not linger where a pooling proxy lends the connection to others."""
        with self._lock:
            self._polling = True
            conn, self._conn = self._conn, None
        if conn is None:
            return
        # Best effort: a connection that fails here has lost its LISTEN with its session.
        with contextlib.suppress(psycopg.Error):
            conn.execute(sqlfiles.statement(self._unlisten, self._prefix))
        conn.close()

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` s; True if a notification arrived or we reconnected."""
        with self._lock:
            if self._closed.is_set():
                return False
            self._waiting = True
        try:
            return self._wait(timeout)
        finally:
            with self._lock:
                self._waiting = False
                if self._closed.is_set():
                    self._release()  # `close` came while we waited and left this to us

    def _wait(self, timeout: float) -> bool:
        self._lendable = False
        if self._polling:
            ready, _, _ = select.select([self._wake_r], [], [], max(0.0, timeout))
            if ready:
                self._drain_wake()
            return False
        if not self.connected:
            return self._reconnect(timeout)
        if self._watch is not None and self._watch.generation != self._generation:
            self._drop(psycopg.OperationalError("the primary moved"))
            return self._reconnect(timeout)
        try:
            return self._wait_connected(max(0.0, timeout))
        except psycopg.Error as exc:
            self._drop(exc)
            return self._reconnect(timeout)

    def _wait_connected(self, timeout: float) -> bool:
        conn = self._conn
        assert conn is not None
        if self._notified or self._collect(conn):
            self._notified = False
            self._lendable = True
            return True
        if time.monotonic() - self._last_activity > PING_INTERVAL:
            notified = _ping(conn, PING_TIMEOUT)
            self._last_activity = time.monotonic()
            if _read_only(conn):
                # Its NOTIFYs come from the primary: this server was demoted, or is a
                # standby a multi-host DSN without target_session_attrs led to.
                raise psycopg.OperationalError("the listener's server is read-only")
            if notified or self._collect(conn):
                self._lendable = True
                return True
        ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], timeout)
        if self._wake_r in ready:
            self._drain_wake()
            return False
        if ready:
            self._lendable = self._collect(conn)
            return self._lendable
        return False

    def _collect(self, conn: psycopg.Connection[Any]) -> bool:
        received = False
        for _ in conn.notifies(timeout=0):
            received = True
        if received:
            self._last_activity = time.monotonic()
        if conn.closed or conn.broken:
            raise psycopg.OperationalError("listener connection closed")
        return received

    def _drop(self, exc: BaseException) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if not self._closed.is_set():
            logger.warning("listener connection lost (%s); reconnecting", first_line(exc))

    def _reconnect(self, timeout: float) -> bool:
        if self._failures and self._closed.wait(
            min(_RECONNECT_BACKOFF.delay(self._failures), timeout)
        ):
            return False
        try:
            self.connect()
        except psycopg.Error as exc:
            self._failures += 1
            if self._failures == 1 or self._failures % 10 == 0:
                logger.warning("listener cannot connect (%s); retrying", first_line(exc))
            return False
        if self._polling:
            logger.warning(
                "the listener's connection now leads to a transaction-pooling proxy; "
                "not listening, the worker polls (set listen_dsn to reach the server directly)"
            )
        elif self._failures or self.reconnects:
            logger.info("listener reconnected")
        self._failures = 0
        self.reconnects += 1
        return True

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[psycopg.Connection[Any] | None]:
        """The LISTEN connection for one statement of the thread that calls `wait`, right
        after a `wait` that notifications ended; otherwise None (use a pooled one). The
        dispatcher claims on it when a NOTIFY woke it: no pool checkout, and the claim
        can be prepared.

        Only then, and for that one statement: a statement has no deadline, and one sent
        on a connection cut off silently would block its caller for good; one that
        delivered a notification this very moment is as alive as a pooled connection.

        Notifications that arrive meanwhile are collected afterwards, and the next
        `wait` returns True at once. A `close` from another thread meanwhile leaves the
        connection to be closed here, after the statement.
        """
        with self._lock:
            conn = self._conn
            usable = (
                self._lendable
                and conn is not None
                and not self._closed.is_set()
                and not conn.closed
                and not conn.broken
            )
            self._lendable = False
            if usable:
                self._waiting = True
        if not usable:
            yield None
            return
        assert conn is not None
        try:
            yield conn
            self._last_activity = time.monotonic()
            with contextlib.suppress(psycopg.Error):  # a lost connection: `wait` sees it
                self._notified = self._collect(conn) or self._notified
        finally:
            with self._lock:
                self._waiting = False
                if self._closed.is_set():
                    self._release()

    def wake(self) -> None:
        """Make a `wait` in progress (or the next one) return at once."""
        with self._lock:
            if not self._closed.is_set():
                self._write_wake()

    def _write_wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def backend_pid(self) -> int | None:
        """The server process of the LISTEN connection (for diagnostics and tests)."""
        return None if self._conn is None else self._conn.info.backend_pid

    def close(self) -> None:
        """Stop listening; idempotent. A `wait` in progress returns False at once and
        releases the connection itself, so nothing is closed under its feet."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._write_wake()
            if not self._waiting:
                self._release()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_only(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s server says (in the settings it reports, PostgreSQL 14 and
    later) that it is a standby or starts every transaction read-only."""
    info = conn.info
    return "on" in (
        info.parameter_status("in_hot_standby"),
        info.parameter_status("default_transaction_read_only"),
    )


def _ping(conn: psycopg.Connection[Any], timeout: float) -> bool:
    """Round-trip ``SELECT 1`` within ``timeout`` seconds; True if notifications came too.

    Drives libpq directly, since ``execute`` has no deadline. Raises
    `psycopg.OperationalError` when the answer does not come in time.
    """
    pgconn = conn.pgconn
    deadline = time.monotonic() + timeout
    pgconn.send_query(b"SELECT 1")
    while pgconn.flush():  # non-blocking: 1 while part of the query is still unsent
        _wait_for(conn, deadline, timeout, write=True)
    pgconn.consume_input()
    while pgconn.is_busy():
        _wait_for(conn, deadline, timeout, write=False)
        pgconn.consume_input()
    while (result := pgconn.get_result()) is not None:
        if result.status != pq.ExecStatus.TUPLES_OK:
            message = result.error_message.decode(errors="replace").strip()
            raise psycopg.OperationalError(f"listener ping failed: {message}")
    notified = False
    while pgconn.notifies() is not None:
        notified = True
    return notified


def _wait_for(
    conn: psycopg.Connection[Any], deadline: float, timeout: float, *, write: bool
) -> None:
    """Wait until the socket can be written (or read); raise once ``deadline`` passed."""
    fds = [conn.fileno()]
    left = max(0.0, deadline - time.monotonic())
    readable, writable, _ = select.select([] if write else fds, fds if write else [], [], left)
    if not readable and not writable:
        raise psycopg.OperationalError(f"no answer to the listener's ping within {timeout:g}s")
