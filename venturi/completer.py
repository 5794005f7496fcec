"""Batched completions: many finished runs settled in one statement."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from venturi.errors import StoreUnavailable
from venturi.models import Settlement
from venturi.running import HeldJob
from venturi.store import Store

logger = logging.getLogger("venturi.worker")

Settled = Callable[[HeldJob, Settlement, bool], None]


class Completer:
    """Collects completed runs and flushes them in one fenced statement per batch.

    A flush takes everything that arrived while the previous one was in flight (up to
    ``batch_size``), so batching costs no latency when idle and grows with load. A run
    counts as settled only once its flush committed; until then its claim stays held and
    heartbeated. If the process dies first, the lease lapses and the job runs again.
    """

    def __init__(self, store: Store, on_settled: Settled, batch_size: int = 256) -> None:
        self.store = store
        self.on_settled = on_settled
        self.batch_size = batch_size
        self._queue: queue.SimpleQueue[tuple[HeldJob, Settlement] | None] = queue.SimpleQueue()
        self._give_up = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="venturi-completer", daemon=True)

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
                self._flush(batch)
            elif stopping:
                return

    def _flush(self, batch: list[tuple[HeldJob, Settlement]]) -> None:
        failures = 0
        while True:
            try:
                applied = self.store.complete_many([(h.claim, s) for h, s in batch])
                break
            except StoreUnavailable as exc:
                failures += 1
                if self._give_up.is_set():
                    logger.error(
                        "dropping %d completions at shutdown (%s); their leases will lapse "
                        "and the jobs run again",
                        len(batch),
                        exc,
                    )
                    return
                logger.warning("completion flush failed (%s); retrying", exc)
                self._give_up.wait(min(0.1 * 2**failures, 5.0))
            except Exception:
                logger.exception("completion flush failed; their leases will lapse")
                return
        for held, settlement in batch:
            self.on_settled(held, settlement, held.job.id in applied)

    def stop(self, timeout: float | None) -> None:
        """Flush what was submitted, then end the thread (give up retrying at timeout)."""
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            self._give_up.set()
            self._thread.join(5.0)
