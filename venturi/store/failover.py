"""Following the primary when it moves: a failover, a switchover, a primary demoted in place.

A cluster with a standby (Patroni, pg_auto_failover, RDS or Aurora, Cloud SQL) is reached
through a DSN that names every host, ``host=a,b target_session_attrs=read-write``: libpq
then opens each new connection on whichever host takes writes. Connections already open
stay where they are, though, and a pool keeps them. When the old primary is stopped they
break, and the pool replaces them; when it stays up read-only (demoted in place, as some
managed services leave the old writer) they keep working for reads and refuse every
write with 25006, for as long as the pool lives.

`PrimaryWatch` is the store's answer: a read-only answer (`left_primary`) drops every
connection of the pool it came from, so the next ones are opened on the host that now
takes writes, and counts a `generation` that the listener watches to LISTEN there too.
`write_session_keywords` makes a multi-host DSN without ``target_session_attrs`` pick a
writable host, and `DatabaseServer` says where a connection landed and whether it can
write (`venturi healthcheck`, the metrics).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from venturi.errors import StoreError, first_line
from venturi.store import sqlfiles

logger = logging.getLogger("venturi.store")

# SQLSTATEs after which the server this session is on is up but not (or no longer) the
# primary: it refused a write as read-only (a standby, or a primary demoted in place).
# Every connection of the pool is on it, and stays working there; only new connections
# reach the primary. A server that shut down or crashed (57P01, 57P02) leaves connections
# that are broken: the store has the pool test and replace those (`outcome_unknown`), so
# that one session ended on its own (pg_terminate_backend) costs the others nothing.
LEFT_PRIMARY: Final = {"25006": "the server is read-only"}
# A pool's connections are dropped at most this often: while every host refuses (the
# standby not yet promoted), each statement fails again at once and must not make the
# pool open and close connections in a loop.
DROP_INTERVAL: Final = 1.0
# After the first, how long the same warning waits before it is logged again.
WARN_INTERVAL: Final = 30.0


def left_primary(exc: BaseException) -> str | None:
    """Why ``exc`` (a psycopg error, or venturi's raised from one) says that its
    session's server is no longer the primary; None if it does not."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    if not isinstance(cause, psycopg.Error) or cause.sqlstate is None:
        return None
    reason = LEFT_PRIMARY.get(cause.sqlstate)
    return None if reason is None else f"{reason} ({cause.sqlstate})"


def write_session_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """Connect keywords for a DSN's ``params`` that the queue writes through: with
    several hosts and no ``target_session_attrs`` (in the DSN or the environment),
    ``target_session_attrs=read-write``. libpq would otherwise take the first host that
    answers, which after a switch may be the old primary, still up but read-only."""
    hosts = str(params.get("host") or params.get("hostaddr") or "")
    if "," not in hosts or "target_session_attrs" in params:
        return {}
    if os.environ.get("PGTARGETSESSIONATTRS"):
        return {}
    return {"target_session_attrs": "read-write"}


class PrimaryWatch:
    """Drops a pool's connections when one of them finds that its server is no longer
    the primary, so that the pool reconnects to whichever host is now (libpq's
    ``target_session_attrs=read-write`` picks it). Shared by a store, its siblings and
    their listeners; thread-safe.

    `generation` counts the drops: a listener that saw it change LISTENs again, on the
    primary, and wakes its worker for a claim pass (notifications sent during the switch
    went to the old server)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._dropped_at: weakref.WeakKeyDictionary[ConnectionPool[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self._warned_at = -WARN_INTERVAL
        self.generation = 0

    def noticed(self, pool: ConnectionPool[Any], exc: BaseException) -> bool:
        """Drop ``pool``'s connections if ``exc`` says its server left the primary role
        (at most once per `DROP_INTERVAL`); True if they were dropped now."""
        reason = left_primary(exc)
        if reason is None:
            return False
        now = self._clock()
        with self._lock:
            last = self._dropped_at.get(pool)
            if last is not None and now - last < DROP_INTERVAL:
                return False
            self._dropped_at[pool] = now
            self.generation += 1
            warn = now - self._warned_at >= WARN_INTERVAL
            if warn:
                self._warned_at = now
        logger.log(
            logging.WARNING if warn else logging.INFO,
            "%s: dropping the connections of pool %s to reconnect to the primary (%s)",
            reason,
            pool.name,
            first_line(exc),
        )
        drop_connections(pool)
        return True


def drop_connections(pool: ConnectionPool[Any]) -> None:
    """Close every idle connection of ``pool`` now, and each lent one when it comes back;
    the pool opens new ones in their place (on the host that now takes writes)."""
    pool.drain()


@attrs.frozen
class DatabaseServer:
    """Where a connection landed: ``host`` and ``port`` as libpq reached them, and whether
    that server can take the queue's writes."""

    host: str
    port: int
    in_recovery: bool  # a standby (hot standby, replaying the primary's WAL)
    read_only: bool  # transactions start read-only (default_transaction_read_only, ...)

    @property
    def writable(self) -> bool:
        return not (self.in_recovery or self.read_only)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        if self.in_recovery:
            role = "a standby: read-only"
        elif self.read_only:
            role = "read-only (default_transaction_read_only)"
        else:
            role = "read-write"
        return f"{self.address} ({role})"

    @classmethod
    def of(cls, conn: psycopg.Connection[Any]) -> DatabaseServer:
        """The server ``conn`` is on (one round trip)."""
        row = conn.execute(sqlfiles.statement("server_role")).fetchone()
        assert row is not None
        return cls(conn.info.host, int(conn.info.port), bool(row[0]), bool(row[1]))
