"""The handler threads: take a claimed run, run it, hand its end to the settler.

`Runner` runs one held run in the calling thread and returns how it ended (one
`Settlement`, and for a transactional run what became of its transaction); `HandlerLoop`
is what each handler thread runs, passing every run's end to the one door,
`venturi.worker.settler.Settler` (or, for a completion whose place passes on, to
`PlacePassing`, which writes it through the same statement).
"""

from __future__ import annotations

import logging
import queue
import threading
import time

import attrs

from venturi.events import WorkerEvents
from venturi.models import Outcome
from venturi.settlements import Settlement
from venturi.worker.deadlines import Deadlines
from venturi.worker.dispatcher import Dispatcher
from venturi.worker.execution import execute, failed, job_extra
from venturi.worker.held import HeldJob, HeldJobs
from venturi.worker.passing import PlacePassing
from venturi.worker.settler import Settler
from venturi.worker.transactional import Committed, TransactionalOutcome, Transactions

logger = logging.getLogger("venturi.worker")


@attrs.define(eq=False)
class Runner:
    """Runs one held run in the calling thread: marks it started, watches its deadline,
    calls its handler (in a transaction of its own for a transactional kind) and marks it
    ended. Never raises for what the handler does."""

    held: HeldJobs
    deadlines: Deadlines
    events: WorkerEvents
    transactions: Transactions

    def run(self, held: HeldJob) -> TransactionalOutcome:
        """Run ``held``; its settlement, and what became of its transaction (a run that
        is not transactional is ``ROLLED_BACK``: its end is still to be written)."""
        self.held.mark_started(held)
        self.deadlines.add(held)
        job = held.job
        self.events.job_started(job, max(0.0, time.time() - job.visible_at.timestamp()))
        try:
            if held.definition.transactional:
                ran = self.transactions.run(held)
            else:
                ran = TransactionalOutcome(
                    execute(held.definition, held.ctx), Committed.ROLLED_BACK
                )
        except BaseException as exc:
            # SystemExit from a handler (sys.exit) would end this thread for good and
            # shrink the pool; it is the handler's failure like any exception.
            ran = TransactionalOutcome(
                failed(held.definition, held.ctx, exc), Committed.ROLLED_BACK
            )
        self.held.mark_ended(held)
        return ran


@attrs.define(kw_only=True)
class HandlerLoop:
    """What every handler thread runs (`run`), until it takes the stop marker (None).

    A run's path: the dispatcher queues it on ``ready``; here the `Runner` runs it, and
    its end goes to the settler (which writes every run's end), or, for a completion of
    a kind whose places pass on, to `PlacePassing`, whose next job of the kind this
    thread runs next. Whatever fails around the handler, the run is let go rather than
    left held. A run taken while the worker is stopping is handed back unstarted.
    """

    ready: queue.SimpleQueue[HeldJob | None]
    dispatcher: Dispatcher
    runner: Runner
    settler: Settler
    passing: PlacePassing
    stopping: threading.Event

    def run(self) -> None:
        while True:
            taken = self.ready.get()
            if taken is None:
                return
            # A run that passed its place on hands over the next job of its kind.
            held: HeldJob | None = taken
            while held is not None:
                current = held
                if self.stopping.is_set():
                    self.release_unstarted(current)
                    break
                try:
                    held = self._handle(current)
                except Exception as exc:
                    logger.exception(
                        "handling job %s failed", current.job.id, extra=job_extra(current.job)
                    )
                    self.settler.let_go(current, exc)
                    held = None

    def release_queued(self) -> int:
        """Hand back every run still waiting in ``ready`` (the worker is stopping)."""
        released = 0
        while True:
            try:
                held = self.ready.get_nowait()
            except queue.Empty:
                return released
            if held is not None:
                self.release_unstarted(held)
                released += 1

    def release_unstarted(self, held: HeldJob) -> None:
        """Hand back a claimed run that never started (journal ``released``)."""
        self.dispatcher.slot_freed()
        self.settler.submit(held, Settlement.release("worker stopping; never started"))

    def _handle(self, held: HeldJob) -> HeldJob | None:
        """Run ``held`` and hand its end on; returns the next job of its kind when its
        place was passed on to one (`PlacePassing`)."""
        taken = time.monotonic()
        ran = self.runner.run(held)
        settlement = ran.settlement
        if self.passing.wanted(held, settlement):
            return self.passing.finish(held, settlement, time.monotonic() - taken)
        self.dispatcher.slot_freed(time.monotonic() - taken)
        if ran.committed is Committed.COMPLETED:
            self.settler.record(held, settlement, Outcome.COMPLETED)
        elif ran.committed is Committed.FENCED:
            self.settler.record(held, settlement, None)
        elif ran.committed is Committed.UNKNOWN:
            self.settler.let_go(held, ran.error or RuntimeError("transaction failed"))
        else:
            self.settler.submit(held, settlement)
        return None


def stop_timed_out(held: HeldJob) -> None:
    """A run passed its timeout (`Deadlines`' callback): ask it to stop, and renew its
    lease no more."""
    held.lapsing = True
    held.ctx.stopping.set()
    logger.warning(
        "job %s (%s) passed its %ss timeout; stopping it and letting its lease lapse",
        held.job.id,
        held.job.kind,
        held.definition.timeout,
        extra=job_extra(held.job),
    )
