"""The settler: the one door through which every run of a worker ends.

A handler thread hands the settler its run's settlement (`submit`); the settler's own
thread writes what arrived meanwhile in one statement (`PostgresStore.settle_many`, the
one write of every run's end), on one connection, so a worker's connections do not grow
with its concurrency. Runs whose end was written elsewhere, in the run's own transaction
(a transactional handler's) or with its kind's next claim (a place passed on), are
recorded here too (`record`); a run whose end could not be written is let go (`let_go`).
Events, metrics and the fencing warning follow from here alone.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Final

import attrs

from venturi.durable import waits_for_signal
from venturi.errors import StoreError, StoreUnavailable, first_line
from venturi.events import WorkerEvents
from venturi.models import Outcome
from venturi.settlements import Busy, Settlement
from venturi.store import retrying
from venturi.store.postgres import PostgresStore, Written
from venturi.worker.execution import job_extra
from venturi.worker.held import HeldJob, HeldJobs

logger = logging.getLogger("venturi.worker")

# How long a settlement keeps retrying a passing error before its run is let go.
SETTLE_RETRY_SECONDS: Final = 300.0
_BUSY_BACKOFF: Final = retrying.RetryDelays(base=0.02, cap=1.0)
Spawn = Callable[[str, Callable[[], object]], threading.Thread]
Item = tuple[HeldJob, Settlement]


@attrs.define(eq=False)
class Settler:
    """Writes the ends of a worker's runs from one thread, and records every run's end.

    A flush takes everything submitted while the previous one was in flight (up to
    ``batch_size``), so batching costs no latency when idle and grows with load. A run
    counts as settled only once its settlement committed; until then its claim stays
    held and heartbeated. A write that fails for a passing reason is retried (with
    backoff, for up to ``retry_seconds``, or until ``force`` is set); one whose values the
    database refuses is written by the store as its fallback (the same outcome without
    what was refused, `Settlement.fallback`); one that cannot be written at all is let go
    (the run leaves the held set, its lease lapses and the reaper recovers it). A run
    whose row another session holds locked is set aside and tried again after a short
    wait that grows while it stays locked, without holding up the others. Once the line
    has ended (a straggler at shutdown), `submit` writes in the calling thread.

    A fatal database error met while settling is reported through ``on_fatal``.
    """

    store: PostgresStore
    held: HeldJobs
    events: WorkerEvents
    spawn: Spawn
    force: threading.Event
    on_fatal: Callable[[BaseException], None]
    batch_size: int = attrs.field(default=256, kw_only=True)
    retry_seconds: float = attrs.field(default=SETTLE_RETRY_SECONDS, kw_only=True)
    _queue: queue.SimpleQueue[Item | None] = attrs.field(init=False, factory=queue.SimpleQueue)
    _give_up: threading.Event = attrs.field(init=False, factory=threading.Event)
    _busy_failures: int = attrs.field(init=False, default=0)
    # Runs whose rows were locked, with the monotonic time to try them again.
    _later: list[tuple[float, Item]] = attrs.field(init=False, factory=list)
    _thread: threading.Thread = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._thread = self.spawn("venturi-settler", self._loop)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def submit(self, held: HeldJob, settlement: Settlement) -> None:
        """Have ``held``'s settlement written (or the run let go) from the line's thread;
        once the line has ended, in the caller's thread. Never raises."""
        if self.running:
            self._queue.put((held, settlement))
        else:
            self._settle_here(held, settlement)

    def record(
        self,
        held: HeldJob,
        settlement: Settlement,
        outcome: Outcome | None,
    ) -> None:
        """A run's end committed (``outcome``, the journal's) or was fenced out (None):
        report it and stop holding the run (last, so whoever sees the run gone also sees
        its event and log line)."""
        started = held.started_at if held.started_at is not None else time.monotonic()
        try:
            if outcome is Outcome.PAUSED and waits_for_signal(settlement.facts):
                self._wake_if_signalled(held)
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

    def _wake_if_signalled(self, held: HeldJob) -> None:
        """A durable run suspended waiting for a signal: a signal sent while it still
        held the job woke nothing, so look once more now that the job is pending. A
        failure here only delays the job to its timeout (the signal is kept)."""
        try:
            self.store.wake_signalled(held.claim)
        except Exception:
            logger.exception(
                "could not check job %s for a signal that arrived during its run",
                held.job.id,
                extra=job_extra(held.job),
            )

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
            self.held.let_go(held)

    def stop(self, timeout: float | None) -> None:
        """Flush what was submitted, then end the thread (give up retrying at timeout).
        What was submitted as the thread ended is settled here."""
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            self._give_up.set()
            self._thread.join(5.0)
        if self._thread.is_alive():
            return
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._settle_here(*item)

    # -- the line ---------------------------------------------------------------------

    def _loop(self) -> None:
        """Flush batches until the stop marker (None), then flush what is left and end.

        Only the first item of a batch is waited for (or the first locked run's next
        try), so a flush takes whatever arrived meanwhile; after the marker nothing new
        is waited for, only the locked runs still set aside.
        """
        stopping = False
        while True:
            batch = self._due()
            wait = self._next_try_in()
            while len(batch) < self.batch_size:
                block = not batch and not stopping
                try:
                    item = self._queue.get(block=block, timeout=wait if block else None)
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._flush(batch)
            elif stopping and not self._later:
                return
            elif stopping:
                self._give_up.wait(self._next_try_in() or 0.0)

    def _due(self) -> list[Item]:
        """The locked runs due for another try (all of them once giving up)."""
        now = time.monotonic()
        waiting: list[tuple[float, Item]] = []
        due: list[Item] = []
        for at, item in self._later:
            if at <= now or self._give_up.is_set():
                due.append(item)
            else:
                waiting.append((at, item))
        self._later = waiting
        return due

    def _next_try_in(self) -> float | None:
        if not self._later:
            return None
        return max(0.001, min(at for at, _ in self._later) - time.monotonic())

    def _flush(self, batch: list[Item]) -> None:
        """Write ``batch`` in one statement, retrying passing errors; whatever goes
        wrong, no run of it stays held without a settlement on its way."""
        try:
            written = retrying.retry(
                lambda: self.store.settle_many([(h.claim, s) for h, s in batch]),
                what=f"settling {len(batch)} runs",
                logger=logger,
                deadline=time.monotonic() + self.retry_seconds,
                stop=self._give_up,
            )
        except Exception as exc:
            if not isinstance(exc, StoreError):
                logger.exception("settlement flush failed unexpectedly")
            for held, _ in batch:
                self.let_go(held, exc)
            return
        locked = [item for item, done in zip(batch, written, strict=True) if self._end(item, done)]
        self._set_aside(locked)

    def _end(self, item: Item, written: Written) -> bool:
        """Record what was written for ``item``; True when its row was locked (try again)."""
        held, settlement = item
        if isinstance(written, Busy):
            return True
        if isinstance(written, StoreError):
            self.let_go(held, written)
        else:
            self.record(held, settlement, written)
        return False

    def _set_aside(self, busy: list[Item]) -> None:
        """Try runs whose rows were locked again after a short wait that grows while they
        stay locked (at shutdown, let them go instead)."""
        if not busy:
            self._busy_failures = 0
            return
        if self._give_up.is_set():
            exc = StoreUnavailable("its row stayed locked by another session until shutdown")
            for held, _ in busy:
                self.let_go(held, exc)
            return
        self._busy_failures += 1
        at = time.monotonic() + _BUSY_BACKOFF.delay(self._busy_failures)
        self._later += [(at, item) for item in busy]

    def _settle_here(self, held: HeldJob, settlement: Settlement) -> None:
        """Write one run's end in this thread, retrying passing errors (until ``force``
        is set or ``retry_seconds`` pass) and waiting out a locked row; never raises."""
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
        self.record(held, settlement, outcome)
