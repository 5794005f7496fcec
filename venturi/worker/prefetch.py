"""How many jobs a worker claims beyond its busy handler threads.

A claim is one round trip. Handlers that finish jobs faster than that starve while it is
in flight unless enough jobs wait in the worker's queue, and the more jobs one claim
takes the fewer round trips (and commits) each job costs. But a prefetched job is a job
no other worker can run: with slow jobs a deep queue only delays them. So the prefetch
follows what the worker observes: about twice the jobs its handlers finish during one
claim round trip, between a floor and a ceiling. Fast jobs get deep batches; jobs much
slower than a round trip get the floor.
"""

from __future__ import annotations

import math
import threading
from typing import Final

# Weight of the newest observation in the moving averages: reacts within ~10 jobs.
SMOOTHING: Final = 0.2
DEFAULT_FLOOR: Final = 1
# Never hold more than this many jobs per handler thread ahead of them, nor fewer
# than this many in all, whatever the averages say. For no-op jobs the averages ask for
# more than this. At a ceiling of 32 a drain's handlers ran dry while a claim was in
# flight; 64 drained 1.1x faster at concurrency 16 and 1.2x at 1 (side by side, with
# less worker and server CPU per job: fewer, larger claims and completions). 128 gained
# a little more but raised a c16 worker's peak RSS from 45 MB to 50.5 (64: 47).
PER_HANDLER_CEILING: Final = 4
MIN_CEILING: Final = 64


class Prefetch:
    """The prefetch size: fixed when given, else adapted to job and claim durations.

    Thread-safe: handler threads report run times, the dispatcher claim round trips.
    """

    def __init__(self, concurrency: int, fixed: int | None = None) -> None:
        self.concurrency = concurrency
        self.fixed = fixed
        self.floor = DEFAULT_FLOOR if fixed is None else fixed
        self.ceiling = (
            max(MIN_CEILING, PER_HANDLER_CEILING * concurrency) if fixed is None else fixed
        )
        self._lock = threading.Lock()
        self._run: float | None = None  # seconds a job runs, moving average
        self._claim: float | None = None  # seconds a claim round trip takes, moving average

    def observe_run(self, seconds: float) -> None:
        """A handler finished a job that ran ``seconds``."""
        with self._lock:
            self._run = _blend(self._run, seconds)

    def observe_claim(self, seconds: float) -> None:
        """A claim statement took ``seconds`` from send to result."""
        with self._lock:
            self._claim = _blend(self._claim, seconds)

    @property
    def size(self) -> int:
        """Jobs to hold claimed beyond the handlers (the floor until both are observed)."""
        if self.fixed is not None:
            return self.fixed
        with self._lock:
            run, claim = self._run, self._claim
        if run is None or claim is None:
            return self.floor
        wanted = 2 * self.concurrency * claim / max(run, 1e-6)
        return max(self.floor, min(self.ceiling, math.ceil(wanted)))

    @property
    def min_batch(self) -> int:
        """Free slots worth a claim while handlers still have queued jobs."""
        return max(1, self.size // 2)


def _blend(average: float | None, value: float) -> float:
    return value if average is None else average + SMOOTHING * (value - average)
