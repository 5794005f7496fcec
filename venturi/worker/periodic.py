"""A loop that repeats a step on an interval until told to stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import attrs

from venturi.errors import StoreUnavailable
from venturi.store import retrying


@attrs.define(eq=False)
class Periodic:
    """Runs ``step`` every ``interval`` seconds in `run` (a supervised thread's body).

    The loop only times, stops and logs: a failing step is logged (a passing database
    error briefly, anything else with its traceback) and tried again after a backoff
    capped at ``backoff_cap``. A fatal database error ends `run` by raising it, for the
    supervisor to stop the worker. `stop` interrupts the wait at once.
    """

    name: str
    step: Callable[[], object]
    interval: float
    logger: logging.Logger
    backoff_cap: float = attrs.field(default=30.0, kw_only=True)
    backoff: retrying.Backoff = attrs.field(init=False)
    _stop: threading.Event = attrs.field(init=False, factory=threading.Event)

    @backoff.default
    def _backoff(self) -> retrying.Backoff:
        return retrying.Backoff(base=min(self.interval, 1.0), cap=self.backoff_cap)

    def run(self) -> None:
        failures = 0
        while not self._stop.wait(self._delay(failures)):
            try:
                self.step()
                failures = 0
            except StoreUnavailable as exc:
                failures += 1
                self.logger.warning("%s: %s; retrying", self.name, exc)
            except Exception as exc:
                if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                    raise
                failures += 1
                self.logger.exception("%s step failed; retrying", self.name)

    def _delay(self, failures: int) -> float:
        return self.backoff.delay(failures) if failures else self.interval

    def stop(self) -> None:
        self._stop.set()
