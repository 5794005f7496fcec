"""`StoreHook` and `StoreHooks`: the seam where layers (tracing, the test modes) watch
every write of new jobs and every run's settlement, whichever operation of the store
writes it.

Every public write of `PostgresStore` goes through its `StoreHooks`: each enqueue (one
job, many jobs by VALUES or by COPY, a graph of jobs with parents) runs inside each
hook's `StoreHook.around_enqueue`, and each settlement the store writes (or finds
fenced out) is shown to `StoreHook.after_settle`. With no hook registered the store
checks one empty tuple per operation and does no work per job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.models import NewJob, Outcome
from venturi.settlements import Claim, Settlement

# Writes ``jobs`` (possibly as a hook handed them on) and returns their ids, in order.
EnqueueWrite = Callable[[Sequence[NewJob]], list[ULID]]


@attrs.frozen
class Settled:
    """One run's settlement as the store wrote it: ``outcome`` is what the journal
    recorded, None when the run was fenced out (it was no longer the run's to settle)."""

    claim: Claim
    settlement: Settlement
    outcome: Outcome | None


class StoreHook:
    """A layer over a store's writes. Subclasses override what they watch; the defaults
    pass the write through and ignore settlements.

    Hooks run in the thread that writes, in the order they were added (the first added
    is the outermost around an enqueue).
    """

    def around_enqueue(
        self,
        jobs: Sequence[NewJob],
        conn: psycopg.Connection[Any] | None,
        write: EnqueueWrite,
    ) -> list[ULID]:
        """Write ``jobs`` by calling ``write`` (with these jobs or changed ones, such as
        with a trace context) exactly once, and return what it returns. ``conn`` is the
        caller's connection, None when the store writes on its own pool (committed once
        ``write`` returns)."""
        return write(jobs)

    def after_settle(self, settled: Sequence[Settled]) -> None:
        """Called once the store wrote ``settled`` (or found them fenced out). Runs whose
        row was busy, to be written again later, or whose write the database refused,
        are not in it."""


@attrs.define(eq=False)
class StoreHooks:
    """The hooks of one store (and of its siblings on the same queue)."""

    _hooks: tuple[StoreHook, ...] = ()
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def add(self, hook: StoreHook) -> None:
        """Register ``hook`` (once: adding it again changes nothing)."""
        with self._lock:
            if hook not in self._hooks:
                self._hooks = (*self._hooks, hook)

    def remove(self, hook: StoreHook) -> None:
        """Unregister ``hook`` (if registered)."""
        with self._lock:
            self._hooks = tuple(h for h in self._hooks if h is not hook)

    def __iter__(self) -> Iterator[StoreHook]:
        return iter(self._hooks)

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def enqueue(
        self,
        jobs: Sequence[NewJob],
        conn: psycopg.Connection[Any] | None,
        write: EnqueueWrite,
    ) -> list[ULID]:
        """``write(jobs)`` inside every hook's `StoreHook.around_enqueue`."""
        hooks = self._hooks
        if not hooks:
            return write(jobs)
        return _around(hooks, jobs, conn, write)

    def settled(self, settled: Sequence[Settled]) -> None:
        """Show ``settled`` to every hook."""
        for hook in self._hooks:
            hook.after_settle(settled)


def _around(
    hooks: tuple[StoreHook, ...],
    jobs: Sequence[NewJob],
    conn: psycopg.Connection[Any] | None,
    write: EnqueueWrite,
) -> list[ULID]:
    first, rest = hooks[0], hooks[1:]
    if not rest:
        return first.around_enqueue(jobs, conn, write)
    return first.around_enqueue(jobs, conn, lambda passed: _around(rest, passed, conn, write))
