"""`QueueFactory`: migrated queues under fresh prefixes for tests, dropped afterwards."""

from __future__ import annotations

import importlib
import re
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Literal

from venturi.client import Queue
from venturi.errors import ConfigurationError
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore
from venturi.testing.modes import inline

Mode = Literal["manual", "inline"]
MODES: tuple[Mode, ...] = ("manual", "inline")
TEST_POOL_SIZE = 4


class QueueFactory:
    """Makes queues for one test (the ``venturi_queue`` fixture): each under a prefix of
    its own in the database at ``dsn``, migrated; `close` drops them."""

    def __init__(self, dsn: str, label: str = "test") -> None:
        self.dsn = dsn
        self.label = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[:16] or "test"
        self._cleanup = ExitStack()

    def __call__(
        self, source: Queue | str | None = None, *, mode: Mode = "manual", strict: bool = False
    ) -> Queue:
        """A migrated queue under a fresh prefix, with the project's jobs registered.

        ``source`` is the project's `Queue`, or a module path (``"app.jobs"`` holding one
        Queue, or ``"app.jobs:queue"``). That queue itself is pointed at the fresh prefix
        until the test ends, keeping its registrations: so the code under test — job
        functions' ``enqueue``, the Flask extension — enqueues there too. Without a
        source, a new empty queue (``strict`` as given). ``mode`` is ``"manual"`` (jobs
        wait until `drain`) or ``"inline"`` (each runs as it is enqueued; see
        `venturi.testing.inline`).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        original = resolve_source(source)
        store = PostgresStore.from_dsn(self.dsn, self._fresh_prefix(), pool_size=TEST_POOL_SIZE)
        self._cleanup.enter_context(_dropped(self.dsn, store))
        store.migrate()
        if original is None:
            queue = Queue(store=store, strict=strict)
        else:
            queue = self._cleanup.enter_context(original.pointed_at(store))
        if mode == "inline":
            self._cleanup.enter_context(inline(queue))
        return queue

    def _fresh_prefix(self) -> Prefix:
        return Prefix(f"t_{self.label}_{uuid.uuid4().hex[:10]}")

    def close(self) -> None:
        """Leave inline mode, point source queues back, drop every fresh prefix."""
        self._cleanup.close()


@contextmanager
def _dropped(dsn: str, store: PostgresStore) -> Iterator[None]:
    try:
        yield
    finally:
        store.close()
        # Through a pool of its own: the test may have closed the queue, and its pool.
        dropper = PostgresStore.from_dsn(dsn, store.prefix, pool_size=1)
        try:
            dropper.drop_prefix()
        finally:
            dropper.close()


def resolve_source(source: Queue | str | None) -> Queue | None:
    """The queue named by ``source``: itself, or the Queue a module path names."""
    if source is None or isinstance(source, Queue):
        return source
    if not isinstance(source, str):
        raise TypeError(f"source must be a Queue or a module path, got {type(source).__name__}")
    module_name, _, attribute = source.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, Queue):
            raise ConfigurationError(f"{source} is not a venturi Queue")
        return found
    queues = [v for v in vars(module).values() if isinstance(v, Queue)]
    if len(queues) != 1:
        raise ConfigurationError(
            f"module {module_name} holds {len(queues)} venturi Queues; name one as "
            f"'{module_name}:attribute'"
        )
    return queues[0]
