"""The error policy's pure parts (classification of errors that are not the server's,
the shared backoff) and job deadlines on their own thread: no database."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.support import wait_until
from venturi.errors import SchemaError, StoreError, StoreUnavailable
from venturi.store.retrying import ErrorClass, RetryDelays, classify
from venturi.worker.deadlines import Deadlines


def test_errors_that_are_not_the_database_s_are_the_statement_s() -> None:
    assert classify(ValueError("x")) is ErrorClass.STATEMENT
    assert classify(StoreUnavailable("x")) is ErrorClass.TRANSIENT
    assert classify(SchemaError("x")) is ErrorClass.FATAL
    assert classify(StoreError("x")) is ErrorClass.STATEMENT


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    backoff = RetryDelays(base=0.1, cap=1.0)
    assert backoff.delay(0) == 0.0
    for failures, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (5, 1.0), (50, 1.0)]:
        delays = {backoff.delay(failures) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays), (failures, delays)
        assert len(delays) > 1  # jittered: peers that failed together do not retry in step


# -- deadlines ------------------------------------------------------------------------


def test_deadlines_fire_in_order_on_time() -> None:
    fired: list[tuple[Any, float]] = []
    deadlines = Deadlines(lambda held: fired.append((held.job, time.monotonic())))
    thread = threading.Thread(target=deadlines.run, daemon=True)
    thread.start()
    start = time.monotonic()

    class Held:
        def __init__(self, name: str, after: float, ended: bool = False) -> None:
            self.job = name
            self.deadline = start + after
            self.ended = ended

    for held in (Held("late", 0.6), Held("early", 0.2), Held("done", 0.1, ended=True)):
        deadlines.add(held)  # type: ignore[arg-type]
    wait_until(lambda: len(fired) == 2, timeout=10, what="both deadlines to fire")
    deadlines.stop()
    thread.join(5)
    assert [name for name, _ in fired] == ["early", "late"]
    for (_, at), after in zip(fired, (0.2, 0.6), strict=True):
        # Not a speed claim: it fires after its deadline, and not a heartbeat later.
        assert start + after <= at < start + after + 1.0
