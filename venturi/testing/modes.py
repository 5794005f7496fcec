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
from venturi.context import JobContext
from venturi.models import NewJob
from venturi.outcomes import Pause, Retry
from venturi.registry import JobDefinition
from venturi.settlements import Claim, Settlement
from venturi.store.protocol import Store
from venturi.store.wrapper import StoreWrapper
from venturi.worker.transactional import run_inline

INLINE_RUNNER = "inline"


class InlineStore(StoreWrapper):
    """The store of a queue in inline mode: after each committed enqueue, every due job
    runs at once in this thread (`run_due`)."""

    def __init__(
        self, inner: Store, queue: Queue, raise_failures: bool, same_transaction: bool
    ) -> None:
        super().__init__(inner)
        self.queue = queue
        self.raise_failures = raise_failures
        self.same_transaction = same_transaction
        self.suspended = 0  # inside `manual` blocks

    def enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None = None) -> ULID:
        job_id = self.inner.enqueue(job, conn=conn)
        self._run_if_committed(conn)
        return job_id

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        ids = self.inner.enqueue_many(jobs, conn=conn)
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
    found = _inline_store(queue)
    return found is not None and not found.suspended


def run_if_inline(queue: Queue) -> int:
    """In inline mode, run every due job now (`run_due`); returns the number of runs."""
    found = _inline_store(queue)
    if found is None or found.suspended:
        return 0
    return run_due(queue, raise_failures=found.raise_failures)


def _inline_store(queue: Queue) -> InlineStore | None:
    store = queue.store
    while isinstance(store, StoreWrapper):
        if isinstance(store, InlineStore):
            return store
        store = store.inner
    return None


@contextmanager
def inline(
    queue: Queue, *, raise_failures: bool = True, same_transaction: bool = False
) -> Iterator[Queue]:
    """Run each job in the enqueuing thread as it is enqueued, until the block ends.

    Runs go through the real tables as in `Queue.drain`: outcomes, retries and `Pause`
    behave as there (a retry or pause that is due at once runs again at once; a later
    one waits, for `venturi.testing.advance`). A handler's exception (other than
    `Retry` and `Pause`) is raised in the test after its run is recorded, unless
    ``raise_failures`` is False. Each enqueue also runs any other job already due.
    A job enqueued on a caller's connection runs once that transaction is committed
    (at the next enqueue, `advance`, or the end of the block); ``same_transaction``
    says the queue's own store works in that transaction, so it runs at once.
    Not thread-safe: switch modes while no other thread uses the queue.
    """
    if _inline_store(queue) is not None:
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
    if _inline_store(queue) is not None:
        return lambda: None
    wrapper = InlineStore(queue.store, queue, raise_failures, same_transaction)
    queue.store = wrapper

    def stop() -> None:
        # Layers added since (tracing) stay; only the inline one goes.
        queue.store = _without(queue.store, wrapper)

    return stop


@contextmanager
def manual(queue: Queue) -> Iterator[Queue]:
    """Let jobs wait until `queue.drain()` (the default mode), also inside `inline`."""
    found = _inline_store(queue)
    if found is None:
        yield queue
        return
    found.suspended += 1
    try:
        yield queue
    finally:
        found.suspended -= 1


def run_due(queue: Queue, *, raise_failures: bool = True) -> int:
    """Run every due job of the queue's registered kinds in this thread, as `Queue.drain`
    does; returns the number of runs. With ``raise_failures`` a run whose handler raised
    (other than `Retry` and `Pause`) raises that exception once its run is recorded."""
    leases = {kind: d.lease for kind, d in queue.definitions.items()}
    runs = 0
    while leases:
        jobs = queue.store.claim(INLINE_RUNNER, leases, 1)
        if not jobs:
            return runs
        job = jobs[0]
        raised: list[BaseException] = []
        definition = _recording(queue.definitions[job.kind], raised)
        claim = Claim.of(job)

        def extend(claim: Claim = claim, lease: float = leases[job.kind]) -> bool:
            return queue.store.extend_lease([(claim, lease)]).kept(claim.job_id)

        try:
            settlement = run_inline(
                queue.store,
                definition,
                JobContext(
                    job,
                    extend=extend,
                    parents=functools.partial(queue.store.parent_results, job.id),
                ),
            )
        except BaseException:
            queue.store.settle(claim, Settlement.release("inline run interrupted"))
            raise
        if settlement is not None:
            queue.store.settle(claim, settlement)
        runs += 1
        if raised and raise_failures:
            raise raised[0]
    return runs


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
        found = _inline_store(queue)
        if found is not None:
            queue.store = _without(queue.store, found)
    else:
        raise ValueError(f"testing mode must be 'inline' or 'manual', got {mode!r}")


def _without(store: Store, layer: InlineStore) -> Store:
    """``store`` with the inline layer taken out, the layers around it kept."""
    if store is layer:
        return layer.inner
    if not isinstance(store, StoreWrapper):
        return store  # taken out already
    store.inner = _without(store.inner, layer)
    return store
