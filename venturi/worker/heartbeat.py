"""The heartbeat: renews the leases of held jobs and notices lost or timed-out runs."""

from __future__ import annotations

import logging

import attrs

from venturi.errors import StoreUnavailable
from venturi.events import WorkerEvents
from venturi.loops import IntervalLoop
from venturi.observations import WorkerPresence
from venturi.store.postgres import PostgresStore
from venturi.worker.execution import job_extra
from venturi.worker.held import HeldJob, HeldJobs

logger = logging.getLogger("venturi.worker")


@attrs.define(eq=False)
class Leases:
    """Renews leases: many in one statement (`renew`) or one at once (`extend_one`,
    behind `JobContext.extend_lease`).

    It runs on a store with a connection of its own, so handlers that keep the main pool
    busy cannot starve it. A lease the database no longer grants (cancelled, taken over)
    sets ``stopping`` and marks the run lost, so its late settlement is expected to be
    fenced. A row another session holds locked is skipped, not waited for, and renewed
    at a later beat.
    """

    store: PostgresStore
    events: WorkerEvents

    def renew(self, renewing: list[HeldJob], held: HeldJobs) -> tuple[int, int]:
        """Renew the leases of ``renewing`` (runs of ``held``); returns (renewed, lost)."""
        if not renewing:
            return 0, 0
        outcome = self.store.extend_lease([(h.claim, h.definition.lease) for h in renewing])
        lost = 0
        for run in renewing:
            # A run whose handler returned may have settled between our snapshot and the
            # renewal: that is no loss. If it was one, its settlement is fenced and logged.
            if not outcome.kept(run.job.id) and not run.ended and held.get(run.job.id) is run:
                lost += 1
                self.mark_lost(run)
        return len(outcome.applied), lost

    def extend_one(self, held: HeldJob) -> bool:
        """Renew one lease now; False if it was lost (a row locked by another session
        counts as kept: it was not taken from this run)."""
        if held.lost:
            return False
        outcome = self.store.extend_lease([(held.claim, held.definition.lease)])
        if not outcome.kept(held.job.id):
            self.mark_lost(held)
            return False
        return True

    def mark_lost(self, held: HeldJob) -> None:
        held.lost = True
        held.ctx.stopping.set()
        self.events.lease_lost(held.job)
        logger.warning(
            "job %s (%s) run %d lost its lease (cancelled or taken over); asking it to stop",
            held.job.id,
            held.job.kind,
            held.job.run_count,
            extra=job_extra(held.job),
        )


@attrs.define(eq=False)
class Heartbeat:
    """One `run_once` renews every held lease in a single statement, then beats in the
    worker registry. A run past its timeout (``lapsing``, see `venturi.worker.deadlines`)
    is not renewed, so its lease lapses."""

    leases: Leases
    held: HeldJobs
    # Written into the worker registry after each renewal (`venturi workers`).
    presence: WorkerPresence | None = None

    def run_once(self) -> tuple[int, int]:
        """Renew leases, then beat in the worker registry; return (renewed, lost)."""
        held = self.held.snapshot()
        renewed = self.leases.renew([h for h in held if not (h.lost or h.lapsing)], self.held)
        if self.presence is not None:
            self.leases.store.beat_worker(self.presence, sum(1 for h in held if h.running))
        return renewed

    def loop(self, every: float) -> IntervalLoop:
        """The loop that beats every ``every`` seconds, the first time at once (so the
        worker shows in the registry as it starts)."""
        # After a failed beat, try again within one interval: leases will not wait.
        return IntervalLoop(
            "venturi-heartbeat", self.run_once, every, logger, backoff_cap=every, paced=True
        )

    def leave(self) -> None:
        """Remove this worker from the registry (it is stopping); if the database is
        unreachable its row expires instead."""
        if self.presence is None:
            return
        try:
            self.leases.store.leave_worker(self.presence.name)
        except StoreUnavailable as exc:
            logger.warning("could not leave the worker registry (%s); its row expires", exc)
