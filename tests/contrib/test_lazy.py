"""Registrations kept apart from a Queue, and the per-process lazy queue the Flask and
Django integrations build on."""

from __future__ import annotations

import gc
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from flask import Flask
from ulid import ULID

from venturi import ConfigurationError, InvalidJob, Queue
from venturi.contrib import lazy
from venturi.contrib.flask import Venturi
from venturi.contrib.lazy import LazyQueue, Registry


class _Target:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def enqueue(self, kind: str, payload: Mapping[str, Any] | None = None, **options: Any) -> ULID:
        self.sent.append((kind, payload))
        return ULID()


@pytest.fixture
def queues(database_dsn: str, prefix: str) -> Iterator[list[Queue]]:
    made: list[Queue] = []
    yield made
    for queue in made:
        queue.close()


def test_registrations_reach_queues_bound_before_and_after(
    database_dsn: str, prefix: str, queues: list[Queue]
) -> None:
    registry = Registry()
    target = _Target()

    @registry.job(target, "early", max_attempts=2)
    def early(x: int) -> int:
        return x

    first = Queue(database_dsn, prefix=prefix)
    queues.append(first)
    calls: list[str] = []

    def wrap(func: lazy.Handler) -> lazy.Handler:
        def run(*args: object, **kwargs: object) -> object:
            calls.append(func.__name__)
            return func(*args, **kwargs)

        return run

    registry.bind(first, wrap)

    @registry.job(target, "late")
    def late() -> None:
        return None

    assert set(first.definitions) == {"early", "late"}
    assert first.definitions["early"].max_attempts == 2
    assert first.definitions["early"].func(x=3) == 3
    assert calls == ["early"]
    early.enqueue(x=1)
    assert target.sent == [("early", {"x": 1})]
    assert registry.kinds == ["early", "late"]


def test_bad_registrations_fail_at_once() -> None:
    registry = Registry()
    with pytest.raises(InvalidJob, match="max_attempts"):
        registry.job(_Target(), "k", max_attempts=0)(lambda: None)
    registry.job(_Target(), "k")(lambda: None)
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.job(_Target(), "k")(lambda: None)


def test_the_lazy_queue_is_built_once_per_process(
    database_dsn: str, prefix: str, queues: list[Queue], monkeypatch: pytest.MonkeyPatch
) -> None:
    def build() -> Queue:
        queue = Queue(database_dsn, prefix=prefix)
        queues.append(queue)
        return queue

    holder = LazyQueue(build, Registry())
    first = holder.get()
    assert holder.get() is first and holder.built
    # As seen from a forked child: a new queue, and the parent's is left open.
    monkeypatch.setattr(lazy, "os", types.SimpleNamespace(getpid=lambda: -1))
    assert not holder.built
    child = holder.get()
    assert child is not first
    assert not first.store.pool.closed
    holder.close()
    assert child.store.pool.closed


def test_an_app_and_its_queue_can_be_collected(database_dsn: str, prefix: str) -> None:
    ext = Venturi()
    app = Flask("gone")
    app.config.update(VENTURI_DSN=database_dsn, VENTURI_PREFIX=prefix)
    ext.init_app(app)
    ext.queue_for(app)
    ext.close(app)
    ref = weakref.ref(app)
    del app
    gc.collect()
    assert ref() is None
