"""Schedules the scheduler cannot compute are refused where they are declared; one that
fails anyway is skipped and logged while the others fire, and a worker whose scheduler
keeps failing says it is not healthy."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support import Probe, wait_until
from venturi.client import Queue
from venturi.durations import MAX_DELAY_SECONDS
from venturi.errors import ConfigurationError
from venturi.schedules.schedule import Schedule
from venturi.schedules.scheduler import Scheduler
from venturi.worker.runtime import Worker


@pytest.mark.parametrize(
    "every", [10**12, float(MAX_DELAY_SECONDS + 1), timedelta(days=40_000), "99999w"]
)
def test_an_interval_longer_than_the_bound_is_refused(queue: Queue, every: object) -> None:
    @queue.job("tick")
    def tick() -> None: ...

    with pytest.raises(ConfigurationError, match=rf"every .* at most {MAX_DELAY_SECONDS}s"):
        queue.schedule("tick", every=every)  # type: ignore[arg-type]
    assert queue.schedules == {}


def test_the_longest_interval_is_accepted_and_syncs(queue: Queue) -> None:
    @queue.job("rare")
    def rare() -> None: ...

    queue.schedule("rare", every=MAX_DELAY_SECONDS)
    Scheduler(queue.store, list(queue.schedules.values())).run_once()
    (row,) = queue.store.reads.schedules()
    assert row.name == "rare"


def _uncomputable(queue: Queue, name: str) -> Schedule:
    """A schedule past the checks (as a bug in them would let one through): its
    interval is too long for any slot after now to be a Python datetime."""
    schedule = queue.schedule("tick", every=60, name=name)
    object.__setattr__(schedule.timing, "seconds", 1e12)
    return schedule


@pytest.fixture
def ticks(queue: Queue) -> None:
    @queue.job("tick")
    def tick() -> None: ...


@pytest.mark.usefixtures("ticks")
def test_one_schedule_that_fails_is_skipped_and_the_others_fire(
    queue: Queue, probe: Probe, caplog: pytest.LogCaptureFixture
) -> None:
    bad = _uncomputable(queue, "bad")
    good = queue.schedule("tick", every=1, name="good")
    scheduler = Scheduler(queue.store, [bad, good])
    with caplog.at_level(logging.ERROR, logger="venturi.scheduler"):
        scheduler.run_once()  # syncs the rows
        probe.rows("UPDATE {schedules} SET next_slot = now() - interval '1 second'")
        wait = scheduler.run_once()
    assert 0 <= wait <= 30
    assert probe.scalar("SELECT count(*) FROM {jobs}") == 1
    assert any("schedule bad" in r.getMessage() for r in caplog.records)
    assert not scheduler.healthy


@pytest.fixture
def worker_with_bad_schedule(queue: Queue) -> Iterator[Worker]:
    @queue.job("tick")
    def tick() -> None: ...

    _uncomputable(queue, "bad")
    queue.schedule("tick", every=1, name="good")
    worker = queue.worker(poll_interval=1.0).start()
    yield worker
    worker.stop(timeout=5)


def test_a_worker_keeps_firing_the_good_schedules_and_turns_unhealthy(
    queue: Queue, probe: Probe, worker_with_bad_schedule: Worker
) -> None:
    wait_until(
        lambda: probe.scalar("SELECT count(*) FROM {jobs} WHERE kind = 'tick'") >= 2,
        30,
        what="the good schedule to fire twice",
    )
    wait_until(lambda: not worker_with_bad_schedule.healthy, 30, what="the worker to be unhealthy")
