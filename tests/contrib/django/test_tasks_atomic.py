"""``"OPTIONS": {"ATOMIC": True}``: a ``django.tasks`` backend whose tasks run in
``transaction.atomic()`` and complete their jobs in it, so a task's ORM writes commit
with its completion or not at all (Django 6.0+)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("django.tasks")

from django.tasks import TaskResultStatus
from django.test.utils import override_settings

from venturi import Queue
from venturi.contrib.django.conf import SettingsError
from venturi.contrib.django.tasks import task_kind

BACKEND = "venturi.contrib.django.VenturiBackend"


@pytest.fixture
def atomic_backend(queue: Queue) -> Iterator[None]:
    tasks = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "mail"]},
        "atomic": {"BACKEND": BACKEND, "OPTIONS": {"ATOMIC": True, "MAX_ATTEMPTS": 1}},
    }
    with override_settings(TASKS=tasks):
        yield


def _order() -> Any:
    from tests.contrib.django.shop.models import Order

    return Order.objects.create(item="lamp")


def _status(order: Any) -> str:
    order.refresh_from_db()
    return str(order.status)


def test_a_task_writes_and_completes_in_one_transaction(
    queue: Queue, shop: Any, atomic_backend: None
) -> None:
    order = _order()
    task = shop.ship_or_fail.using(backend="atomic")
    result = task.enqueue(order_id=order.pk)
    job = queue.get(result.id)
    assert job is not None and job.kind == task_kind("atomic", "default")
    assert queue.definitions[job.kind].transactional
    assert queue.drain() == 1
    assert task.get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    assert _status(order) == "shipped"


def test_a_failing_task_rolls_its_writes_back(
    queue: Queue, shop: Any, atomic_backend: None
) -> None:
    order = _order()
    task = shop.ship_or_fail.using(backend="atomic")
    result = task.enqueue(order_id=order.pk, fail=True)
    assert queue.drain() == 1
    done = task.get_result(result.id)
    assert done.status == TaskResultStatus.FAILED
    assert _status(order) == "new"


def test_atomic_must_be_a_bool(orders_table: str) -> None:
    from venturi.contrib.django import VenturiBackend

    with pytest.raises(SettingsError, match=r"atomic of .* must be True or False"):
        VenturiBackend("bad_atomic", {"OPTIONS": {"ATOMIC": "yes"}})
