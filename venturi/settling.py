"""Applying a run's settlement, and what follows: events, bookkeeping, fencing warnings."""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

from venturi.errors import StoreUnavailable
from venturi.events import WorkerEvents
from venturi.execution import job_extra
from venturi.models import Settlement
from venturi.running import HeldJob, HeldJobs
from venturi.store import Store

logger = logging.getLogger("venturi.worker")

SETTLE_ATTEMPTS: Final = 50


class Settler:
    """Settles held runs one at a time (`settle`) and records every settled run
    (`settled`, also the `Completer`'s callback for batched completions).

    A settlement the database fences out (the run lost its claim: cancelled, reaped,
    taken over) changes nothing and is logged as a warning, never dropped silently.
    """

    def __init__(
        self, store: Store, held: HeldJobs, events: WorkerEvents, force: threading.Event
    ) -> None:
        self.store = store
        self.held = held
        self.events = events
        self.force = force

    def settle(self, held: HeldJob, settlement: Settlement) -> None:
        """Apply ``settlement``, retrying through an outage (until ``force`` is set)."""
        failures = 0
        while True:
            try:
                applied = self.store.settle(held.claim, settlement)
                break
            except StoreUnavailable as exc:
                failures += 1
                if self.force.is_set() or held.lost or failures > SETTLE_ATTEMPTS:
                    logger.error(
                        "could not settle job %s (%s): %s; its lease will lapse",
                        held.job.id,
                        held.job.kind,
                        exc,
                        extra=job_extra(held.job),
                    )
                    self.held.remove(held)
                    return
                self.force.wait(min(0.1 * 2**failures, 5.0))
        self.settled(held, settlement, applied)

    def settled(self, held: HeldJob, settlement: Settlement, applied: bool) -> None:
        """A settlement committed (``applied``) or was fenced out: stop holding the run
        (last, so whoever sees the run gone also sees its event and log line)."""
        started = held.started_at if held.started_at is not None else time.monotonic()
        try:
            self.events.job_settled(held.job, settlement, applied, time.monotonic() - started)
            if not applied:
                logger.warning(
                    "fenced: job %s (%s) run %d tried to settle as %s after losing its claim; "
                    "nothing changed",
                    held.job.id,
                    held.job.kind,
                    held.job.run_count,
                    settlement.action.value,
                    extra=job_extra(held.job),
                )
        finally:
            self.held.remove(held)
