"""The project's queue, its job registrations, and enqueueing inside ORM transactions."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, Unpack

import psycopg
from asgiref.sync import async_to_sync
from django.db import close_old_connections, connections, transaction
from ulid import ULID

from venturi import testing
from venturi.client import DEFAULT_WAIT_SECONDS, Queue
from venturi.contrib.lazy import Handler, LazyQueue, Registry
from venturi.durations import Duration
from venturi.errors import ConfigurationError
from venturi.registry import JobFunction, JobOptions
from venturi.schedules.schedule import split_options

from .conf import VenturiSettings, connection_string
from .connection import DjangoConnectionLender, database_alias, django_connection

P = ParamSpec("P")
R = TypeVar("R")

registry = Registry()
"""Jobs registered with `job`; bound to the queue when it is built."""


def _build() -> Queue:
    conf = VenturiSettings.load()
    # The live settings_dict, not settings.DATABASES: Django's test runner points it at
    # the test database.
    settings_dict = connections[conf.database].settings_dict
    if conf.testing is not None:
        return testing_queue(conf, connection_string(settings_dict))
    return Queue(connection_string(settings_dict), **conf.queue_options())


def testing_queue(conf: VenturiSettings, conninfo: str) -> Queue:
    """The project's queue in testing mode: its tables made (committed, on a connection
    of its own), then every operation on Django's connection, in ``conf.testing`` mode."""
    options = conf.queue_options()
    with Queue(conninfo, prefix=conf.prefix, pool_size=1) as migrator:
        migrator.migrate()
    queue = Queue.from_pool(
        DjangoConnectionLender(conf.database, conninfo),
        prefix=conf.prefix,
        strict=options["strict"],
        max_payload_bytes=options["max_payload_bytes"],
        listen_dsn=options["listen_dsn"],
    )
    testing.set_mode(queue, conf.testing or "manual", same_transaction=True)
    return queue


def _fresh_connections(func: Handler) -> Handler:
    """Run a job as Django runs a request: stale or broken connections closed around it.

    An ``async def`` job's coroutine runs as Django runs one from sync code (asgiref's
    ``async_to_sync``, as ``Task.call`` does): on an event loop of its own, with its
    ``sync_to_async`` calls (the async ORM's among them) back in this handler thread, on
    the connections closed here.
    """

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        if any(c.in_atomic_block for c in connections.all(initialized_only=True)):
            # Run inside the caller's transaction (drain or inline mode in a TestCase):
            # closing a connection here would break that transaction.
            return func(*args, **kwargs)
        close_old_connections()
        try:
            result = func(*args, **kwargs)
            if inspect.iscoroutine(result):
                return async_to_sync(_awaited)(result)
            return result
        finally:
            close_old_connections()

    return run


async def _awaited(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return await coroutine


_lazy = LazyQueue(_build, registry, _fresh_connections)


def get_queue() -> Queue:
    """The project's `venturi.Queue`, built from ``VENTURI`` and ``DATABASES`` on first use.

    Its pool and LISTEN connection (unless ``LISTEN_DSN``) use the parameters of the configured
    database (host, port, name, user, password and libpq ``OPTIONS`` such as
    ``sslmode``). One per process; rebuilt after a fork and when those settings change.
    """
    return _lazy.get()


def reset_queue() -> None:
    """Close the project's queue; the next `get_queue` builds it from current settings."""
    _lazy.close()


class _DjangoTarget:
    """What ``JobFunction.enqueue`` calls for jobs registered with `job`."""

    def enqueue(self, kind: str, payload: Mapping[str, Any] | None = None, **options: Any) -> ULID:
        return enqueue(kind, payload, **options)

    def result(self, job_id: ULID, timeout: Duration = DEFAULT_WAIT_SECONDS) -> Any:
        return get_queue().result(job_id, timeout)


_target = _DjangoTarget()


def job(
    kind: str,
    *,
    atomic: bool = False,
    **options: Unpack[JobOptions],
) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Register the decorated function as the handler of ``kind`` (like `Queue.job`).

    Usable at import time: nothing connects until the queue is first used. Its
    ``enqueue`` joins Django's current transaction (see `enqueue`), and every run is
    wrapped in ``close_old_connections()`` as Django wraps a request.

    With ``atomic=True`` each run happens inside ``transaction.atomic()`` on Django's
    connection to the queue's database, and the job's fenced completion is written in
    that block: the run's ORM writes commit if and only if its completion applies
    (`atomic_run`). Such a handler must be a plain ``def``.
    """
    if not isinstance(atomic, bool):
        raise ConfigurationError(f"atomic of {kind!r} must be True or False, got {atomic!r}")
    if atomic:
        options = {**options, "transactional": True, "transaction": atomic_run}
    register = registry.job(_target, kind, **options)
    if not atomic:
        return register

    def register_atomic(func: Callable[P, R]) -> JobFunction[P, R]:
        if inspect.iscoroutinefunction(func):
            raise ConfigurationError(
                f"handler of {kind!r} is async, but atomic=True runs a plain def: its ORM "
                "calls must be on this thread's connection, inside the atomic block"
            )
        return register(func)

    return register_atomic


@contextmanager
def atomic_run() -> Iterator[psycopg.Connection[Any]]:
    """The transaction of a run of an ``atomic=True`` job: ``transaction.atomic()`` on
    Django's connection to the queue's database, whose psycopg connection it yields.

    Stale connections are closed around it, as around a request (not inside a
    caller's own atomic block, as in the inline test mode)."""
    fresh = not any(c.in_atomic_block for c in connections.all(initialized_only=True))
    if fresh:
        close_old_connections()
    try:
        with transaction.atomic(using=database_alias()):
            yield django_connection()
    finally:
        if fresh:
            close_old_connections()


def periodic(kind: str, **options: Any) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Register a handler and its schedule like `Queue.periodic` (usable at import)."""
    schedule, job_options = split_options(options)
    return registry.periodic(_target, kind, schedule, **job_options)


def schedule(kind: str, **options: Any) -> None:
    """Add a schedule for a kind registered with `job`, like `Queue.schedule`."""
    registry.schedule(kind, **options)


def enqueue(kind: str, payload: Mapping[str, Any] | None = None, **options: Any) -> ULID:
    """Enqueue on Django's connection to the queue's database, inside its transaction.

    Within ``transaction.atomic()`` the job commits or rolls back with the ORM writes of
    that block (and its NOTIFY is sent only on commit); outside one it commits at once.
    Options as for `Queue.enqueue` (``priority``, ``delay``/``at``, ``dedup_key``, ...).
    """
    return get_queue().enqueue(kind, payload, conn=django_connection(), **options)


def enqueue_on_commit(
    kind: str, payload: Mapping[str, Any] | None = None, *, robust: bool = False, **options: Any
) -> None:
    """Enqueue on venturi's own pool once the current transaction commits; never on rollback.

    The job is checked now (bad input raises here), enqueued by
    ``transaction.on_commit`` (at once outside ``atomic()``). Prefer `enqueue`, which
    cannot lose the job between the commit and the enqueue; ``robust`` as for
    ``on_commit``.
    """
    new_job = get_queue().new_job(kind, payload, **options)
    transaction.on_commit(
        lambda: get_queue().enqueue_many([new_job]), using=database_alias(), robust=robust
    )
