"""The dispatcher: claims jobs into a worker's free slots and sleeps on the listener."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Final

import attrs

from venturi.errors import StoreError, StoreUnavailable
from venturi.flow.view import FlowView
from venturi.models import JobRecord
from venturi.store import retrying
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore
from venturi.worker.execution import job_extra
from venturi.worker.held import HeldJob, HeldJobs
from venturi.worker.prefetch import Prefetch

logger = logging.getLogger("venturi.worker")

PROBE_TIMEOUT: Final = 2.0
# A due job we could not claim is locked by another transaction (a peer's claim in
# flight, or a caller's open transaction); waiting a moment instead of zero keeps the
# dispatcher from spinning until that lock goes. New work still wakes it by NOTIFY.
MIN_IDLE_WAIT: Final = 0.05
CLAIM_BACKOFF: Final = retrying.RetryDelays(base=1.0, cap=5.0)
# Due jobs of a limited kind left unclaimed wait for a place: a run's end announces it by
# NOTIFY and a rate's next room is computed; this is the fallback when neither comes.
FLOW_RECHECK: Final = 1.0


@attrs.define(eq=False, kw_only=True)
class Dispatcher:
    """Claims up to the free slots in one statement and queues the jobs for handlers.

    Slots: ``capacity`` jobs may be claimed and not yet finished running (running, or
    prefetched and waiting for a handler thread). With no slot free it waits for one;
    with slots free and nothing claimable it blocks on the notifier until a NOTIFY, the
    next job's visibility time or ``poll_interval``, whichever comes first. A notifier
    that reconnected returns at once, so a claim pass follows every reconnect.

    A claim whose answer was lost (the connection broke, the server shut down while
    its commit waited for a synchronous standby) may have committed: its jobs are then
    claimed under this worker's name and held by nobody. After such a claim, the next
    claim pass that succeeds looks them up and adopts them (`adopt_unknown_claims`), so
    they run now rather than wait out their lease.
    """

    store: PostgresStore = attrs.field(kw_only=False)
    notifier: PostgresNotifier = attrs.field(kw_only=False)
    held: HeldJobs
    name: str
    leases: dict[str, float]
    flow: FlowView
    concurrency: int
    prefetch: Prefetch
    priority_floor: int | None
    poll_interval: float
    _ready: queue.SimpleQueue[HeldJob | None]
    _stopping: threading.Event
    listening: bool = attrs.field(init=False, default=False)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)
    _busy: int = attrs.field(init=False, default=0)
    _slot_freed: threading.Event = attrs.field(init=False, factory=threading.Event)
    _probed: bool = attrs.field(init=False, default=False)
    # A claim's answer was lost: jobs may be claimed in this worker's name that it does
    # not hold (set from any thread that claims; cleared by the dispatcher's thread).
    _unsure: bool = attrs.field(init=False, default=False)
    # Claims outside a claim pass (`claiming_outside`) running now, and started so far.
    _outside: int = attrs.field(init=False, default=0)
    _outside_started: int = attrs.field(init=False, default=0)

    def run(self) -> None:
        """The dispatcher thread's body: until ``stopping`` is set. A fatal database
        error ends it by raising (the worker's supervisor stops the worker)."""
        if not self._probed:
            self._probe()
        failures = 0
        while not self._stopping.is_set():
            try:
                asked, got = self.claim_pass()
                if self._unsure:
                    got += self.adopt_unknown_claims()
                failures = 0
            except Exception as exc:
                if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                    raise
                self.claim_failed(exc)
                failures += 1
                if failures == 1 and retrying.outcome_unknown(exc):
                    # A connection lost (after a restart, one another thread held while
                    # the store checked the pool's idle ones): claim again at once.
                    continue
                if isinstance(exc, StoreUnavailable):
                    logger.warning("claim failed: %s; retrying", exc)
                else:
                    logger.exception("claim pass failed; retrying")
                self._stopping.wait(CLAIM_BACKOFF.delay(failures))
                continue
            if asked == 0:
                self._slot_freed.wait(self.poll_interval)
                self._slot_freed.clear()
            elif got < asked:
                if not self._probed and self.notifier.connected:
                    self._probe()  # the listener was down at start; prove it now
                self.notifier.wait(self.idle_timeout())

    def wake(self) -> None:
        """Interrupt any wait (used when stopping)."""
        self._slot_freed.set()
        self.notifier.wake()

    def slot_freed(self, ran_for: float | None = None) -> None:
        """A claimed job finished running after ``ran_for`` seconds (None: handed back
        unstarted): one more slot is free."""
        if ran_for is not None:
            self.prefetch.observe_run(ran_for)
        with self._lock:
            self._busy -= 1
        self._slot_freed.set()

    def slot_passed(self, ran_for: float) -> None:
        """A claimed job finished running after ``ran_for`` seconds and its slot went
        straight to the next job of its kind (`venturi.worker.passing`): none is free."""
        self.prefetch.observe_run(ran_for)

    def claim_failed(self, exc: BaseException) -> None:
        """A claim (of a pass, or outside one) raised ``exc``: if it may have committed,
        look for jobs claimed in this worker's name that it does not hold, after the next
        claim pass that succeeds."""
        if retrying.outcome_unknown(exc):
            self._unsure = True
            self.notifier.wake()

    @contextlib.contextmanager
    def claiming_outside(self) -> Iterator[None]:
        """Around a claim outside a claim pass (a place passed on), from its statement
        until its job is held: `adopt_unknown_claims` must not take that job, claimed in
        this worker's name and not held yet, for one whose claim's answer was lost."""
        with self._lock:
            self._outside += 1
            self._outside_started += 1
        try:
            yield
        finally:
            with self._lock:
                self._outside -= 1

    def adopt_unknown_claims(self) -> int:
        """Hold and queue the jobs claimed in this worker's name that it does not hold
        (claims whose answer was lost); returns how many. Tried again after the next
        claim pass while a claim outside a pass was running meanwhile.

        The runs held are read before the claimed jobs: a run settled in between is held
        in the first reading or no longer claimed in the second, never taken for unknown;
        nor is a run let go (its settlement could not be written) that awaits the reaper."""
        with self._lock:
            if self._outside:
                return 0
            started = self._outside_started
            known = self.held.known()
        claimed = self.store.claimed_by(self.name)
        with self._lock:
            if self._outside or self._outside_started != started:
                return 0
            unknown = [job for job in claimed if (job.id, job.run_count) not in known]
            self._busy += len(unknown)
            self._unsure = False
        for job in unknown:
            logger.warning(
                "job %s (%s) run %d was claimed for this worker by a claim whose answer "
                "was lost; running it",
                job.id,
                job.kind,
                job.run_count,
                extra=job_extra(job),
            )
            self._ready.put(self.held.hold(job))
        return len(unknown)

    def free_slots(self) -> int:
        """Slots no claimed job holds now."""
        with self._lock:
            return self.capacity - self._busy

    def adopt(self, job: JobRecord) -> HeldJob:
        """Hold ``job``, claimed outside a claim pass (its place passed on), as this
        worker's, in the slot of the run it follows."""
        return self.held.hold(job)

    @property
    def capacity(self) -> int:
        """Jobs that may be claimed and unfinished now: handlers plus the prefetch."""
        return self.concurrency + self.prefetch.size

    def claim_pass(self) -> tuple[int, int]:
        """Claim into the free slots; return (slots asked for, jobs claimed)."""
        with self._lock:
            free = self.capacity - self._busy
            if free <= 0 or self._stopping.is_set():
                return 0, 0
            if free < self.prefetch.min_batch and not self._ready.empty():
                # Handlers still have prefetched work: wait for a few more slots and
                # claim them in one statement rather than one round trip per job.
                return 0, 0
            self._busy += free  # reserved; what the claim does not fill is returned below
        started = time.monotonic()
        # On the listener's connection when it just delivered a notification: no pool
        # checkout, and the claim is a prepared statement there (planned once).
        with self.notifier.borrowed() as conn:
            try:
                jobs = self.store.claim(
                    self.name,
                    self.leases,
                    free,
                    self.priority_floor,
                    limited=self.flow.limited,
                    conn=conn,
                )
            except BaseException:
                self._unreserve(free)
                raise
            self.prefetch.observe_claim(time.monotonic() - started)
            self._unreserve(free - len(jobs))
            for job in jobs:
                self._ready.put(self.held.hold(job))
        if jobs and len(jobs) < free:
            _let_handlers_start()
        return free, len(jobs)

    def _unreserve(self, count: int) -> None:
        if count:
            with self._lock:
                self._busy -= count

    def idle_timeout(self) -> float:
        """Seconds to sleep: until the next job is due, capped by the poll interval (a
        second when the database did not say). Kinds with limits whose due jobs were
        left unclaimed wait for a place instead (`_limited_wait`)."""
        limited = self.flow.limited
        plain = [kind for kind in self.leases if kind not in limited]
        try:
            seconds = self.store.seconds_until_visible(plain, self.priority_floor)
            if limited & self.leases.keys():
                wait = self._limited_wait()
                seconds = wait if seconds is None else min(seconds, wait)
        except StoreError as exc:
            if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                raise
            logger.warning("could not read when the next job is due: %s", exc)
            return min(self.poll_interval, 1.0)
        if seconds is None:
            return self.poll_interval
        return min(self.poll_interval, max(MIN_IDLE_WAIT, seconds))

    def _limited_wait(self) -> float:
        """Seconds until a limited kind may have a job to claim: its next job's time, or
        for due jobs held back, the rate's next room (or `FLOW_RECHECK`; the end of a
        limited run wakes every worker sooner)."""
        limited = sorted(self.flow.limited & self.leases.keys())
        due_in = self.store.seconds_until_visible(limited, self.priority_floor)
        if due_in is None:
            return self.poll_interval  # nothing pending: an enqueue's NOTIFY wakes us
        if due_in > 0:
            return due_in
        rated = sorted(self.flow.rated & self.leases.keys())
        room = self.store.seconds_until_rate_room(rated) if rated else None
        if not room:
            return FLOW_RECHECK
        return room if set(limited) <= self.flow.rated else min(room, FLOW_RECHECK)

    def _probe(self) -> None:
        """Prove that LISTEN/NOTIFY round-trips; otherwise say once that we poll.

        If the listener cannot connect yet, the run loop probes again once it has.
        """
        try:
            if not self.notifier.connected:
                self.notifier.connect()
            if not self.notifier.polling:
                self.store.notify(f"probe:{self.name}")
        except Exception as exc:
            logger.warning("listener not ready (%s); it will reconnect and probe then", exc)
            return
        self._probed = True
        if self.notifier.polling:
            logger.warning(
                "the listener's connection leads to a transaction-pooling proxy, where "
                "LISTEN does not work; not listening, falling back to polling every %ss "
                "(set listen_dsn to reach the server directly)",
                self.poll_interval,
            )
            return
        deadline = time.monotonic() + PROBE_TIMEOUT
        while time.monotonic() < deadline and not self._stopping.is_set():
            if self.notifier.wait(deadline - time.monotonic()):
                self.listening = True
                return
        if not self._stopping.is_set():
            self.notifier.stop_listening()
            logger.warning(
                "no NOTIFY arrived within %ss of a self-probe (a transaction-pooling proxy?); "
                "stopped listening, falling back to polling every %ss (set listen_dsn to "
                "reach the server directly)",
                PROBE_TIMEOUT,
                self.poll_interval,
            )


def _let_handlers_start() -> None:
    """Give up the GIL for a moment, so that a handler thread woken by the jobs just queued
    starts them now. A claim that did not fill the free slots leaves the worker going
    idle: the dispatcher would go on to read when the next job is due, and a handler
    thread waiting for the GIL would start only when that read reached its round trip.
    Measured from an enqueue's commit to the handler's first line on an idle worker at
    concurrency 1, that wait was 0.1 ms of the median and more at the tail."""
    time.sleep(0)
