"""Fixtures for the tests through PgBouncer in transaction mode: the pooler (skipped when
pgbouncer is not installed, a failure under CI), its DSN, and a queue through it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import venturi
from tests.contrib.test_flask import notes_table  # noqa: F401  (the Flask example's table)
from tests.pooler.pgbouncer import PgBouncer, find_pgbouncer
from tests.support import Probe


@pytest.fixture(scope="session")
def pgbouncer(database_dsn: str) -> Iterator[PgBouncer]:
    binary = find_pgbouncer()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed; CI installs it in .ci/run")
        pytest.skip("pgbouncer is not installed (Debian package pgbouncer)")
    bouncer = PgBouncer(binary, database_dsn)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def pooled_dsn(pgbouncer: PgBouncer) -> str:
    """The test database through PgBouncer in transaction mode."""
    return pgbouncer.dsn


@pytest.fixture
def pooled_queue(pooled_dsn: str, prefix: str) -> Iterator[venturi.Queue]:
    """A queue (default options) whose every connection goes through the pooler;
    migrated through it too."""
    queue = venturi.Queue(pooled_dsn, prefix=prefix, pool_size=16)
    queue.migrate()
    yield queue
    queue.close()


@pytest.fixture
def probe(database_dsn: str, prefix: str) -> Iterator[Probe]:
    """Reads the prefix's tables straight from the server, past the pooler."""
    reader = Probe(database_dsn, prefix)
    yield reader
    reader.close()
