"""Job registrations kept apart from any one `Queue`, and a Queue built on first use.

Web frameworks import the modules that register jobs long before (and in other processes
than) the one where a queue's pool may be opened: gunicorn forks after importing the app,
and a `Queue` must be created in the process that uses it. So integrations collect
registrations in a `Registry` at import time and build the `Queue` lazily, once per
process, through a `LazyQueue` that replays the registrations onto it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, Unpack

import attrs

from venturi.client import Queue
from venturi.errors import ConfigurationError, UnknownKind
from venturi.registry import EnqueueTarget, JobDefinition, JobFunction, JobOptions
from venturi.schedules.schedule import schedule_for

P = ParamSpec("P")
R = TypeVar("R")

Handler = Callable[..., Any]
Wrap = Callable[[Handler], Handler]
"""Turns a handler into the callable a worker runs (for an app context, say)."""


@attrs.frozen
class _Entry:
    kind: str
    func: Handler
    options: Mapping[str, Any]


class Registry:
    """Job registrations, replayed onto every `Queue` bound to it (now and later).

    Thread-safe. Registering a kind twice raises `ConfigurationError`, as on a `Queue`.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        # Schedules by name: (kind, `Queue.schedule` keywords), replayed after the jobs.
        self._schedules: dict[str, tuple[str, dict[str, Any]]] = {}
        self._bound: list[tuple[weakref.ref[Queue], Wrap]] = []
        self._lock = threading.Lock()

    @property
    def kinds(self) -> list[str]:
        """The registered kinds, in registration order."""
        with self._lock:
            return list(self._entries)

    def job(
        self,
        target: EnqueueTarget,
        kind: str,
        **options: Unpack[JobOptions],
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register the decorated function like `Queue.job`; ``enqueue`` goes to ``target``."""

        def register(func: Callable[P, R]) -> JobFunction[P, R]:
            # Built now so bad options fail at import, not when a queue is first used.
            definition = JobDefinition(kind, func, **options)
            entry = _Entry(kind, func, options)
            with self._lock:
                if kind in self._entries:
                    raise ConfigurationError(f"kind {kind!r} is already registered")
                self._entries[kind] = entry
                bound = self._live_bindings()
            for queue, wrap in bound:
                _register(queue, entry, wrap)
            return JobFunction(target, definition, func)

        return register

    def schedule(self, kind: str, **options: Any) -> None:
        """Add a schedule for a registered kind, like `Queue.schedule` (checked now)."""
        with self._lock:
            entry = self._entries.get(kind)
            if entry is None:
                raise UnknownKind(f"schedule for kind {kind!r}: no handler is registered for it")
            schedule = schedule_for(JobDefinition(kind, entry.func, **entry.options), **options)
            if schedule.name in self._schedules:
                raise ConfigurationError(f"schedule {schedule.name!r} already exists")
            self._schedules[schedule.name] = (kind, options)
            bound = self._live_bindings()
        for queue, _ in bound:
            queue.schedule(kind, **options)

    def periodic(
        self, target: EnqueueTarget, kind: str, schedule: dict[str, Any], **options: Any
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register a handler and a schedule for it, like `Queue.periodic`."""

        def register(func: Callable[P, R]) -> JobFunction[P, R]:
            # Both checked before either is kept: a bad schedule leaves no handler behind.
            name = schedule_for(JobDefinition(kind, func, **options), **schedule).name
            with self._lock:
                if name in self._schedules:
                    raise ConfigurationError(f"schedule {name!r} already exists")
            function = self.job(target, kind, **options)(func)
            self.schedule(kind, **schedule)
            return function

        return register

    def bind(self, queue: Queue, wrap: Wrap | None = None) -> None:
        """Register every job on ``queue`` (each handler through ``wrap``), and later ones."""
        chosen: Wrap = wrap if wrap is not None else _unwrapped
        with self._lock:
            entries = list(self._entries.values())
            schedules = list(self._schedules.values())
            self._bound.append((weakref.ref(queue), chosen))
        for entry in entries:
            _register(queue, entry, chosen)
        for kind, options in schedules:
            queue.schedule(kind, **options)

    def _live_bindings(self) -> list[tuple[Queue, Wrap]]:
        live = [(ref(), wrap) for ref, wrap in self._bound]
        self._bound = [(ref, wrap) for ref, wrap in self._bound if ref() is not None]
        return [(queue, wrap) for queue, wrap in live if queue is not None]


def _unwrapped(func: Handler) -> Handler:
    return func


def _register(queue: Queue, entry: _Entry, wrap: Wrap) -> None:
    queue.job(entry.kind, **entry.options)(wrap(entry.func))


class LazyQueue:
    """A `Queue` built on first use in each process, with a registry's jobs bound to it.

    After ``os.fork()`` the child builds its own queue; the parent's is left alone there
    (closing it would close connections the parent still uses). Thread-safe.
    """

    def __init__(self, build: Callable[[], Queue], registry: Registry, wrap: Wrap | None = None):
        self._build = build
        self._registry = registry
        self._wrap = wrap
        self._queue: Queue | None = None
        self._pid = 0
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        """True if this process has built its queue."""
        return self._queue is not None and self._pid == os.getpid()

    def get(self) -> Queue:
        """This process's queue, built (and its registrations replayed) on first call."""
        with self._lock:
            if self._queue is None or self._pid != os.getpid():
                queue = self._build()
                self._registry.bind(queue, self._wrap)
                self._queue, self._pid = queue, os.getpid()
            return self._queue

    def close(self) -> None:
        """Close the queue if this process built it; the next `get` builds a new one."""
        with self._lock:
            queue, mine = self._queue, self._pid == os.getpid()
            self._queue = None
        if queue is not None and mine:
            queue.close()
