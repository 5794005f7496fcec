"""``beat_schedule`` entries become venturi schedules that the workers fire, each slot
exactly once, with no beat process."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support import wait_until
from venturi.contrib.celery import Celery, NotSupported, crontab
from venturi.errors import ConfigurationError

from .conftest import StartWorker
from .proj.celery import app

APP = "tests.contrib.celery.proj.celery:app"
TICK = "tests.contrib.celery.proj.tasks.tick"


def test_beat_schedule_becomes_venturi_schedules(celery_env: str) -> None:
    queue = app.venturi_queue()
    every = queue.schedules["tick-every-second"]
    assert every.kind == TICK and every.timing.expression == "every 1s"
    assert every.payload == {"args": ["beat"], "kwargs": {"step": 1}}
    nightly = queue.schedules["nightly"]
    assert nightly.timing.expression == "30 3 * * mon-fri"
    assert nightly.timing.zone == "Europe/Berlin"


def test_two_workers_fire_each_slot_once(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    celery_worker(APP)
    queue = app.venturi_queue()

    def fired() -> list[object] | None:
        jobs = queue.history(kind=TICK, limit=100)
        slots = [j.payload.get("scheduled_at") for j in jobs]
        done = [j for j in jobs if j.status == "completed"]
        return slots if len(done) >= 4 else None

    slots = wait_until(fired, timeout=60, what="four slots fired")
    assert len(slots) == len(set(slots)), slots
    first = queue.history(kind=TICK, status="completed", limit=1)[0]
    assert app.AsyncResult(str(first.id)).get(timeout=5).startswith("beat:1:")


def test_numbers_and_add_periodic_task(celery_env: str) -> None:
    other = Celery("periodic", set_as_current=False)

    @other.task(name="periodic.ping")
    def ping(word: str) -> str:
        return word

    other.conf.beat_schedule = {
        "every-five": {"task": "periodic.ping", "schedule": 5.0, "args": ["x"]}
    }

    @other.on_after_configure.connect
    def setup(sender: Celery, **_: object) -> None:
        sender.add_periodic_task(crontab(minute="*/15"), ping.s("quarter"), name="quarterly")

    queue = other.venturi_queue()
    assert queue.schedules["every-five"].timing.expression == "every 5s"
    assert queue.schedules["quarterly"].timing.expression == "*/15 * * * *"
    assert queue.schedules["quarterly"].payload == {"args": ["quarter"], "kwargs": {}}
    other.close()


def test_bad_beat_entries_are_refused(celery_env: str) -> None:
    other = Celery("badbeat", set_as_current=False)

    @other.task(name="badbeat.ping")
    def ping() -> None: ...

    other.conf.beat_schedule = {"x": {"task": "badbeat.nope", "schedule": timedelta(seconds=5)}}
    with pytest.raises(ConfigurationError, match=r"no task named 'badbeat\.nope'"):
        other.venturi_queue()
    other.conf.beat_schedule = {"x": {"task": "badbeat.ping", "schedule": object()}}
    with pytest.raises(NotSupported, match=r"\(solar, custom schedules\)"):
        other.venturi_queue()
    other.conf.beat_schedule = {
        "x": {"task": "badbeat.ping", "schedule": 5, "options": {"queue": "q"}}
    }
    with pytest.raises(NotSupported, match="options"):
        other.venturi_queue()
    other.close()
