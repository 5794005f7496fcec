"""Fixtures for the fault tests: a throwaway server of our own and the ledger."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.server import ThrowawayServer, running_throwaway_server
from tests.support import drop_prefix, fresh_prefix, ledger


@pytest.fixture(scope="session")
def own_server_session() -> Iterator[ThrowawayServer]:
    """A private PostgreSQL for tests that stop, restart or reconfigure the server."""
    with running_throwaway_server() as server:
        yield server


@pytest.fixture
def own_server(own_server_session: ThrowawayServer) -> ThrowawayServer:
    """The private server, running (a previous test may have left it stopped)."""
    own_server_session.ensure_running()
    return own_server_session


@pytest.fixture
def own_prefix(request: pytest.FixtureRequest, own_server: ThrowawayServer) -> Iterator[str]:
    """A fresh prefix on the private server, with its ledger; dropped afterwards."""
    name = fresh_prefix(request.node.name.split("[")[0].removeprefix("test_"))
    yield name
    own_server.ensure_running()
    ledger.drop(own_server.dsn, name)
    drop_prefix(own_server.dsn, name)


@pytest.fixture
def shared_prefix(prefix: str, database_dsn: str) -> Iterator[str]:
    """The per-test prefix on the shared server, with its ledger dropped afterwards."""
    yield prefix
    ledger.drop(database_dsn, prefix)
