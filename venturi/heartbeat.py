"""The heartbeat: renews the leases of held jobs and notices lost or timed-out runs."""

from __future__ import annotations

import logging
import time

from venturi.events import WorkerEvents
from venturi.execution import job_extra
from venturi.running import HeldJob, HeldJobs
from venturi.store import Store

logger = logging.getLogger("venturi.worker")


class Heartbeat:
    """One `run_once` renews every held lease in a single statement.

    It runs on a store with a connection of its own, so handlers that keep the main pool
    busy cannot starve it. A run past its timeout gets ``stopping`` set and its lease is
    left to lapse; a lease the database no longer grants (cancelled, taken over) sets
    ``stopping`` and marks the run lost, so its late settlement is expected to be fenced.
    """

    def __init__(self, store: Store, held: HeldJobs, events: WorkerEvents) -> None:
        self.store = store
        self.held = held
        self.events = events

    def run_once(self) -> tuple[int, int]:
        """Renew leases; return (renewed, lost)."""
        now = time.monotonic()
        renewing: list[HeldJob] = []
        for held in self.held.snapshot():
            if held.lost or held.lapsing:
                continue
            if held.deadline is not None and now >= held.deadline and not held.ended:
                held.lapsing = True
                held.ctx.stopping.set()
                logger.warning(
                    "job %s (%s) passed its %ss timeout; stopping it and letting its lease lapse",
                    held.job.id,
                    held.job.kind,
                    held.definition.timeout,
                    extra=job_extra(held.job),
                )
                continue
            renewing.append(held)
        if not renewing:
            return 0, 0
        kept = self.store.extend_lease([(h.claim, h.definition.lease) for h in renewing])
        lost = 0
        for held in renewing:
            # A run whose handler returned may have settled between our snapshot and the
            # renewal: that is no loss. If it was one, its settlement is fenced and logged.
            if held.job.id not in kept and not held.ended and self.held.get(held.job.id) is held:
                lost += 1
                self.mark_lost(held)
        return len(renewing) - lost, lost

    def extend_one(self, held: HeldJob) -> bool:
        """Renew one lease now (`JobContext.extend_lease`)."""
        if held.lost:
            return False
        kept = self.store.extend_lease([(held.claim, held.definition.lease)])
        if held.job.id not in kept:
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
