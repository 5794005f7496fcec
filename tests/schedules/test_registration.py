"""Bad schedules are refused when registered, before anything is written."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.support import Probe
from venturi.client import Queue
from venturi.errors import ConfigurationError, InvalidJob, UnknownKind


def _handler(target: str, scheduled_at: datetime | None = None) -> None: ...


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"cron": "0 3 * *"}, ConfigurationError, "5 fields"),
        ({"cron": "0 25 * * *"}, ConfigurationError, "not a valid expression"),
        ({"cron": "0 3 * * *", "tz": "Europe/Nowhere"}, ConfigurationError, "time zone"),
        ({"every": 0.2}, ConfigurationError, "at least 1s"),
        ({"every": "500ms"}, ConfigurationError, "text such as"),
        ({"cron": "0 3 * * *", "every": 60}, ConfigurationError, "exactly one"),
        ({}, ConfigurationError, "exactly one"),
        ({"every": 60, "payload": {"wrong": 1}}, InvalidJob, "unexpected keys 'wrong'"),
        ({"every": 60, "payload": {}}, InvalidJob, "missing required keys 'target'"),
        ({"every": 60, "payload": ["s3"]}, InvalidJob, "must be a dict"),
        ({"every": 60, "payload": {"target": float("nan")}}, ConfigurationError, "NaN"),
        (
            {"every": 60, "payload": {"target": "s3", "scheduled_at": "x"}},
            InvalidJob,
            "must not set 'scheduled_at'",
        ),
        (
            {"every": 60, "payload": {"target": "s3"}, "catch_up": "some"},
            ConfigurationError,
            "catch_up",
        ),
        (
            {"every": 60, "payload": {"target": "s3"}, "name": ""},
            ConfigurationError,
            "schedule name",
        ),
    ],
)
def test_bad_schedules_are_refused_and_nothing_registered(
    queue: Queue, probe: Probe, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    options = {"payload": {"target": "s3"}, **options}
    with pytest.raises(error, match=message):
        queue.periodic("flush", **options)(_handler)
    assert queue.schedules == {} and queue.definitions == {}
    queue.job("flush")(_handler)
    with pytest.raises(error, match=message):
        queue.schedule("flush", **options)
    assert queue.schedules == {}
    queue.worker().start().stop()
    assert probe.count("schedules", "kind = 'flush'") == 0


def test_a_schedule_needs_a_registered_kind(queue: Queue) -> None:
    with pytest.raises(UnknownKind, match="no handler is registered"):
        queue.schedule("missing", every=60)
    assert queue.schedules == {}


def test_schedule_names_are_unique(queue: Queue) -> None:
    queue.periodic("flush", every=60, payload={"target": "a"})(_handler)
    with pytest.raises(ConfigurationError, match="'flush' already exists"):
        queue.schedule("flush", every=30, payload={"target": "b"})
    queue.schedule("flush", every=30, payload={"target": "b"}, name="flush-b")
    with pytest.raises(ConfigurationError, match="'flush-b' already exists"):
        queue.periodic("other", every=60, name="flush-b", payload={"target": "c"})(_handler)
    assert "other" not in queue.definitions
    assert set(queue.schedules) == {"flush", "flush-b"}


def test_periodic_takes_every_job_option(queue: Queue) -> None:
    function = queue.periodic(
        "flush", every="30s", payload={"target": "s3"}, priority=3, max_attempts=2, lease=5
    )(_handler)
    schedule = queue.schedules["flush"]
    assert (schedule.priority, schedule.max_attempts, schedule.with_slot) == (3, 2, True)
    assert queue.definitions["flush"].lease == 5
    assert function.kind == "flush"
    with pytest.raises(ConfigurationError, match="lease"):
        queue.periodic("other", every=60, lease=0)(_handler)
