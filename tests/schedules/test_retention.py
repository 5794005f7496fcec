"""Retention: finished jobs pruned by the workers, in short batches, one pruner at a time."""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta

import psycopg
import pytest

from tests.support import Probe, wait_until
from venturi.client import Queue
from venturi.contrib.django.conf import VenturiSettings
from venturi.contrib.flask import FlaskSettings
from venturi.contrib.settings import QueueSettings, SettingsError
from venturi.errors import ConfigurationError
from venturi.events import WorkerEvents
from venturi.schedules.retention import DAY, Retention
from venturi.schedules.scheduler import Pruner


def stage_finished(
    probe: Probe, status: str, count: int, age: timedelta, kind: str = "old"
) -> None:
    """``count`` jobs that finished ``age`` ago with ``status``, one journal row each."""
    probe.rows(
        "WITH made AS (INSERT INTO {jobs} (id, kind, status, finished_at, run_count) "
        "SELECT gen_random_uuid(), %s, %s, now() - %s - random() * interval '1 minute', 1 "
        "FROM generate_series(1, %s) RETURNING id, kind) "
        "INSERT INTO {journal} (job_id, kind, run_no, outcome) "
        "SELECT id, kind, 1, %s FROM made",
        kind,
        status,
        age,
        count,
        status,
    )


def counts(probe: Probe) -> dict[str, int]:
    return dict(probe.rows("SELECT status, count(*) FROM {jobs} GROUP BY status"))


def test_retention_values_and_text() -> None:
    default = Retention()
    assert default.kept() == {"completed": DAY, "cancelled": DAY, "dead": 7 * DAY}
    assert default.describe() == "completed 1d, cancelled 1d, dead 7d"
    parsed = Retention.of("completed=3d, dead=never")
    assert parsed.kept() == {"completed": 3 * DAY, "cancelled": DAY, "dead": None}
    assert Retention.of({"cancelled": timedelta(hours=2), "every": "5m"}).cancelled == 7200
    assert Retention.of(None).prunes is False
    assert Retention.of(default) is default


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("completed", "status=duration pairs"),
        ("finished=3d", "unknown keys 'finished'"),
        ({"completed": -1}, "must be positive"),
        ({"dead": "soon"}, "text such as"),
        ({"every": 0}, "retention every must be positive"),
        ({"batch": 0}, "batch must be a positive int"),
        (42, "must be a Retention, a mapping or None"),
    ],
)
def test_bad_retention_is_refused(value: object, message: str, database_dsn: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Retention.of(value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=message):
        Queue(database_dsn, retention=value)  # type: ignore[arg-type]


def test_prune_deletes_what_retention_lets_go_with_its_journal(queue: Queue, probe: Probe) -> None:
    stage_finished(probe, "completed", 1_250, timedelta(days=2))
    stage_finished(probe, "completed", 7, timedelta(hours=1))
    stage_finished(probe, "cancelled", 30, timedelta(days=2))
    stage_finished(probe, "dead", 40, timedelta(days=3))
    stage_finished(probe, "dead", 20, timedelta(days=8))
    queue.enqueue("fresh", {})
    deleted = queue.store.prune(Retention(batch=100), threading.Event())
    assert deleted == {"completed": 1_250, "cancelled": 30, "dead": 20}
    assert counts(probe) == {"completed": 7, "dead": 40, "pending": 1}
    orphans = probe.count("journal", "job_id NOT IN (SELECT id FROM {jobs})")
    assert orphans == 0 and probe.count("journal") == 47
    kept_forever = queue.store.prune(Retention(dead=None, completed=1), threading.Event())
    assert kept_forever == {"completed": 7, "cancelled": 0}
    assert counts(probe) == {"dead": 40, "pending": 1}


def test_prune_works_in_short_transactions(queue: Queue, probe: Probe) -> None:
    stage_finished(probe, "completed", 20_000, timedelta(days=2))
    seen: set[int] = set()
    done = threading.Event()

    def prune() -> None:
        queue.store.prune(Retention(batch=500), threading.Event())
        done.set()

    thread = threading.Thread(target=prune)
    thread.start()
    while not done.is_set():
        seen.add(probe.count("jobs"))  # from the probe's own session
    thread.join()
    # Another session saw the rows go a batch at a time, never all at once at the end.
    between = {n for n in seen if 0 < n < 20_000}
    assert between, f"no partial state seen: {sorted(seen)}"
    assert all(n % 500 == 0 for n in between)
    assert probe.count("jobs") == 0


def test_one_pruner_at_a_time(queue: Queue, probe: Probe, database_dsn: str) -> None:
    stage_finished(probe, "completed", 10, timedelta(days=2))
    with psycopg.connect(database_dsn, autocommit=True) as other:
        # Staged: another session is pruning this prefix.
        other.execute("SELECT pg_advisory_lock(%s)", (queue.store.prefix.prune_lock_key,))
        assert queue.store.prune(Retention(), threading.Event()) is None
        assert probe.count("jobs") == 10
        # Let go in this session (a closed session's locks go a moment after it closes).
        other.execute("SELECT pg_advisory_unlock(%s)", (queue.store.prefix.prune_lock_key,))
    assert queue.store.prune(Retention(), threading.Event()) == {
        "completed": 10,
        "cancelled": 0,
        "dead": 0,
    }


def test_a_stopping_worker_stops_pruning_between_batches(queue: Queue, probe: Probe) -> None:
    stage_finished(probe, "completed", 50, timedelta(days=2))
    stopping = threading.Event()
    stopping.set()
    assert queue.store.prune(Retention(batch=10), stopping) == {
        "completed": 0,
        "cancelled": 0,
        "dead": 0,
    }
    assert probe.count("jobs") == 50


def test_workers_prune_on_their_own_while_draining(
    database_dsn: str, prefix: str, probe: Probe, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="venturi.scheduler")
    stage_finished(probe, "completed", 5_000, timedelta(days=2))
    stage_finished(probe, "dead", 100, timedelta(days=2))  # within the 7 days dead are kept
    runs: list[int] = []
    with Queue(database_dsn, prefix=prefix, retention={"every": 1, "batch": 200}) as queue:

        @queue.job("work")
        def work(n: int) -> None:
            runs.append(n)

        queue.enqueue_many([queue.new_job("work", {"n": i}) for i in range(500)])
        workers = [queue.worker(concurrency=2, poll_interval=1.0).start() for _ in range(2)]
        try:
            wait_until(
                lambda: probe.count("jobs", "kind = 'old' AND status = 'completed'") == 0,
                60,
                what="the workers' pruner to delete old completed jobs",
            )
            wait_until(lambda: len(runs) == 500, 60, what="the draining worker to finish")
        finally:
            for worker in workers:
                worker.stop(timeout=10)
    assert sorted(runs) == list(range(500))
    assert probe.count("jobs", "status = 'dead'") == 100
    assert probe.count("jobs", "kind = 'work' AND status = 'completed'") == 500
    pruned = [r for r in caplog.records if r.getMessage().startswith("retention deleted")]
    assert pruned and sum(r.deleted["completed"] for r in pruned) == 5_000  # type: ignore[attr-defined]
    row = probe.rows(
        "SELECT payload, active FROM {schedules} WHERE name = 'venturi.schedules.retention'"
    )
    assert row == [({"completed": DAY, "cancelled": DAY, "dead": 7 * DAY, "batch": 200}, True)]


SETTINGS = [
    pytest.param(FlaskSettings, "VENTURI_RETENTION", id="flask"),
    pytest.param(VenturiSettings, "VENTURI['RETENTION']", id="django"),
]


@pytest.mark.parametrize(("schema", "key"), SETTINGS)
def test_framework_settings_carry_retention(schema: type[QueueSettings], key: str) -> None:
    assert schema().queue_options()["retention"] == Retention()
    given = schema(retention={"completed": "3d", "dead": None})
    assert given.queue_options()["retention"].kept() == {
        "completed": 3 * DAY,
        "cancelled": DAY,
        "dead": None,
    }
    assert schema(retention="completed=2h").queue_options()["retention"].completed == 7200
    assert schema(retention=None).queue_options()["retention"].prunes is False
    for bad in ({"completed": "soon"}, {"finished": "1d"}, 3):
        with pytest.raises(SettingsError, match=re.escape(key)):
            schema(retention=bad)


class _Pruned(WorkerEvents):
    def __init__(self) -> None:
        self.pruned: dict[str, int] = {}

    def jobs_pruned(self, status: str, count: int) -> None:
        self.pruned[status] = self.pruned.get(status, 0) + count


def test_the_pruner_runs_only_when_a_slot_asked_and_reports_what_it_deleted(
    queue: Queue, probe: Probe
) -> None:
    stage_finished(probe, "cancelled", 12, timedelta(days=2))
    events = _Pruned()
    pruner = Pruner(queue.store, Retention(), threading.Event(), events)
    assert pruner.run_once() is None  # no slot asked: nothing happens
    assert probe.count("jobs") == 12
    pruner.request()
    assert pruner.run_once() == {"completed": 0, "cancelled": 12, "dead": 0}
    assert events.pruned == {"completed": 0, "cancelled": 12, "dead": 0}
    assert pruner.run_once() is None
