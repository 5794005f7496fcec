"""Schedules of a kind with ``key_concurrency``: the schedule names the concurrency key of
every job it fires (and of a triggered run); declaring one without a key, or a key for a
kind without a key limit, is refused before anything is written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from tests.support import Probe
from venturi.client import Queue
from venturi.errors import ConfigurationError, InvalidJob
from venturi.schedules.schedule import split_options
from venturi.schedules.scheduler import Scheduler


def _sync() -> None: ...


@pytest.mark.parametrize(
    ("key_concurrency", "key", "refused"),
    [
        (1, None, (ConfigurationError, "needs a concurrency_key; give the schedule concurrency_")),
        (None, "customer:42", (ConfigurationError, "has no key_concurrency")),
        (1, "", (InvalidJob, "concurrency_key")),
        (1, 42, (InvalidJob, "concurrency_key")),
        (1, "k" * 256, (InvalidJob, "concurrency_key")),
    ],
)
def test_a_bad_key_for_a_schedule_is_refused_and_nothing_registered(
    queue: Queue,
    probe: Probe,
    key_concurrency: int | None,
    key: object,
    refused: tuple[type[Exception], str],
) -> None:
    error, message = refused
    options: dict[str, Any] = {"every": 60, "concurrency_key": key}
    with pytest.raises(error, match=message):
        queue.periodic("crm.sync", key_concurrency=key_concurrency, **options)(_sync)
    assert queue.schedules == {} and queue.definitions == {}
    queue.job("crm.sync", key_concurrency=key_concurrency)(_sync)
    with pytest.raises(error, match=message):
        queue.schedule("crm.sync", name="nightly", **options)
    assert queue.schedules == {}
    queue.worker().start().stop()
    assert probe.count("schedules", "kind = 'crm.sync'") == 0


def test_the_jobs_a_keyed_schedule_fires_carry_its_key(queue: Queue, probe: Probe) -> None:
    queue.periodic("crm.sync", every=3600, key_concurrency=1, concurrency_key="customer:42")(_sync)
    queue.schedule("crm.sync", every=3600, name="crm.sync-7", concurrency_key="customer:7")
    scheduler = Scheduler(queue.store, list(queue.schedules.values()))
    scheduler.run_once()  # writes the rows
    probe.rows("UPDATE {schedules} SET next_slot = next_slot - %s", timedelta(hours=1))
    scheduler.run_once()  # fires the due slots
    keys = probe.rows("SELECT concurrency_key FROM {jobs} ORDER BY concurrency_key")
    assert keys == [("customer:42",), ("customer:7",)]
    schedule = queue.schedules["crm.sync"]
    assert schedule.fingerprint != attrs.evolve(schedule, concurrency_key="other").fingerprint


def test_a_triggered_run_carries_the_key_and_needs_it(
    queue: Queue, probe: Probe, database_dsn: str
) -> None:
    queue.periodic("crm.sync", every=3600, key_concurrency=1, concurrency_key="customer:42")(_sync)
    worker = queue.worker().start()  # declares the kind's limits, writes the schedule
    worker.stop()
    job_id = queue.trigger("crm.sync")
    record = queue.get(job_id)
    assert record is not None and record.concurrency_key == "customer:42"
    # A queue without the schedule in its code (the CLI without --app) has no key to give.
    bare = Queue(database_dsn, prefix=queue.prefix, pool_size=1)
    try:
        with pytest.raises(ConfigurationError, match="needs a concurrency key"):
            bare.trigger("crm.sync")
    finally:
        bare.close()
    assert probe.count("jobs") == 1


def test_the_integrations_pass_the_key_to_the_schedule() -> None:
    schedule, job = split_options({"every": 60, "concurrency_key": "a", "key_concurrency": 1})
    assert schedule == {"every": 60, "concurrency_key": "a"}
    assert job == {"key_concurrency": 1}
