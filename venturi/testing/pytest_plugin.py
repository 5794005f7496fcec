"""venturi's pytest plugin (entry point ``pytest11``): the fixtures `venturi_dsn` and
`venturi_queue`. Fixtures only, so a project that requests neither is not touched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from venturi.testing.database import database_for_tests
from venturi.testing.queues import QueueFactory


@pytest.fixture(scope="session")
def venturi_dsn() -> Iterator[str]:
    """The PostgreSQL the tests use: ``VENTURI_TEST_DSN``, else a local server that
    answers, else an embedded throwaway server (extra ``embedded``) for the session."""
    with database_for_tests() as dsn:
        yield dsn


@pytest.fixture
def venturi_queue(venturi_dsn: str, request: pytest.FixtureRequest) -> Iterator[QueueFactory]:
    """A factory of migrated queues under fresh prefixes, dropped after the test:
    ``venturi_queue(app_queue)`` or ``venturi_queue("app.jobs")`` copies the jobs
    registered there; ``mode="inline"`` runs each job as it is enqueued."""
    factory = QueueFactory(venturi_dsn, label=request.node.name.split("[")[0])
    yield factory
    factory.close()
