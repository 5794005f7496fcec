"""The ``django.tasks`` backend keeps each run's facts as journal data (``facts``), and
builds ``TaskResult`` from them: never from a note's wording, which stays for people."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("django.tasks")

from django.tasks import TaskResultStatus

from tests.support import Probe, recover, wait_until
from venturi import Queue
from venturi.contrib.django.tasks import TaskRunLost, task_kind
from venturi.models import Outcome


@pytest.fixture
def probe(queue: Queue, database_dsn: str, prefix: str) -> Iterator[Probe]:
    instance = Probe(database_dsn, prefix)
    yield instance
    instance.close()


def test_each_run_journals_its_facts_and_a_note_for_people(queue: Queue, shop: Any) -> None:
    result = shop.flaky.enqueue(order_id=1)  # fails on attempt 1, succeeds on 2
    assert queue.drain(wait_for=30) == 2
    failed, done = queue.journal(result.id)
    assert (failed.outcome, done.outcome) == (Outcome.RETRIED, Outcome.COMPLETED)
    assert failed.facts is not None and done.facts is not None
    path = "tests.contrib.django.shop.tasks.FirstTryError"
    assert failed.facts["error"] == {"type": path, "message": "attempt 1 fails"}
    task_facts = failed.facts["django_task"]
    assert task_facts["exception_class_path"] == path
    assert task_facts["traceback"].rstrip().endswith("FirstTryError: attempt 1 fails")
    datetime.fromisoformat(task_facts["started_at"])
    assert set(done.facts["django_task"]) == {"started_at"}
    assert failed.facts["worker"] == done.facts["worker"] != ""
    # The note is the traceback, with no facts in it; a completion has none.
    assert failed.note is not None and failed.note.startswith("Traceback")
    assert done.note is None
    got = shop.flaky.get_result(result.id)
    assert got.worker_ids == [failed.facts["worker"], done.facts["worker"]]
    assert got.started_at == datetime.fromisoformat(task_facts["started_at"])
    assert got.last_attempted_at == datetime.fromisoformat(done.facts["django_task"]["started_at"])
    assert [e.traceback for e in got.errors] == [task_facts["traceback"]]


def _recovered(queue: Queue, shop: Any) -> str:
    """A task whose first worker died: the reaper took it back (journal: recovered)."""
    result = shop.ship.enqueue(order_id=1)
    [job] = queue.store.claim("crashed-worker", {task_kind("default", "default"): 0.001}, 1)
    [stale] = wait_until(queue.store.find_stale, what="the lease to expire")
    assert recover(queue.store, stale) is Outcome.RECOVERED
    assert str(job.id) == result.id
    return str(result.id)


def test_a_lost_run_is_known_by_its_fact_whatever_its_note_says(
    queue: Queue, shop: Any, probe: Probe
) -> None:
    result_id = _recovered(queue, shop)
    probe.rows("UPDATE {journal} SET note = 'the machine caught fire'")
    got = shop.ship.get_result(result_id)
    assert [e.exception_class for e in got.errors] == [TaskRunLost]
    assert got.errors[0].traceback == "the machine caught fire"
    assert got.worker_ids == ["crashed-worker"]


def test_a_note_worded_like_a_lost_run_is_not_a_lost_run(
    queue: Queue, shop: Any, probe: Probe
) -> None:
    result_id = _recovered(queue, shop)
    [(note,)] = probe.rows("UPDATE {journal} SET facts = NULL RETURNING note")
    assert note.startswith("lease held by crashed-worker expired")
    got = shop.ship.get_result(result_id)
    assert got.status == TaskResultStatus.READY
    assert got.errors == [] and got.worker_ids == []
