"""The test modes: `manual` (the default: jobs wait until `queue.drain()`) and `inline`
(each job runs in the enqueuing thread as it is enqueued)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.client import Queue
from venturi.models import NewJob
from venturi.outcomes import Pause, Retry
from venturi.registry import JobDefinition
from venturi.store.hooks import EnqueueWrite, StoreHook
from venturi.worker.draining import drain

INLINE_RUNNER = "inline"


@attrs.define(eq=False)
class InlineMode(StoreHook):
    """The hook of a queue in inline mode: after each committed write of new jobs (one,
    many, or a workflow's), every due job runs at once in this thread (`run_due`)."""

    queue: Queue
    raise_failures: bool
    same_transaction: bool
    suspended: int = 0  # inside `manual` blocks

    def around_enqueue(
        self,
        jobs: Sequence[NewJob],
        conn: psycopg.Connection[Any] | None,
        write: EnqueueWrite,
    ) -> list[ULID]:
        ids = write(jobs)
        self._run_if_committed(conn)
        return ids

    def _run_if_committed(self, conn: psycopg.Connection[Any] | None) -> None:
        # A job written in a caller's open transaction is invisible to the pool until
        # that commits; it runs at the next enqueue, `advance` or the end of the block.
        # Unless the store works in that very transaction (Django's TestCase).
        if self.suspended:
            return
        idle = conn is None or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if idle or self.same_transaction:
            run_due(self.queue, raise_failures=self.raise_failures)


def is_inline(queue: Queue) -> bool:
    """True while ``queue`` is in inline mode (and not in a `manual` block within it)."""
    found = _inline_mode(queue)
    return found is not None and not found.suspended


def run_if_inline(queue: Queue) -> int:
    """In inline mode, run every due job now (`run_due`); returns the number of runs."""
    found = _inline_mode(queue)
    if found is None or found.suspended:
        return 0
    return run_due(queue, raise_failures=found.raise_failures)


def _inline_mode(queue: Queue) -> InlineMode | None:
    return next((h for h in queue.hooks if isinstance(h, InlineMode)), None)


@contextmanager
def inline(
    queue: Queue, *, raise_failures: bool = True, same_transaction: bool = False
) -> Iterator[Queue]:
    """Run each job in the enqueuing thread as it is enqueued, until the block ends.

    Runs go through the real tables as in `Queue.drain` (by its very runner): outcomes,
    retries and `Pause` behave as there (a retry or pause that is due at once runs
    again at once; a later one waits, for `venturi.testing.advance`), and kinds with
    limits run within them. A workflow's jobs run as they are written, parents first.
    A handler's exception (other than `Retry` and `Pause`) is raised in the test after
    its run is recorded, unless ``raise_failures`` is False. Each enqueue also runs any
    other job already due. A job enqueued on a caller's connection runs once that
    transaction is committed (at the next enqueue, `advance`, or the end of the block);
    ``same_transaction`` says the queue's own store works in that transaction, so it
    runs at once. Not thread-safe: switch modes while no other thread uses the queue.
    """
    if _inline_mode(queue) is not None:
        yield queue
        return
    stop = start_inline(queue, raise_failures=raise_failures, same_transaction=same_transaction)
    try:
        yield queue
    except BaseException:
        stop()
        raise
    stop()
    run_due(queue, raise_failures=raise_failures)


def start_inline(
    queue: Queue, *, raise_failures: bool = True, same_transaction: bool = False
) -> Callable[[], None]:
    """Put ``queue`` in inline mode until the returned function is called (`inline`
    as a context manager does both; this serves settings such as Flask's
    ``VENTURI_TESTING``, which switch a queue for good)."""
    if _inline_mode(queue) is not None:
        return lambda: None
    mode = InlineMode(queue, raise_failures, same_transaction)
    queue.add_hook(mode)
    return functools.partial(queue.remove_hook, mode)


@contextmanager
def manual(queue: Queue) -> Iterator[Queue]:
    """Let jobs wait until `queue.drain()` (the default mode), also inside `inline`."""
    found = _inline_mode(queue)
    if found is None:
        yield queue
        return
    found.suspended += 1
    try:
        yield queue
    finally:
        found.suspended -= 1


def run_due(queue: Queue, *, raise_failures: bool = True) -> int:
    """Run every due job of the queue's registered kinds in this thread, by the runner
    of `Queue.drain`; returns the number of runs. With ``raise_failures`` a run whose
    handler raised (other than `Retry` and `Pause`) raises that exception once its run
    is recorded, and no further job runs."""
    raised: list[BaseException] = []
    definitions = {kind: _recording(d, raised) for kind, d in queue.definitions.items()}

    def raise_failure() -> None:
        if raised and raise_failures:
            raise raised[0]

    return drain(queue.store, definitions, None, 0.0, worker=INLINE_RUNNER, after_run=raise_failure)


def _recording(definition: JobDefinition, raised: list[BaseException]) -> JobDefinition:
    """``definition`` with a handler that notes what it raised (but Retry and Pause)."""
    func = definition.func

    @functools.wraps(func)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (Retry, Pause):
            raise
        except Exception as exc:
            raised.append(exc)
            raise

    handler: Callable[..., Any] = recorded
    return attrs.evolve(definition, func=handler)


def set_mode(queue: Queue, mode: str, *, same_transaction: bool = False) -> None:
    """Switch ``queue`` to ``mode`` for good: ``"inline"`` or ``"manual"`` (the test
    settings ``VENTURI_TESTING`` of Flask and ``VENTURI["TESTING"]`` of Django)."""
    if mode == "inline":
        start_inline(queue, same_transaction=same_transaction)
    elif mode == "manual":
        found = _inline_mode(queue)
        if found is not None:
            queue.remove_hook(found)
    else:
        raise ValueError(f"testing mode must be 'inline' or 'manual', got {mode!r}")
