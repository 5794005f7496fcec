"""Fixtures for the store tests: direct SQL access to the test's prefix, and a listener."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import Listener, Probe
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore


@pytest.fixture
def probe(database_dsn: str, store: PostgresStore) -> Iterator[Probe]:
    """Plain SQL on the (migrated) tables of this test's prefix."""
    instance = Probe(database_dsn, store.prefix.name)
    yield instance
    instance.close()


@pytest.fixture
def listener(database_dsn: str, store: PostgresStore) -> Iterator[Listener]:
    """A raw LISTEN on this test's channel, opened before the test acts."""
    instance = Listener(database_dsn, store.prefix.channel)
    yield instance
    instance.close()


@pytest.fixture
def make_store(database_dsn: str) -> Iterator[Callable[..., PostgresStore]]:
    """Build extra stores (other prefixes, other options); all closed afterwards."""
    made: list[PostgresStore] = []

    def make(prefix: str, **options: Any) -> PostgresStore:
        options.setdefault("pool_size", 4)
        instance = PostgresStore.from_dsn(database_dsn, Prefix(prefix), **options)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.close()
