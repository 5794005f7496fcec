"""Applying a run's settlement, and what follows: events, bookkeeping, fencing warnings."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

import attrs

from venturi.errors import StoreError, first_line
from venturi.events import WorkerEvents
from venturi.models import JobRecord, Outcome
from venturi.settlements import Settlement
from venturi.store import retrying
from venturi.store.protocol import Store
from venturi.worker.execution import job_extra
from venturi.worker.held import HeldJob, HeldJobs

logger = logging.getLogger("venturi.worker")

# How long a settlement keeps retrying a passing error before its run is let go.
SETTLE_RETRY_SECONDS: Final = 300.0


@attrs.define(eq=False)
class Settler:
    """Records every settled run (`settled`, the `Completer`'s callback) and settles a
    run in the calling thread (`settle`) once the completer's line has ended (a
    straggler at shutdown): while it runs, the completer writes every settlement.

    Every held run ends here: settled (applied, or fenced out because the run lost its
    claim, logged as a warning), or let go (`let_go`) when its settlement could not be
    written, so that the heartbeat stops renewing it, its lease lapses and the reaper
    recovers the job. A fatal database error is also reported through ``on_fatal``.
    """

    store: Store
    held: HeldJobs
    events: WorkerEvents
    force: threading.Event
    on_fatal: Callable[[BaseException], None]
    retry_seconds: float = attrs.field(default=SETTLE_RETRY_SECONDS, kw_only=True)
    # Told of each settled run's job (a run of a limited kind frees a place).
    on_run_ended: Callable[[JobRecord], None] | None = attrs.field(default=None, kw_only=True)

    def settle(self, held: HeldJob, settlement: Settlement) -> None:
        """Apply ``settlement``, retrying passing errors (until ``force`` is set or
        ``retry_seconds`` pass); never raises."""
        try:
            outcome = retrying.retry(
                lambda: self.store.settle(held.claim, settlement),
                what=f"settling job {held.job.id} ({settlement.action.value})",
                logger=logger,
                deadline=time.monotonic() + self.retry_seconds,
                stop=self.force,
            )
        except Exception as exc:
            self.let_go(held, exc)
            return
        self.settled(held, settlement, outcome)

    def let_go(self, held: HeldJob, exc: BaseException) -> None:
        """Stop holding a run whose settlement could not be written: its lease lapses
        and the reaper takes the job back."""
        try:
            logger.error(
                "could not settle job %s (%s) run %d: %s; letting its lease lapse",
                held.job.id,
                held.job.kind,
                held.job.run_count,
                first_line(exc),
                exc_info=not isinstance(exc, StoreError),
                extra=job_extra(held.job),
            )
            if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                self.on_fatal(exc)
        finally:
            self.held.remove(held)

    def settled(
        self,
        held: HeldJob,
        settlement: Settlement,
        outcome: Outcome | None,
        *,
        place_passed: bool = False,
    ) -> None:
        """A settlement committed (``outcome``, the journal's) or was fenced out (None):
        stop holding the run (last, so whoever sees the run gone also sees its event and
        log line). ``place_passed``: the run's place went to the next job of its kind, so
        no place opened and nobody is told of one."""
        started = held.started_at if held.started_at is not None else time.monotonic()
        try:
            self.events.job_settled(held.job, settlement, outcome, time.monotonic() - started)
            if outcome is None:
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
        if self.on_run_ended is not None and not place_passed:
            self.on_run_ended(held.job)
