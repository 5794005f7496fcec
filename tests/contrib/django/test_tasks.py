"""The ``django.tasks`` backend (Django 6.0+, so Python 3.12+): enqueue in the ORM's
transaction, results with return values and errors from the journal, retries, priority,
deferral and the task signals."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("django.tasks")

from django.db import transaction
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import Client
from django.utils import timezone

from tests.support import wait_until
from venturi import Queue
from venturi.contrib.django.conf import SettingsError
from venturi.contrib.django.tasks import TaskRunLost, task_kind


def _statuses() -> list[str]:
    from tests.contrib.django.shop.models import Order

    return list(Order.objects.values_list("status", flat=True))


def test_a_request_enqueues_a_task_with_its_order_and_a_worker_runs_it(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    response = Client().post("/orders/task/", {"item": "lamp"})
    result_id = response.json()["result"]
    job = queue.get(result_id)
    assert job is not None
    assert (job.kind, job.priority) == (task_kind("default", "default"), 5)
    assert shop.ship.get_result(result_id).status == TaskResultStatus.READY
    with queue.worker(concurrency=2, poll_interval=1):
        result = wait_until(
            lambda: (r := shop.ship.get_result(result_id)).is_finished and r,
            what="the task to finish",
        )
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"order": response.json()["order"], "shipped": True}
    assert result.errors == [] and result.attempts == 1
    assert result.started_at is not None and result.finished_at is not None
    assert result.enqueued_at is not None and result.enqueued_at <= result.started_at
    assert _statuses() == ["shipped"]
    assert signals == [
        ("enqueued", "ship", "READY"),
        ("started", "ship", "RUNNING"),
        ("finished", "ship", "SUCCESSFUL"),
    ]


def test_a_rolled_back_request_enqueues_no_task(queue: Queue, shop: Any) -> None:
    with pytest.raises(RuntimeError, match="payment declined"):
        Client().post("/orders/task/", {"item": "lost", "fail": "1"})
    assert _statuses() == []
    assert queue.history() == []
    assert queue.drain() == 0


def test_failures_are_retried_and_reported_from_the_journal(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    retried = shop.flaky.enqueue(order_id=1)  # fails on attempt 1, succeeds on 2
    dead = shop.broken.enqueue()  # MAX_ATTEMPTS is 2: fails twice, then FAILED
    assert queue.drain(wait_for=30) == 4
    ok = shop.flaky.get_result(retried.id)
    assert (ok.status, ok.return_value, ok.attempts) == (TaskResultStatus.SUCCESSFUL, 2, 2)
    assert [e.exception_class_path for e in ok.errors] == [
        "tests.contrib.django.shop.tasks.FirstTryError"
    ]
    assert "attempt 1 fails" in ok.errors[0].traceback
    failed = shop.broken.get_result(dead.id)
    assert failed.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in failed.errors] == [KeyError, KeyError]
    assert failed.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        _ = failed.return_value
    finished = [s for s in signals if s[0] == "finished"]
    assert sorted(finished) == [
        ("finished", "broken", "FAILED"),
        ("finished", "flaky", "SUCCESSFUL"),
    ]


def test_run_after_defers_and_priority_maps_unchanged(queue: Queue, shop: Any) -> None:
    later = timezone.now() + timedelta(hours=1)
    result = shop.ship.using(run_after=later, priority=-40).enqueue(order_id=1)
    job = queue.get(result.id)
    assert job is not None
    assert job.priority == -40 and job.visible_at >= later - timedelta(seconds=1)
    assert queue.drain() == 0
    assert shop.ship.get_result(result.id).task.priority == -40


def test_enqueue_joins_the_orm_transaction(queue: Queue, shop: Any) -> None:
    with transaction.atomic():
        result = shop.ship.enqueue(order_id=1)
        assert queue.get(result.id) is None
        transaction.set_rollback(True)
    with pytest.raises(TaskResultDoesNotExist):
        shop.ship.get_result(result.id)
    with pytest.raises(TaskResultDoesNotExist):
        shop.ship.get_result("not-an-id")


def test_a_lost_run_is_reported_as_an_error(queue: Queue, shop: Any) -> None:
    result = shop.ship.enqueue(order_id=1)
    # A worker that claims the task and dies: its short lease lapses unrenewed.
    claimed = queue.store.claim("crashed-worker", {task_kind("default", "default"): 0.05}, 1)
    assert [str(j.id) for j in claimed] == [result.id]
    with queue.worker(poll_interval=1, reaper_interval=0.2):
        got = wait_until(
            lambda: (r := shop.ship.get_result(result.id)).is_finished and r,
            what="the reaper to take the task back and a worker to run it",
        )
    assert got.status == TaskResultStatus.SUCCESSFUL
    assert [e.exception_class for e in got.errors] == [TaskRunLost]
    assert got.worker_ids[0] == "crashed-worker" and got.attempts == 2


def test_backend_options_are_checked(orders_table: str) -> None:
    from venturi.contrib.django import VenturiBackend

    with pytest.raises(SettingsError, match="RETRIES"):
        VenturiBackend("bad", {"OPTIONS": {"RETRIES": 3}})
    with pytest.raises(SettingsError, match="queue 'two words'"):
        VenturiBackend("bad", {"QUEUES": ["two words"]})
    assert task_backends["default"].check() == []
