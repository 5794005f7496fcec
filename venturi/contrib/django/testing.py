"""Testing Django code that enqueues jobs: ``VENTURI = {"TESTING": "inline" | "manual"}``
in the test settings, and these helpers on the project's queue.

In testing mode the queue works on Django's own connection, so it sees what a
``TestCase`` (whose transaction never commits) enqueued: ``assert_enqueued`` finds the
jobs, ``drain`` runs them, and in inline mode each runs as it is enqueued, all inside
the test's transaction. In a ``TransactionTestCase`` each statement commits as usual;
call `clear` in ``tearDown`` there, since Django flushes only its own tables.

```python
from venturi.contrib.django import testing as jobs

class CheckoutTests(TestCase):
    def test_checkout_sends_a_receipt(self):
        self.client.post("/checkout", {"order": 7})
        jobs.assert_enqueued("emails.receipt", {"order": 7})
        jobs.drain()
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from django.db import transaction
from psycopg_pool import ConnectionPool

from venturi import testing
from venturi.client import Queue
from venturi.durations import Duration
from venturi.models import JobRecord

from .conf import VenturiSettings
from .queue import django_connection, get_queue

__all__ = [
    "advance",
    "assert_enqueued",
    "clear",
    "drain",
    "enqueued",
    "inline",
    "manual",
    "refute_enqueued",
]


class DjangoConnectionPool:
    """Stands in for a psycopg pool, lending Django's own connection to the queue: each
    statement runs in the thread's current transaction (a ``TestCase``'s) as a
    savepoint, so a failing one leaves that transaction usable."""

    timeout = 0.0
    max_size = 1
    kwargs: dict[str, Any] = {}  # noqa: RUF012 (the pool attribute the store reads)

    def __init__(self, alias: str, conninfo: str) -> None:
        self.alias = alias
        self.conninfo = conninfo

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        # Django's atomic(): a savepoint inside the caller's transaction (rolled back
        # alone if the statement fails), else a transaction of its own.
        with transaction.atomic(using=self.alias):
            yield django_connection(self.alias)

    def check(self) -> None:
        """Nothing to replace: Django manages its connection."""

    def close(self) -> None:
        """Never closes Django's connection."""


def testing_queue(conf: VenturiSettings, conninfo: str) -> Queue:
    """The project's queue in testing mode: its tables made (committed, on a connection
    of its own), then every operation on Django's connection, in ``conf.testing`` mode."""
    options = conf.queue_options()
    with Queue(conninfo, prefix=conf.prefix, pool_size=1) as migrator:
        migrator.migrate()
    pool = cast(ConnectionPool[Any], DjangoConnectionPool(conf.database, conninfo))
    queue = Queue.from_pool(
        pool,
        prefix=conf.prefix,
        strict=options["strict"],
        max_payload_bytes=options["max_payload_bytes"],
        listen_dsn=options["listen_dsn"],
    )
    testing.set_mode(queue, conf.testing or "manual", same_transaction=True)
    return queue


def enqueued(kind: str | None = None) -> list[JobRecord]:
    """The project's jobs waiting to run (of ``kind``), oldest first."""
    return testing.enqueued(get_queue(), kind)


def assert_enqueued(
    kind: str, payload: Mapping[str, Any] | None = None, **terms: Any
) -> list[JobRecord]:
    """`venturi.testing.assert_enqueued` on the project's queue (``count``,
    ``priority``, ``delay``/``at``, ``tolerance``)."""
    __tracebackhide__ = True
    return testing.assert_enqueued(get_queue(), kind, payload, **terms)


def refute_enqueued(kind: str, payload: Mapping[str, Any] | None = None, **terms: Any) -> None:
    """`venturi.testing.refute_enqueued` on the project's queue."""
    __tracebackhide__ = True
    testing.refute_enqueued(get_queue(), kind, payload, **terms)


def drain(*, kinds: list[str] | None = None) -> int:
    """Run every due job of the project's queue in this thread; returns the runs."""
    return get_queue().drain(kinds)


def advance(duration: Duration | str) -> None:
    """`venturi.testing.advance` on the project's queue (``"1h"``, seconds, timedelta)."""
    testing.advance(get_queue(), duration)


@contextmanager
def inline(*, raise_failures: bool = True) -> Iterator[Queue]:
    """Inline mode for a block, whatever ``TESTING`` says."""
    with testing.inline(get_queue(), raise_failures=raise_failures, same_transaction=True) as q:
        yield q


@contextmanager
def manual() -> Iterator[Queue]:
    """Manual mode for a block, also when ``TESTING`` is ``"inline"``."""
    with testing.manual(get_queue()) as queue:
        yield queue


def clear() -> None:
    """Delete every job of the project's queue (its tables are dropped and made again):
    for ``TransactionTestCase``, whose flush leaves venturi's tables alone."""
    queue = get_queue()
    queue.drop_prefix()
    queue.migrate()
