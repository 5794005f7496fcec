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

from venturi.settlements import SettleAction, Settlement
from venturi.store.protocol import Store
from venturi.worker.execution import execute, job_extra
from venturi.worker.held import HeldJob

logger = logging.getLogger("venturi.worker")


class Committed(enum.Enum):
    """What became of a transactional run's transaction."""

    COMPLETED = "completed"  # the handler's writes and the completion committed
    FENCED = "fenced"  # the completion's fence no longer held: all rolled back
    ROLLED_BACK = "rolled back"  # the handler did not complete: settle as any run
    UNKNOWN = "unknown"  # the completion or commit failed: let the run go


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


@attrs.define(eq=False)
class Transactions:
    """Runs transactional handlers; opens, on the first such run, a pool of its own of
    ``concurrency`` connections (one per handler thread), so runs holding a transaction
    never starve the worker's claims and settlements. Workers without transactional
    kinds never open it."""

    store: Store
    concurrency: int
    on_returned: Callable[[HeldJob], None]
    _own: Store | None = attrs.field(init=False, default=None)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)

    def run(self, held: HeldJob) -> TransactionalOutcome:
        """Run ``held``'s handler in a transaction and commit its completion with it.

        A handler that does not complete (it raised, asked to retry, pause or fail)
        has its writes rolled back, and its settlement is returned to be applied as any
        run's (``ROLLED_BACK``). Raises only what `execute` lets through."""
        settlement = Settlement.release()
        try:
            with self._open(held) as conn:
                held.ctx.bind(conn)
                try:
                    settlement = execute(held.definition, held.ctx)
                finally:
                    held.ctx.bind(None)
                self.on_returned(held)
                if settlement.action is not SettleAction.COMPLETE:
                    raise _RollBack(Committed.ROLLED_BACK)
                if not self.store.complete_in(conn, held.claim, settlement):
                    raise _RollBack(Committed.FENCED)
        except _RollBack as back:
            return TransactionalOutcome(settlement, back.committed)
        except Exception as exc:
            # Either side of the commit: the lease lapses and the fence decides. If it
            # committed, the job is completed; if not, the reaper takes it back.
            logger.error(
                "transactional job %s (%s) run %d: its transaction failed (%s)",
                held.job.id,
                held.job.kind,
                held.job.run_count,
                exc,
                extra=job_extra(held.job),
            )
            return TransactionalOutcome(settlement, Committed.UNKNOWN, exc)
        return TransactionalOutcome(settlement, Committed.COMPLETED)

    def _open(self, held: HeldJob) -> AbstractContextManager[psycopg.Connection[Any]]:
        if held.definition.transaction is not None:
            return held.definition.transaction()
        return self._own_transaction()

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
