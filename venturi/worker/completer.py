"""Batched completions: many finished runs settled in one statement."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Final

import attrs

from venturi.errors import StoreError, StoreUnavailable
from venturi.models import Outcome
from venturi.settlements import Settlement
from venturi.store import retrying
from venturi.store.protocol import Store
from venturi.worker.held import HeldJob
from venturi.worker.settling import SETTLE_RETRY_SECONDS

logger = logging.getLogger("venturi.worker")

Settled = Callable[[HeldJob, Settlement, Outcome | None], None]
Dropped = Callable[[HeldJob, BaseException], None]
Spawn = Callable[[str, Callable[[], object]], threading.Thread]
_BUSY_BACKOFF: Final = retrying.Backoff(base=0.02, cap=1.0)


@attrs.define(eq=False)
class Completer:
    """Collects completed runs and flushes them in one fenced statement per batch.

    A flush takes everything that arrived while the previous one was in flight (up to
    ``batch_size``), so batching costs no latency when idle and grows with load. A run
    counts as settled only once its flush committed; until then its claim stays held and
    heartbeated. A flush that fails for a passing reason is retried (with backoff, for up
    to ``retry_seconds``); one that cannot be written is let go through ``on_dropped``
    (the run leaves the held set, its lease lapses and the reaper recovers it). A run
    whose row another session holds locked is tried again in a later flush. If the
    process dies first, the lease lapses and the job runs again.
    """

    store: Store
    on_settled: Settled
    on_dropped: Dropped
    spawn: Spawn
    batch_size: int = attrs.field(default=256, kw_only=True)
    retry_seconds: float = attrs.field(default=SETTLE_RETRY_SECONDS, kw_only=True)
    _queue: queue.SimpleQueue[tuple[HeldJob, Settlement] | None] = attrs.field(
        init=False, factory=queue.SimpleQueue
    )
    _give_up: threading.Event = attrs.field(init=False, factory=threading.Event)
    _busy_failures: int = attrs.field(init=False, default=0)
    _thread: threading.Thread = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._thread = self.spawn("venturi-completer", self._loop)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def submit(self, held: HeldJob, settlement: Settlement) -> None:
        self._queue.put((held, settlement))

    def _loop(self) -> None:
        """Flush batches until the stop marker (None), then flush what is left and end.

        Only the first item of a batch is waited for, so a flush takes whatever arrived
        meanwhile; after the marker nothing is waited for at all.
        """
        stopping = False
        while True:
            batch: list[tuple[HeldJob, Settlement]] = []
            while len(batch) < self.batch_size:
                try:
                    item = self._queue.get(block=not batch and not stopping)
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._flush_guarded(batch)
            elif stopping:
                return

    def _flush_guarded(self, batch: list[tuple[HeldJob, Settlement]]) -> None:
        """Flush; whatever goes wrong, no run of the batch stays held without a
        settlement on its way."""
        try:
            self._flush(batch)
        except Exception as exc:
            logger.exception("completion flush failed unexpectedly")
            for held, _ in batch:
                self.on_dropped(held, exc)

    def _flush(self, batch: list[tuple[HeldJob, Settlement]]) -> None:
        try:
            outcome = retrying.retry(
                lambda: self.store.complete_many([(h.claim, s) for h, s in batch]),
                what=f"completing {len(batch)} runs",
                logger=logger,
                deadline=time.monotonic() + self.retry_seconds,
                stop=self._give_up,
            )
        except StoreError as exc:
            if len(batch) > 1 and retrying.classify(exc) is retrying.ErrorClass.STATEMENT:
                # One run's settlement the database refuses (a constraint, a value it
                # cannot store) must not take the rest of its batch with it.
                for item in batch:
                    self._flush([item])
                return
            for held, _ in batch:
                self.on_dropped(held, exc)
            return
        busy = [(h, s) for h, s in batch if h.job.id in outcome.busy]
        for held, settlement in batch:
            if held.job.id not in outcome.busy:
                applied = held.job.id in outcome.applied
                self.on_settled(held, settlement, Outcome.COMPLETED if applied else None)
        self._retry_busy(busy)

    def _retry_busy(self, busy: list[tuple[HeldJob, Settlement]]) -> None:
        """Queue runs whose rows were locked for a later flush, after a short wait that
        grows while they stay locked (at shutdown, let them go instead)."""
        if not busy:
            self._busy_failures = 0
            return
        if self._give_up.is_set():
            exc = StoreUnavailable("its row stayed locked by another session until shutdown")
            for held, _ in busy:
                self.on_dropped(held, exc)
            return
        self._busy_failures += 1
        self._give_up.wait(_BUSY_BACKOFF.delay(self._busy_failures))
        for item in busy:
            self._queue.put(item)

    def stop(self, timeout: float | None) -> None:
        """Flush what was submitted, then end the thread (give up retrying at timeout)."""
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            self._give_up.set()
            self._thread.join(5.0)
