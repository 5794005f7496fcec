"""Firing schedules against the real server: one job per slot, catch-up after downtime,
deploys that change or remove schedules, and triggering a run by hand."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.schedules.support import fired_slots, slot_problems
from tests.support import Probe, wait_until
from venturi.client import Queue
from venturi.errors import ConfigurationError
from venturi.events import WorkerEvents
from venturi.metrics import MetricsEvents
from venturi.schedules.schedule import MISSED_AFTER, Schedule
from venturi.schedules.scheduler import Scheduler
from venturi.worker.runtime import Worker

HOUR = timedelta(hours=1)


@pytest.fixture
def workers(queue: Queue) -> Any:
    started: list[Worker] = []

    def start(**options: Any) -> Worker:
        worker = queue.worker(poll_interval=1.0, **options)
        started.append(worker.start())
        return worker

    yield start
    for worker in started:
        worker.stop(timeout=5)


def _scheduler(queue: Queue, *names: str) -> Scheduler:
    wanted = [queue.schedules[n] for n in names] if names else list(queue.schedules.values())
    return Scheduler(queue.store, wanted)


def _move_back(probe: Probe, name: str, missed: int, step: timedelta) -> None:
    """Stage downtime: the row's next slot as if ``missed`` more slots had passed."""
    probe.rows(
        "UPDATE {schedules} SET next_slot = next_slot - %s WHERE name = %s",
        step * (missed + 1),
        name,
    )


def test_a_worker_fires_each_slot_once_with_its_time(
    queue: Queue, probe: Probe, workers: Callable[..., Worker]
) -> None:
    seen: list[datetime] = []

    @queue.periodic("tick", every="1s")
    def tick(scheduled_at: datetime) -> None:
        seen.append(scheduled_at)

    workers()
    wait_until(lambda: len(seen) >= 3, 20, what="three slots of an every=1s schedule")
    assert all(s.tzinfo is UTC and s.microsecond == 0 for s in seen)
    ordered = sorted(seen)
    assert len(set(ordered)) == len(ordered)
    # Enqueued by the database clock at (never before) the slot's time.
    lateness = probe.rows(
        "SELECT extract(epoch FROM created_at - (payload->>'scheduled_at')::timestamptz) "
        "FROM {jobs} WHERE kind = 'tick'"
    )
    assert all(row[0] >= 0 for row in lateness), lateness


def test_payload_reaches_the_handler_and_several_schedules_share_a_kind(
    queue: Queue, workers: Callable[..., Worker]
) -> None:
    targets: list[str] = []

    @queue.periodic("metrics.flush", every="1s", payload={"target": "s3"})
    def flush(target: str) -> None:
        targets.append(target)

    queue.schedule("metrics.flush", every=1, name="flush-local", payload={"target": "disk"})
    workers()
    wait_until(lambda: {"s3", "disk"} <= set(targets), 20, what="both schedules to fire")
    assert set(queue.schedules) == {"metrics.flush", "flush-local"}


def test_racing_firings_enqueue_a_slot_once(queue: Queue, probe: Probe) -> None:
    @queue.periodic("report", cron="0 * * * *", payload={})
    def report(scheduled_at: datetime) -> None: ...

    schedule = queue.schedules["report"]
    _scheduler(queue).run_once()  # writes the row
    _move_back(probe, "report", 0, HOUR)
    (state,), now = _states(queue, schedule)
    firing = schedule.plan(state.next_slot, now)
    results: list[int | None] = []
    barrier = threading.Barrier(4)

    def fire() -> None:
        barrier.wait()
        results.append(queue.store.fire_schedule(schedule, state.next_slot, firing))

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=str) == [1, None, None, None]
    assert fired_slots(probe, "report") == firing.slots
    assert probe.scalar("SELECT last_slot FROM {schedules}") == firing.slots[-1]


def _states(queue: Queue, schedule: Schedule) -> tuple[list[Any], datetime]:
    states, now = queue.store.schedule_states([schedule.name])
    return list(states.values()), now


def test_the_slot_check_finds_duplicates_and_gaps(queue: Queue, probe: Probe) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    expected = [base + timedelta(seconds=i) for i in range(4)]
    assert slot_problems(expected, expected) == ({}, [])
    # Staged violations: one slot enqueued twice, another never.
    for slot in (expected[0], expected[0], expected[1], expected[3]):
        queue.enqueue("tick", {"scheduled_at": slot.isoformat()})
    duplicates, missing = slot_problems(fired_slots(probe, "tick"), expected)
    assert duplicates == {expected[0]: 2} and missing == [expected[2]]


@pytest.mark.parametrize(
    ("catch_up", "max_catch_up", "expected"),
    [("latest", 100, 1), ("all", 100, 5), ("all", 3, 3), ("none", 100, None)],
)
def test_catch_up_after_downtime(
    queue: Queue, probe: Probe, catch_up: Any, max_catch_up: int, expected: int | None
) -> None:
    @queue.periodic("hourly", cron="@hourly", catch_up=catch_up, max_catch_up=max_catch_up)
    def hourly(scheduled_at: datetime) -> None: ...

    scheduler = _scheduler(queue)
    scheduler.run_once()
    _move_back(probe, "hourly", 4, HOUR)  # no worker ran for four slots and this one
    scheduler.run_once()
    slots = fired_slots(probe, "hourly")
    now = probe.scalar("SELECT now()")
    latest = now.replace(minute=0, second=0, microsecond=0)
    if expected is None:  # "none": only a slot no older than MISSED_AFTER counts as on time
        expected = 1 if now - latest <= MISSED_AFTER else 0
    assert len(slots) == expected
    assert slots == [latest - HOUR * i for i in reversed(range(expected))]
    row = probe.rows("SELECT next_slot, last_slot FROM {schedules}")[0]
    assert row[0] == latest + HOUR
    scheduler.run_once()  # nothing more is due
    assert len(fired_slots(probe, "hourly")) == expected


def test_a_changed_schedule_takes_over_at_the_next_start(
    database_dsn: str, queue: Queue, probe: Probe
) -> None:
    @queue.periodic("job", cron="0 * * * *")
    def job(scheduled_at: datetime) -> None: ...

    old = _scheduler(queue)
    old.run_once()
    with Queue(database_dsn, prefix=queue.prefix, retention=None) as deployed:

        @deployed.periodic("job", cron="30 * * * *", tz="Europe/Berlin")
        def job_v2(scheduled_at: datetime) -> None: ...

        new = _scheduler(deployed)
        new.run_once()
        row = probe.rows("SELECT expression, zone, next_slot, active FROM {schedules}")[0]
        assert row[:2] == ("30 * * * *", "Europe/Berlin") and row[3]
        assert row[2].minute == 30
        _move_back(probe, "job", 0, HOUR)
        old.run_once()  # still running the old code: not its schedule any more
        assert fired_slots(probe, "job") == []
        new.run_once()
        assert len(fired_slots(probe, "job")) == 1


def test_a_payload_change_keeps_the_row_s_place(
    database_dsn: str, queue: Queue, probe: Probe
) -> None:
    @queue.periodic("job", cron="0 * * * *", payload={"size": 1})
    def job(size: int) -> None: ...

    _scheduler(queue).run_once()
    _move_back(probe, "job", 2, HOUR)
    before = probe.scalar("SELECT next_slot FROM {schedules}")
    with Queue(database_dsn, prefix=queue.prefix, retention=None) as deployed:
        deployed.periodic("job", cron="0 * * * *", payload={"size": 2})(job)
        _scheduler(deployed).run_once()  # syncs, then fires the missed slot (latest)
        assert probe.rows("SELECT payload->>'size' FROM {jobs}") == [("2",)]
        assert probe.scalar("SELECT last_slot FROM {schedules}") == before + 2 * HOUR


def test_a_removed_schedule_stops_firing_and_stays_inactive(
    database_dsn: str, queue: Queue, probe: Probe
) -> None:
    @queue.periodic("kept", every="1h")
    def kept() -> None: ...

    @queue.periodic("dropped", every="1h")
    def dropped() -> None: ...

    old = _scheduler(queue)
    old.run_once()
    with Queue(database_dsn, prefix=queue.prefix, retention=None) as deployed:
        deployed.periodic("kept", every="1h")(kept)
        _scheduler(deployed).run_once()
    rows = {r.name: r.active for r in queue.schedule_rows()}
    assert rows == {"kept": True, "dropped": False}
    _move_back(probe, "dropped", 0, HOUR)
    old.run_once()  # even code that still has it leaves an inactive row alone
    assert probe.count("jobs", "kind = 'dropped'") == 0
    # It comes back with code that has it, from its next slot on (no catch-up).
    _scheduler(queue).run_once()
    row = probe.rows("SELECT active, next_slot > now() FROM {schedules} WHERE name = 'dropped'")
    assert row == [(True, True)]
    assert probe.count("jobs", "kind = 'dropped'") == 0


def test_trigger_enqueues_one_run_outside_the_bookkeeping(queue: Queue, probe: Probe) -> None:
    runs: list[tuple[str, datetime]] = []

    @queue.job("emails.digest")
    def digest(period: str, scheduled_at: datetime) -> None:
        runs.append((period, scheduled_at))

    queue.schedule(
        "emails.digest", cron="0 8 * * mon", name="digest-weekly", payload={"period": "week"}
    )
    _scheduler(queue).run_once()
    before = probe.rows("SELECT next_slot, last_slot FROM {schedules}")
    job_id = queue.trigger("digest-weekly")
    assert probe.rows("SELECT next_slot, last_slot FROM {schedules}") == before
    assert queue.drain() == 1
    ((period, scheduled_at),) = runs
    assert period == "week" and scheduled_at.tzinfo is UTC
    record = queue.get(job_id)
    assert record is not None
    assert abs(scheduled_at - record.created_at) < timedelta(seconds=1)
    with pytest.raises(ConfigurationError, match="no schedule named 'nope'"):
        queue.trigger("nope")
    with pytest.raises(ConfigurationError, match="enqueues no job"):
        queue.trigger("venturi.schedules.retention")
    assert probe.count("jobs") == 1


class _Recorded(WorkerEvents):
    def __init__(self) -> None:
        self.fired: list[tuple[str, int]] = []

    def schedule_fired(self, schedule: str, jobs: int) -> None:
        self.fired.append((schedule, jobs))


def test_firings_are_reported_to_worker_events_and_metrics(queue: Queue, probe: Probe) -> None:
    @queue.periodic("hourly", cron="@hourly", catch_up="all")
    def hourly() -> None: ...

    events = _Recorded()
    scheduler = Scheduler(queue.store, list(queue.schedules.values()), events=events)
    scheduler.run_once()
    _move_back(probe, "hourly", 2, HOUR)
    scheduler.run_once()
    assert events.fired == [("hourly", 3)]
    registry = CollectorRegistry()
    metrics = MetricsEvents(registry)
    metrics.schedule_fired("hourly", 3)
    metrics.jobs_pruned("completed", 7)
    assert registry.get_sample_value("venturi_schedule_jobs_total", {"schedule": "hourly"}) == 3
    assert registry.get_sample_value("venturi_jobs_pruned_total", {"status": "completed"}) == 7
