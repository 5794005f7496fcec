"""Fixtures for the schedule and retention tests: a migrated queue without retention
(tests turn it on where they test it), and plain SQL behind its back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import Probe
from venturi.client import Queue


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=8, retention=None)
    instance.migrate()
    yield instance
    instance.close()


@pytest.fixture
def probe(database_dsn: str, queue: Queue) -> Iterator[Probe]:
    instance = Probe(database_dsn, queue.prefix)
    yield instance
    instance.close()
