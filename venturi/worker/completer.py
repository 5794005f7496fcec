"""The settling line: every finished run's settlement written from one thread, on one
connection (completions batched), so a worker's connections do not grow with its
concurrency."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

import attrs

from venturi.errors import StoreError, StoreUnavailable
from venturi.models import Outcome
from venturi.settlements import Busy, SettleAction, Settlement
from venturi.store import retrying
from venturi.store.protocol import Store
from venturi.worker.held import HeldJob
from venturi.worker.settling import SETTLE_RETRY_SECONDS

logger = logging.getLogger("venturi.worker")

T = TypeVar("T")
Settled = Callable[[HeldJob, Settlement, Outcome | None], None]
Dropped = Callable[[HeldJob, BaseException], None]
Spawn = Callable[[str, Callable[[], object]], threading.Thread]
Item = tuple[HeldJob, Settlement]
_BUSY_BACKOFF: Final = retrying.RetryDelays(base=0.02, cap=1.0)


@attrs.frozen
class Call:
    """Work another thread hands the line to run on its connection (`Completer.post`)."""

    work: Callable[[], object]


@attrs.define(eq=False)
class Completer:
    """Writes the settlements of a worker's finished runs from one thread.

    Completions are flushed in one fenced statement per batch: a flush takes everything that
    arrived while the previous one was in flight (up to ``batch_size``), so batching costs
    no latency when idle and grows with load. The batch's other settlements (retry, pause,
    dead, release) are written next, one transaction per kind. A run counts as settled only
    once its settlement committed; until then its claim stays held and heartbeated. A write
    that fails for a passing reason is retried (with backoff, for up to ``retry_seconds``);
    one whose values the database refuses is written by the store as its fallback (the same
    outcome without what was refused, `Settlement.fallback`); one that cannot be written
    at all is let go through ``on_dropped`` (the run leaves the held
    set, its lease lapses and the reaper recovers it). A run whose row another session holds
    locked is set aside and tried again after a short wait that grows while it stays locked,
    without holding up the others. If the process dies first, the lease lapses and the job
    runs again.

    Handler threads never take a connection of their own to settle: the worker's
    connections stay the same whatever its concurrency.
    """

    store: Store
    on_settled: Settled
    on_dropped: Dropped
    spawn: Spawn
    # Settles a run in the calling thread (retrying), once the line has ended.
    settle_here: Callable[[HeldJob, Settlement], None]
    batch_size: int = attrs.field(default=256, kw_only=True)
    retry_seconds: float = attrs.field(default=SETTLE_RETRY_SECONDS, kw_only=True)
    _queue: queue.SimpleQueue[Item | Call | None] = attrs.field(
        init=False, factory=queue.SimpleQueue
    )
    _give_up: threading.Event = attrs.field(init=False, factory=threading.Event)
    _busy_failures: int = attrs.field(init=False, default=0)
    # Runs whose rows were locked, with the monotonic time to try them again.
    _later: list[tuple[float, Item]] = attrs.field(init=False, factory=list)
    _thread: threading.Thread = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._thread = self.spawn("venturi-completer", self._loop)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def submit(self, held: HeldJob, settlement: Settlement) -> None:
        """Queue ``held``'s settlement, written (or let go) from the line's thread; once
        the line has ended, settle it in the caller's thread (``settle_here``)."""
        if self.running:
            self._queue.put((held, settlement))
        else:
            self.settle_here(held, settlement)

    def post(self, work: Callable[[], object]) -> None:
        """Run ``work`` on the line's thread without waiting for it (its errors are
        logged); at once in the caller's thread once the line ended."""
        if self.running:
            self._queue.put(Call(work))
        else:
            self._run(Call(work))

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
                elif isinstance(item, Call):
                    self._run(item)
                else:
                    batch.append(item)
            if batch:
                self._flush_guarded(batch)
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

    @staticmethod
    def _run(call: Call) -> None:
        try:
            call.work()
        except Exception:
            logger.exception("work posted to the settling line failed")

    def _flush_guarded(self, batch: list[Item]) -> None:
        """Flush the completions in one statement, then the other settlements; whatever
        goes wrong, no run of the batch stays held without a settlement on its way."""
        completions = [(h, s) for h, s in batch if s.action is SettleAction.COMPLETE]
        others = [(h, s) for h, s in batch if s.action is not SettleAction.COMPLETE]
        busy = self._guarded(self._complete, completions) if completions else []
        busy += self._guarded(self._settle, others) if others else []
        self._set_aside(busy)

    def _guarded(self, flush: Callable[[list[Item]], list[Item]], part: list[Item]) -> list[Item]:
        try:
            return flush(part)
        except Exception as exc:
            logger.exception("settlement flush failed unexpectedly")
            for held, _ in part:
                self.on_dropped(held, exc)
            return []

    def _write(self, what: str, write: Callable[[], T]) -> T:
        return retrying.retry(
            write,
            what=what,
            logger=logger,
            deadline=time.monotonic() + self.retry_seconds,
            stop=self._give_up,
        )

    def _complete(self, batch: list[Item]) -> list[Item]:
        """Complete ``batch`` in one statement; return the runs whose rows were locked."""
        try:
            outcome = self._write(
                f"completing {len(batch)} runs",
                lambda: self.store.complete_many([(h.claim, s) for h, s in batch]),
            )
        except StoreError as exc:
            if len(batch) > 1 and retrying.classify(exc) is retrying.ErrorClass.STATEMENT:
                # One run's settlement the database refuses (a constraint, a value it
                # cannot store) must not take the rest of its batch with it.
                return [locked for item in batch for locked in self._complete([item])]
            for held, _ in batch:
                self.on_dropped(held, exc)
            return []
        for held, settlement in batch:
            if held.job.id not in outcome.busy:
                applied = held.job.id in outcome.applied
                self.on_settled(held, settlement, Outcome.COMPLETED if applied else None)
        return [(h, s) for h, s in batch if h.job.id in outcome.busy]

    def _settle(self, items: list[Item]) -> list[Item]:
        """Write runs' retries, pauses, deaths and releases, one transaction per kind; return
        those whose rows were locked."""
        try:
            written = self._write(
                f"settling {len(items)} runs",
                lambda: self.store.settle_many([(h.claim, s) for h, s in items]),
            )
        except Exception as exc:
            for held, _ in items:
                self.on_dropped(held, exc)
            return []
        busy = []
        for (held, settlement), outcome in zip(items, written, strict=True):
            if isinstance(outcome, Busy):
                busy.append((held, settlement))
            elif isinstance(outcome, StoreError):
                self.on_dropped(held, outcome)
            else:
                self.on_settled(held, settlement, outcome)
        return busy

    def _set_aside(self, busy: list[Item]) -> None:
        """Try runs whose rows were locked again after a short wait that grows while they
        stay locked (at shutdown, let them go instead)."""
        if not busy:
            self._busy_failures = 0
            return
        if self._give_up.is_set():
            exc = StoreUnavailable("its row stayed locked by another session until shutdown")
            for held, _ in busy:
                self.on_dropped(held, exc)
            return
        self._busy_failures += 1
        at = time.monotonic() + _BUSY_BACKOFF.delay(self._busy_failures)
        self._later += [(at, item) for item in busy]

    def stop(self, timeout: float | None) -> None:
        """Flush what was submitted, then end the thread (give up retrying at timeout).
        What was submitted or posted as the thread ended is settled or run here."""
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
            if isinstance(item, Call):
                self._run(item)
            elif item is not None:
                self.settle_here(*item)
