"""Passing a place on: a completed run of a kind with a global concurrency (and no key or
rate limit) claims its kind's next job in the transaction that completes it, and its
handler thread runs that job next. The place never becomes free in between, so no other
worker has to be woken and take the kind's turn to fill it, and the limit still holds in
SQL: the transaction swaps one claimed job for at most one
(`PostgresStore.settle_and_pass`)."""

from __future__ import annotations

import logging
import queue
import threading

import attrs

from venturi.errors import StoreError
from venturi.settlements import Busy, SettleAction, Settlement
from venturi.worker.dispatcher import Dispatcher
from venturi.worker.execution import job_extra
from venturi.worker.held import HeldJob
from venturi.worker.settler import Settler

logger = logging.getLogger("venturi.worker")


@attrs.define(eq=False)
class PlacePassing:
    """Completes a handler's finished run of a kind in `FlowView.passed` itself (not in
    the settler's batch) and claims the kind's next job in the same transaction.

    `finish` returns that job, held by the worker and occupying the finished run's slot,
    or None when there was none (the slot and the place are free: the other workers are
    woken as before). A fenced completion claims nothing; a completion whose row another
    session holds locked goes to the settler's line, which tries it again later; one the
    database could not take is settled the usual way, retrying. The transaction runs on
    a connection of the queue's pool, from the handler thread: a worker's passes run side
    by side, and there are never more of them than the kind's running jobs (its limit),
    so a limited kind adds at most its limit to the worker's connections.
    """

    dispatcher: Dispatcher
    settler: Settler
    ready: queue.SimpleQueue[HeldJob | None]
    stopping: threading.Event

    def wanted(self, held: HeldJob, settlement: Settlement) -> bool:
        """Whether this run's end may pass its place on: a completion still to be written
        (not a transactional run's) of a kind with a global concurrency and no other limit,
        while the worker is not stopping. (A key limit frees a place of one key, a rate
        none; their claims must take the kind's turn, and those kinds keep batched
        completions.)

        Only while no claimed job waits for a handler thread and, for a worker of more
        kinds, a slot is free for the dispatcher: a thread that kept passing places on
        must not keep other kinds' jobs (of a higher priority, say) from every slot."""
        kind = held.job.kind
        dispatcher = self.dispatcher
        # A transactional run's completion is written (or fenced) already, in its own
        # transaction: no completion is left to pass a place on with.
        return (
            settlement.action is SettleAction.COMPLETE
            and not held.definition.transactional
            and kind in dispatcher.flow.passed
            and not self.stopping.is_set()
            and self.ready.empty()
            and (dispatcher.leases.keys() == {kind} or dispatcher.free_slots() > 0)
        )

    def finish(self, held: HeldJob, settlement: Settlement, ran_for: float) -> HeldJob | None:
        """Complete ``held`` (which ran for ``ran_for`` seconds) and return the kind's
        next job, claimed in the same transaction, or None. Never raises."""
        with self.dispatcher.claiming_outside():
            return self._finish(held, settlement, ran_for)

    def _finish(self, held: HeldJob, settlement: Settlement, ran_for: float) -> HeldJob | None:
        kind = held.job.kind
        dispatcher = self.dispatcher
        lease, floor = dispatcher.leases[kind], dispatcher.priority_floor
        try:
            # Side by side on the pool: through the settling line's one connection, one
            # at a time, a kind limited to 8 drained at 0.6x.
            written, jobs = dispatcher.store.settle_and_pass(
                held.claim, settlement, kind, lease, floor
            )
        except Exception as exc:
            dispatcher.claim_failed(exc)  # the next job may be claimed all the same
            logger.warning(
                "could not complete job %s and claim the next %s job at once (%s); "
                "completing it alone",
                held.job.id,
                kind,
                exc,
                extra=job_extra(held.job),
            )
            dispatcher.slot_freed(ran_for)
            self.settler.submit(held, settlement)
            return None
        if isinstance(written, Busy):
            dispatcher.slot_freed(ran_for)
            self.settler.submit(held, settlement)
            return None
        passed = dispatcher.adopt(jobs[0]) if jobs else None
        if passed is None:
            dispatcher.slot_freed(ran_for)
        else:
            dispatcher.slot_passed(ran_for)
        try:
            if isinstance(written, StoreError):
                self.settler.let_go(held, written)
            else:
                self.settler.record(held, settlement, written)
        except Exception:
            logger.exception("recording the completion of job %s failed", held.job.id)
        return passed
