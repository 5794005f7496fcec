"""`StopEvent`, a run's ``ctx.stopping``: a `threading.Event` in every way a handler can
tell, whose Event to block on is made by the first wait. Pure threading, no database."""

from __future__ import annotations

import threading
import time

import attrs

from venturi.context import JobContext
from venturi.stopping import StopEvent


def test_it_is_an_event_that_starts_unset() -> None:
    stopping = StopEvent()
    assert isinstance(stopping, threading.Event)
    assert not stopping.is_set()
    assert stopping.wait(0) is False
    assert stopping.wait(0.01) is False


def test_set_and_clear() -> None:
    stopping = StopEvent()
    stopping.set()
    assert stopping.is_set()
    assert stopping.wait(0) is True
    assert stopping.wait() is True  # set already: returns at once, without a timeout
    stopping.clear()
    assert not stopping.is_set()
    assert stopping.wait(0.01) is False
    stopping.set()
    assert stopping.wait(0) is True


def _waiters(stopping: StopEvent, count: int) -> tuple[list[threading.Thread], list[bool]]:
    woken: list[bool] = []
    threads = [
        threading.Thread(target=lambda: woken.append(stopping.wait(10))) for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    return threads, woken


def test_a_set_wakes_a_waiter_already_blocked() -> None:
    stopping = StopEvent()
    threads, woken = _waiters(stopping, 3)
    # The first wait made the Event it blocks on: that waiter is past the flag.
    deadline = time.monotonic() + 10
    while stopping._waited is None:
        assert time.monotonic() < deadline, "no waiter started waiting"
        time.sleep(0.001)
    stopping.set()
    for thread in threads:
        thread.join(15)
    assert woken == [True] * 3


def test_a_set_racing_the_waiters_loses_none() -> None:
    for _ in range(200):
        stopping = StopEvent()
        threads, woken = _waiters(stopping, 4)
        stopping.set()  # before, during or after each waiter's look at the flag
        for thread in threads:
            thread.join(15)
        assert woken == [True] * 4


def test_every_run_context_gets_one_of_its_own() -> None:
    factory = attrs.fields(JobContext).stopping.default.factory  # type: ignore[union-attr]
    assert factory is StopEvent
    assert factory() is not factory()
