"""A background thread that repeats a step on an interval until told to stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from venturi.errors import StoreUnavailable


class Periodic:
    """Runs ``step`` every ``interval`` seconds in a daemon thread.

    The loop only times, stops and logs: a failing step is logged (an outage briefly,
    anything else with its traceback) and retried with backoff capped at
    ``backoff_cap``; the thread never dies silently. `stop` interrupts the wait at once.
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        interval: float,
        logger: logging.Logger,
        *,
        backoff_cap: float = 30.0,
    ) -> None:
        self.name = name
        self.step = step
        self.interval = interval
        self.logger = logger
        self.backoff_cap = backoff_cap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        failures = 0
        while not self._stop.wait(self._delay(failures)):
            try:
                self.step()
                failures = 0
            except StoreUnavailable as exc:
                failures += 1
                self.logger.warning("%s: database unavailable (%s); retrying", self.name, exc)
            except Exception:
                failures += 1
                self.logger.exception("%s step failed; retrying", self.name)

    def _delay(self, failures: int) -> float:
        if not failures:
            return self.interval
        return min(max(self.interval, 1.0) * 2.0 ** min(failures - 1, 5), self.backoff_cap)

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
