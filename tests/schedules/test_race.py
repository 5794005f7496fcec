"""The exactly-once race: three worker processes and two more scheduler threads fire one
``every="1s"`` schedule for 30 s; every slot gets exactly one job and none is missing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.schedules.schedule_proc import RACE_KIND, register
from tests.schedules.support import fired_slots, slot_problems
from tests.support import Probe
from venturi.client import Queue
from venturi.schedules.scheduler import Scheduler

ROOT = Path(__file__).resolve().parents[2]
RACE_SECONDS = 30.0


@pytest.fixture
def processes(database_dsn: str, queue: Queue) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    for _ in range(3):
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.schedules.schedule_proc", database_dsn, queue.prefix],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    yield started
    for popen in started:
        if popen.poll() is None:
            popen.kill()
        popen.communicate(timeout=30)


@pytest.mark.slow
def test_three_processes_and_two_threads_fire_each_slot_exactly_once(
    queue: Queue, probe: Probe, processes: list[subprocess.Popen[str]]
) -> None:
    for popen in processes:
        assert popen.stdout is not None
        line = popen.stdout.readline().strip()
        assert line == "ready", f"worker process said {line!r}: {popen.stderr}"
    register(queue)
    stop = threading.Event()

    def fire_in_a_loop() -> None:
        scheduler = Scheduler(queue.store, list(queue.schedules.values()))
        while not stop.wait(min(1.0, scheduler.run_once())):
            pass

    threads = [threading.Thread(target=fire_in_a_loop) for _ in range(2)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    stop.wait(RACE_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(10)
    for popen in processes:
        popen.terminate()
    for popen in processes:
        assert popen.wait(30) == 0, popen.communicate()[1]
    elapsed = time.monotonic() - started
    fired = fired_slots(probe, RACE_KIND)
    expected = [
        fired[0] + timedelta(seconds=i)
        for i in range(int((fired[-1] - fired[0]).total_seconds()) + 1)
    ]
    duplicates, missing = slot_problems(fired, expected)
    lateness = probe.scalar(
        "SELECT max(extract(epoch FROM created_at - (payload->>'scheduled_at')::timestamptz)) "
        "FROM {jobs} WHERE kind = %s",
        RACE_KIND,
    )
    print(
        f"\nschedule race: 3 processes + 2 threads for {elapsed:.0f}s: {len(expected)} slots, "
        f"{len(fired)} jobs, duplicates: {sum(duplicates.values())}, missing: {len(missing)}, "
        f"latest firing {lateness * 1000:.0f} ms after its slot (database clock)"
    )
    assert duplicates == {} and missing == []
    assert len(expected) >= RACE_SECONDS - 5
    assert probe.scalar("SELECT last_slot FROM {schedules}") == fired[-1]
