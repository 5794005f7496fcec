"""Transactional runs: the handler's writes on ``ctx.conn`` and the job's completion commit
in one transaction, or neither does.

The job's row is locked only by the completion, written just before the commit: while
the handler runs, the heartbeat renews the lease on its own connection unhindered. The
completion is fenced like every settlement (owner, run epoch, status) and also by the
lease itself, so a transaction that outlived its lease, or whose job was cancelled or
taken over, rolls back with everything the handler wrote.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import attrs
import psycopg

from venturi.context import JobContext
from venturi.registry import JobDefinition
from venturi.settlements import Claim, SettleAction, Settlement
from venturi.store.postgres import PostgresStore
from venturi.worker.execution import execute, failed, job_extra
from venturi.worker.held import HeldJob

logger = logging.getLogger("venturi.worker")


class Committed(enum.Enum):
    """What became of a transactional run's transaction."""

    COMPLETED = "completed"  # the handler's writes and the completion committed
    FENCED = "fenced"  # the completion's fence no longer held: all rolled back
    ROLLED_BACK = "rolled back"  # the handler did not complete: settle as any run
    UNKNOWN = "unknown"  # opening or committing the transaction failed: let the run go


@attrs.frozen
class TransactionalOutcome:
    settlement: Settlement
    committed: Committed
    error: BaseException | None = None


class _RollBack(Exception):
    """Leaves the transaction's block so that it rolls back."""

    def __init__(self, committed: Committed) -> None:
        super().__init__(committed.value)
        self.committed = committed


def run_transaction(
    store: PostgresStore,
    definition: JobDefinition,
    ctx: JobContext,
    opened: AbstractContextManager[psycopg.Connection[Any]],
    on_returned: Callable[[], None] = lambda: None,
) -> TransactionalOutcome:
    """Run ``ctx.job``'s handler in the transaction ``opened`` begins, and commit its
    completion with it (``on_returned`` is called once the handler returned).

    A handler that does not complete (it raised, asked to retry, pause or fail) has its
    writes rolled back, and its settlement is returned to be applied as any run's
    (``ROLLED_BACK``). Raises only what `execute` lets through."""
    job = ctx.job
    settlement = Settlement.release()
    try:
        with opened as conn:
            ctx.bind(conn)
            try:
                settlement = execute(definition, ctx)
            finally:
                ctx.bind(None)
            on_returned()
            if settlement.action is not SettleAction.COMPLETE:
                raise _RollBack(Committed.ROLLED_BACK)
            try:
                # The one statement of every run's end, in this transaction: it applies
                # only while the run's lease holds, and commits with the handler's writes.
                applied = store.settle(Claim.of(job), settlement, conn) is not None
            except Exception as exc:
                # Refused before the commit (a transaction the handler left aborted, a
                # lost connection): nothing committed, so the run failed like any other.
                settlement = failed(definition, ctx, exc)
                raise _RollBack(Committed.ROLLED_BACK) from exc
            if not applied:
                raise _RollBack(Committed.FENCED)
    except _RollBack as back:
        return TransactionalOutcome(settlement, back.committed)
    except Exception as exc:
        # Opening or committing failed, and a commit may have landed: the lease lapses
        # and the fence decides. Completed if it did; if not, the reaper takes it back.
        logger.error(
            "transactional job %s (%s) run %d: its transaction failed (%s)",
            job.id,
            job.kind,
            job.run_count,
            exc,
            extra=job_extra(job),
        )
        return TransactionalOutcome(settlement, Committed.UNKNOWN, exc)
    return TransactionalOutcome(settlement, Committed.COMPLETED)


def run_inline(
    store: PostgresStore, definition: JobDefinition, ctx: JobContext
) -> Settlement | None:
    """Run a claimed job's handler in this thread (`Queue.drain`, the inline test mode):
    the settlement left to apply, or None when its transactional run already committed
    its completion, was fenced, or was let go (its lease lapses)."""
    if not definition.transactional:
        return execute(definition, ctx)
    opened = (definition.transaction or store.transaction)()
    ran = run_transaction(store, definition, ctx, opened)
    return ran.settlement if ran.committed is Committed.ROLLED_BACK else None


@attrs.define(eq=False)
class Transactions:
    """Runs the worker's transactional handlers. On the first run in a transaction of
    the worker's own, it opens a pool of ``concurrency`` connections (one per handler
    thread), so runs holding a transaction never starve the worker's claims and
    settlements; workers without such kinds never open it."""

    store: PostgresStore
    concurrency: int
    on_returned: Callable[[HeldJob], None]
    _own: PostgresStore | None = attrs.field(init=False, default=None)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)

    def run(self, held: HeldJob) -> TransactionalOutcome:
        """`run_transaction` for a held run."""
        source = held.definition.transaction or self._own_transaction
        return run_transaction(
            self.store, held.definition, held.ctx, source(), lambda: self.on_returned(held)
        )

    @contextmanager
    def _own_transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            if self._own is None:
                self._own = self.store.sibling(pool_size=self.concurrency)
            own = self._own
        with own.transaction() as conn:
            yield conn

    def close(self) -> None:
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.close()
