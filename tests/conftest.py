"""Fixtures: one PostgreSQL for the run (the shared server, or a throwaway one), and a
fresh table-name prefix per test, so tests isolate by prefix in one database."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_postgresql import factories

from tests.support import (
    SHARED_SERVER_DSN,
    drop_prefix,
    fresh_prefix,
    server_answers,
    start_embedded_server,
)
from venturi.pgstore import PostgresStore
from venturi.prefix import Prefix

postgresql_shared = factories.postgresql_noproc(
    host="127.0.0.1", port=5432, user="postgres", dbname="test"
)
postgresql_own = factories.postgresql_proc(port=None)


def _dsn_from_executor(executor: Any) -> str:
    password = f":{executor.password}" if executor.password else ""
    return (
        f"postgresql://{executor.user}{password}@{executor.host}:{executor.port}/{executor.dbname}"
    )


@pytest.fixture(scope="session")
def database_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """VENTURI_TEST_DSN if set; else the running server on 127.0.0.1:5432 (through
    pytest-postgresql's no-process fixture; VENTURI_TEST_SHARED_DSN names another);
    else a throwaway server: pytest-postgresql's own when pg_ctl can run (not as root),
    otherwise the embedded pgserver."""
    explicit = os.environ.get("VENTURI_TEST_DSN")
    if explicit:
        yield explicit
        return
    # VENTURI_TEST_SHARED_DSN moves the discovery elsewhere, e.g. to a closed port to
    # exercise the throwaway-server fallback on a machine whose shared server is up.
    shared = os.environ.get("VENTURI_TEST_SHARED_DSN", SHARED_SERVER_DSN)
    if server_answers(shared):
        if shared == SHARED_SERVER_DSN:
            yield _dsn_from_executor(request.getfixturevalue("postgresql_shared"))
        else:
            yield shared
        return
    if os.geteuid() != 0 and shutil.which("pg_ctl"):
        executor = request.getfixturevalue("postgresql_own")
        yield f"postgresql://{executor.user}@{executor.host}:{executor.port}/postgres"
        return
    dsn, server = start_embedded_server()
    try:
        yield dsn
    finally:
        server.cleanup()


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
