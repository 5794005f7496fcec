"""Helpers shared by the tests: waiting for conditions and reaching the database.

The package also holds the execution ledger (`tests.support.ledger`), the one worker
process (`tests.support.worker_process`) and the fleet that starts it
(`tests.support.fleet`)."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, LiteralString, TypeVar

import psycopg
import psycopg.sql

from venturi.client import Queue
from venturi.models import JobRecord, Outcome
from venturi.prefix import Prefix
from venturi.settlements import BUSY, BatchOutcome, Claim, Settlement
from venturi.store import sqlfiles
from venturi.store.migrations import known_migrations
from venturi.store.postgres import DROP_PREFIX_STATEMENTS, PostgresStore

T = TypeVar("T")

SHARED_SERVER_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_counter = itertools.count()


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.02,
    what: str = "",
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that; fail saying
    what never happened. The suite's one way to wait: a predicate whose answer may be a
    falsy value (a latency of 0.0) wraps it, ``(seconds,)``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value is not None and value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def postgres_store(queue: Queue) -> PostgresStore:
    """The queue's store as the PostgreSQL store, for tests that look at its pool."""
    store = queue.store
    assert isinstance(store, PostgresStore)
    return store


def complete_many(
    store: PostgresStore,
    items: list[tuple[Claim, Settlement]] | tuple[tuple[Claim, Settlement], ...],
) -> BatchOutcome:
    """Complete ``items`` through the store's one write of a run's end
    (`PostgresStore.settle_many`): the runs that applied, and those whose rows another
    session held locked (any other was fenced out)."""
    written = store.settle_many(list(items))
    applied = [c.job_id for (c, _), w in zip(items, written, strict=True) if w is Outcome.COMPLETED]
    busy = [c.job_id for (c, _), w in zip(items, written, strict=True) if w is BUSY]
    return BatchOutcome(frozenset(applied), frozenset(busy))


def recover(store: PostgresStore, job: JobRecord, delay: float = 0.0) -> Outcome | None:
    """The reaper's recovery of ``job``'s expired claim, through `PostgresStore.settle_many`:
    ``recovered`` or ``dead``, or None when fenced out or its row was locked meanwhile."""
    [written] = store.settle_many([(Claim.of(job), Settlement.recover(job.claimed_by, delay))])
    return written if isinstance(written, Outcome) else None


def complete_in(
    store: PostgresStore, conn: psycopg.Connection[Any], claim: Claim, settlement: Settlement
) -> bool:
    """A transactional run's completion inside ``conn``'s transaction: True if it applied
    (it commits with that transaction), False when fenced out or its lease lapsed."""
    return store.settle(claim, settlement, conn) is not None


def fresh_prefix(label: str = "t") -> str:
    """A prefix no other test (or run) uses: isolation by prefix in one database."""
    safe = "".join(c if c.isalnum() else "_" for c in label.lower())[:12].strip("_") or "t"
    return f"t{safe}_{uuid.uuid4().hex[:8]}{next(_counter)}"[:40]


def server_answers(dsn: str, timeout: int = 2) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=timeout):
            return True
    except psycopg.Error:
        return False


def run_checked(
    *args: str | Path,
    cwd: Path,
    timeout: float = 600,
    env: Mapping[str, str | None] | None = None,
) -> str:
    """Run a program to completion (killed after ``timeout`` seconds) and return its
    stdout; fail with both outputs if it exits non-zero. The environment is this one,
    less PYTHONPATH and VIRTUAL_ENV (the program picks its own Python), with ``env``
    applied on top (None removes a variable)."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def backends(dsn: str, application_name: str) -> int:
    """How many sessions of ``application_name`` the server at ``dsn`` has now."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def drop_prefix(dsn: str, prefix: str) -> None:
    """Remove a test prefix's tables (best effort, the run's own leftovers only)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in DROP_PREFIX_STATEMENTS:
            conn.execute(sqlfiles.query(name, Prefix(prefix)))


def migrate_before(dsn: str, prefix: str, version: str) -> str:
    """Build ``prefix`` with the migrations older than ``version`` only, as the code
    before that migration left it; returns the name of the first migration not applied
    (asserting there is one, so a test of ``version`` cannot pass vacuously)."""
    later = [name for _, name in known_migrations() if name >= version]
    assert later, f"no migration from {version} on"
    schema = Prefix(prefix)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sqlfiles.query("migration_history_create", schema))
        for number, name in known_migrations():
            if name < version:
                conn.execute(sqlfiles.query(f"migrations/{name}", schema))
                conn.execute(
                    sqlfiles.query("migration_record", schema), {"version": number, "name": name}
                )
    return later[0]


class Probe:
    """Reads (and, to set up a scene, writes) a prefix's tables with plain SQL on its own
    autocommit connection: the checks a test makes behind the store's back.

    ``template`` may name the prefix's objects with the store's placeholders (``{jobs}``,
    ``{journal}``, ``{schema_history}``, ...); values travel as ``%s`` parameters.
    """

    def __init__(self, dsn: str, prefix: str) -> None:
        from venturi.prefix import Prefix

        self.prefix = Prefix(prefix)
        self.conn = psycopg.connect(dsn, autocommit=True)

    def rows(self, template: LiteralString, *params: Any) -> list[tuple[Any, ...]]:
        query = psycopg.sql.SQL(template).format(**self.prefix.placeholders())
        with self.conn.cursor() as cur:
            cur.execute(query, params or None)
            return cur.fetchall() if cur.description else []

    def scalar(self, template: LiteralString, *params: Any) -> Any:
        rows = self.rows(template, *params)
        assert len(rows) == 1, f"expected one row, got {rows!r}"
        return rows[0][0]

    def count(self, table: LiteralString, where: LiteralString = "true", *params: Any) -> int:
        return int(self.scalar("SELECT count(*) FROM {" + table + "} WHERE " + where, *params))

    def close(self) -> None:
        self.conn.close()


class Listener:
    """A raw LISTEN connection that records payloads, independent of venturi's notifier.

    `quiet_until_marker` proves a negative without sleeping: it sends a marker on the
    channel from another session and reads until the marker arrives. PostgreSQL delivers
    notifications in commit order, so anything committed before the marker arrives first.
    """

    def __init__(self, dsn: str, channel: str) -> None:
        self.dsn = dsn
        self.channel = channel
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))

    def receive(self, count: int, timeout: float = 10.0) -> list[str]:
        """Wait until ``count`` notifications arrived (fail after ``timeout``)."""
        got: list[str] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"got {got!r} on {self.channel}; wanted {count}")
            for notify in self.conn.notifies(timeout=left, stop_after=count - len(got)):
                got.append(notify.payload)
        return got

    def until_marker(self, timeout: float = 10.0) -> list[str]:
        """Every payload received before a marker sent now; the marker itself is dropped."""
        marker = f"marker-{uuid.uuid4().hex}"
        with psycopg.connect(self.dsn, autocommit=True) as other:
            other.execute("SELECT pg_notify(%s, %s)", (self.channel, marker))
        got: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"marker never arrived on {self.channel}; got {got!r}")
            for notify in self.conn.notifies(timeout=left, stop_after=1):
                if notify.payload == marker:
                    return got
                got.append(notify.payload)

    def close(self) -> None:
        self.conn.close()
