"""Helpers shared by the tests: waiting for conditions and reaching the database."""

from __future__ import annotations

import itertools
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")

SHARED_SERVER_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_counter = itertools.count()


def wait_until(
    predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.02, what: str = ""
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


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


def start_embedded_server() -> tuple[str, Any]:
    """A throwaway PostgreSQL from the pgserver wheel (works as root); returns (dsn, server)."""
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="venturi-pg-"), cleanup_mode="stop")
    return server.get_uri(), server


def drop_prefix(dsn: str, prefix: str) -> None:
    """Remove a test prefix's tables (best effort, the run's own leftovers only)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP TABLE IF EXISTS {}, {}, {} CASCADE").format(
                psycopg.sql.Identifier(f"{prefix}_journal"),
                psycopg.sql.Identifier(f"{prefix}_jobs"),
                psycopg.sql.Identifier(f"{prefix}_schema_history"),
            )
        )
