"""A loop that repeats a step on an interval until told to stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

import attrs

from venturi.errors import StoreUnavailable
from venturi.store import retrying

# Steps failing in a row (outages aside) after which a loop is no longer healthy.
FAILING_AFTER: Final = 3


@attrs.define(eq=False)
class IntervalLoop:
    """Runs ``step`` every ``interval`` seconds in `run` (a supervised thread's body).

    The loop only times, stops and logs: a failing step is logged (a passing database
    error briefly, anything else with its traceback) and tried again after a backoff
    capped at ``backoff_cap``. A fatal database error ends `run` by raising it, for the
    supervisor to stop the worker. `stop` interrupts the wait at once (and a step under
    way through ``on_stop``).

    ``paced``: the first step runs at once, and each step returns the seconds to wait
    before the next (at most ``interval``).

    `healthy` turns False once the step failed `FAILING_AFTER` times in a row for a reason
    other than a database outage (which every loop waits out alike), or while ``sound``
    (the step's own account of itself) says False.
    """

    name: str
    step: Callable[[], object]
    interval: float
    logger: logging.Logger
    backoff_cap: float = attrs.field(default=30.0, kw_only=True)
    paced: bool = attrs.field(default=False, kw_only=True)
    sound: Callable[[], bool] = attrs.field(default=lambda: True, kw_only=True)
    # Called by `stop`, to interrupt a step that may take long (a VACUUM under way).
    on_stop: Callable[[], None] = attrs.field(default=lambda: None, kw_only=True)
    backoff: retrying.RetryDelays = attrs.field(init=False)
    _stop: threading.Event = attrs.field(init=False, factory=threading.Event)
    _failing: int = attrs.field(init=False, default=0)

    @backoff.default
    def _backoff(self) -> retrying.RetryDelays:
        return retrying.RetryDelays(base=min(self.interval, 1.0), cap=self.backoff_cap)

    @property
    def healthy(self) -> bool:
        return self._failing < FAILING_AFTER and self.sound()

    def run(self) -> None:
        failures = 0
        wait = 0.0 if self.paced else self.interval
        while not self._stop.wait(self.backoff.delay(failures) if failures else wait):
            try:
                asked = self.step()
                failures = self._failing = 0
                paced = self.paced and isinstance(asked, float)
                wait = min(self.interval, max(0.0, asked)) if paced else self.interval  # type: ignore[call-overload]
            except StoreUnavailable as exc:
                failures += 1
                self.logger.warning("%s: %s; retrying", self.name, exc)
            except Exception as exc:
                if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                    raise
                failures += 1
                self._failing += 1
                self.logger.exception("%s step failed; retrying", self.name)

    def stop(self) -> None:
        self._stop.set()
        self.on_stop()
