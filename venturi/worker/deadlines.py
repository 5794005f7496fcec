"""Job timeouts on time: one thread that sleeps until the next run's deadline."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from venturi.worker.held import HeldJob

logger = logging.getLogger("venturi.worker")


class Deadlines:
    """Calls ``on_expired(held)`` for each run still going when its deadline passes.

    `add` a run when its handler starts; the thread waits on a condition until the
    earliest deadline (or until a nearer one is added), so a timeout fires within
    milliseconds of its deadline whatever the lease or heartbeat interval.
    """

    def __init__(self, on_expired: Callable[[HeldJob], None]) -> None:
        self.on_expired = on_expired
        self._heap: list[tuple[float, int, HeldJob]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False

    def add(self, held: HeldJob) -> None:
        """Watch ``held`` if it has a deadline (set by `HeldJobs.mark_started`)."""
        if held.deadline is None:
            return
        with self._cond:
            heapq.heappush(self._heap, (held.deadline, next(self._order), held))
            if self._heap[0][2] is held:
                self._cond.notify()

    def run(self) -> None:
        """The thread's body: until `stop`."""
        while True:
            with self._cond:
                expired = self._wait_for_expired()
                if expired is None:
                    return
            for held in expired:
                if not held.ended:
                    self.on_expired(held)

    def _wait_for_expired(self) -> list[HeldJob] | None:
        """Under the lock: the runs whose deadline has passed (waiting until one has),
        or None once stopped."""
        while not self._stopped:
            now = time.monotonic()
            expired = []
            while self._heap and self._heap[0][0] <= now:
                expired.append(heapq.heappop(self._heap)[2])
            if expired:
                return expired
            self._cond.wait(self._heap[0][0] - now if self._heap else None)
        return None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
