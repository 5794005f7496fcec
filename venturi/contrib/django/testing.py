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
from typing import Any

from venturi import testing
from venturi.client import Queue
from venturi.durations import Duration
from venturi.models import JobRecord

from .queue import get_queue

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
