"""The ``django.tasks`` backend against Django's documented contract (issue 20): a result
read back equals the one ``enqueue`` returned, ``SystemExit`` is a recorded failure,
``"QUEUES": []`` accepts any queue name, results are found inside the enqueuing
transaction, and ``async def`` tasks and jobs run on the workers."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("django.tasks")

from django.db import transaction
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test.utils import override_settings
from django.utils import timezone

from tests.support import wait_until
from venturi import JobStatus, Queue
from venturi.contrib.django.tasks import task_kind


def _finished(task: Any, result_id: str) -> Any:
    return wait_until(
        lambda: (r := task.get_result(result_id)).is_finished and r,
        what=f"task {result_id} to finish",
    )


def test_a_result_read_back_equals_the_one_enqueue_returned(queue: Queue, shop: Any) -> None:
    later = timezone.now() + timedelta(hours=1)
    for task in (shop.ship, shop.ship.using(priority=-7, run_after=later)):
        result = task.enqueue(order_id=1)
        read = task.get_result(result.id)
        assert read == result
        assert read.task.run_after == task.run_after
        job = queue.get(result.id)
        assert job is not None
        # The enqueue's time is the job id's: the same whoever reads it, to the ms.
        assert result.enqueued_at == job.id.datetime


def test_system_exit_in_a_worker_is_a_recorded_failure(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    result = shop.quit_now.enqueue()
    with queue.worker(concurrency=1, poll_interval=1):
        failed = _finished(shop.quit_now, result.id)  # MAX_ATTEMPTS is 2: two runs
    assert failed.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in failed.errors] == [SystemExit, SystemExit]
    assert failed.errors[-1].traceback.endswith("SystemExit: the task called sys.exit\n")
    assert failed.attempts == 2 and failed.started_at is not None
    assert ("finished", "quit_now", "FAILED") in signals


def test_keyboard_interrupt_is_not_a_task_failure(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    result = shop.interrupt.enqueue()
    with pytest.raises(KeyboardInterrupt):
        queue.drain()
    # Handed back untouched, as Django's ImmediateBackend lets it through unrecorded.
    job = queue.get(result.id)
    assert job is not None and job.status is JobStatus.PENDING
    assert shop.interrupt.get_result(result.id).errors == []
    assert [s for s in signals if s[0] == "finished"] == []


def test_an_empty_queues_list_accepts_any_queue_name(queue: Queue, shop: Any) -> None:
    tasks = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend", "QUEUES": []}}
    with override_settings(TASKS=tasks):
        task = shop.ship.using(queue_name="any name at all")
        result = task.enqueue(order_id=1)
        job = queue.get(result.id)
        assert job is not None and job.kind == task_kind("default", None)
        assert queue.drain() == 1
        done = task.get_result(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL
        assert done.task.queue_name == "any name at all"
        assert done.task == task


def test_a_result_is_found_inside_the_transaction_that_enqueued_it(queue: Queue, shop: Any) -> None:
    with transaction.atomic():
        result = shop.ship.enqueue(order_id=1)
        assert shop.ship.get_result(result.id) == result
        assert queue.get(result.id) is None, "venturi's pool sees nothing before COMMIT"
        transaction.set_rollback(True)
    with pytest.raises(TaskResultDoesNotExist):
        shop.ship.get_result(result.id)


def test_a_result_of_another_backend_alias_does_not_exist_here(queue: Queue, shop: Any) -> None:
    result = shop.ship.enqueue(order_id=1)
    tasks = {
        "default": {"BACKEND": "venturi.contrib.django.VenturiBackend"},
        "other": {"BACKEND": "venturi.contrib.django.VenturiBackend"},
    }
    with override_settings(TASKS=tasks):
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["other"].get_result(result.id)
        assert task_backends["default"].get_result(result.id).id == result.id


def test_an_async_task_runs_on_a_worker_with_the_async_orm(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    from tests.contrib.django.shop.models import Order

    order = Order.objects.create(item="kettle")
    assert task_backends["default"].supports_async_task
    result = shop.ship_async.enqueue(order_id=order.pk)
    with queue.worker(concurrency=2, poll_interval=1):
        done = _finished(shop.ship_async, result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    value = done.return_value
    assert (value["order"], value["updated"]) == (order.pk, 1)
    assert value["thread"] != threading.main_thread().name
    assert Order.objects.get(pk=order.pk).status == "shipped async"
    assert signals[-1] == ("finished", "ship_async", "SUCCESSFUL")


def test_an_async_task_can_steer_its_job_with_venturis_outcomes(queue: Queue, shop: Any) -> None:
    result = shop.snooze.enqueue()
    assert queue.drain() == 2  # paused once, then run again
    done = shop.snooze.get_result(result.id)
    assert (done.status, done.return_value, done.errors) == (TaskResultStatus.SUCCESSFUL, 2, [])
    assert [r.outcome for r in queue.journal(result.id)] == ["paused", "completed"]


def test_an_async_venturi_job_runs_with_the_async_orm(queue: Queue, orders_table: str) -> None:
    from tests.contrib.django.shop.jobs import fulfil_async
    from tests.contrib.django.shop.models import Order

    order = Order.objects.create(item="teapot")
    job_id = fulfil_async.enqueue(order_id=order.pk)
    assert queue.drain() == 1
    assert [(r.outcome, r.attachment) for r in queue.journal(job_id)] == [
        ("completed", "fulfilled")
    ]
    assert Order.objects.get(pk=order.pk).status == "fulfilled async"


def test_a_result_can_be_read_from_async_code_outside_a_transaction(
    queue: Queue, shop: Any
) -> None:
    result = shop.ship.enqueue(order_id=1)

    async def read() -> Any:
        # Django's connection refuses async code; outside atomic() the read needs none.
        return shop.ship.get_result(result.id)

    assert asyncio.run(read()) == result
