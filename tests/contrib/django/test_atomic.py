"""``atomic=True`` jobs: the run's ORM writes and the job's completion commit together in
``transaction.atomic()`` on Django's connection, or neither does."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("django", minversion="5.2")

from tests.support import wait_until
from venturi import JobContext, JobStatus, Queue
from venturi.contrib import django as venturi_django
from venturi.errors import ConfigurationError

WAIT = 30.0
_written = threading.Event()


def _set_status(order_id: int, status: str) -> None:
    from tests.contrib.django.shop.models import Order

    Order.objects.filter(pk=order_id).update(status=status)


@venturi_django.job("shop.charge_atomic", atomic=True, backoff=lambda n: 3600)
def charge_atomic(order_id: int, fail: bool = False) -> str:
    _set_status(order_id, "charged")
    if fail:
        raise RuntimeError("card declined")
    return "charged"


@venturi_django.job("shop.charge_slowly", atomic=True, context=True, lease=1.0)
def charge_slowly(ctx: JobContext, order_id: int) -> None:
    _set_status(order_id, "charged")
    _written.set()
    ctx.stopping.wait(WAIT)  # until the heartbeat finds the job cancelled


def _order() -> Any:
    from tests.contrib.django.shop.models import Order

    Order.objects.all().delete()
    return Order.objects.create(item="tea")


def _status(order: Any) -> str:
    order.refresh_from_db()
    return str(order.status)


def test_orm_writes_commit_with_the_completion(queue: Queue) -> None:
    order = _order()
    job_id = charge_atomic.enqueue(order_id=order.pk)
    with queue.worker(concurrency=2, poll_interval=1):
        wait_until(lambda: queue.journal(job_id), timeout=WAIT, what="the run to settle")
    job = queue.get(job_id)
    assert job is not None and job.status is JobStatus.COMPLETED
    assert queue.journal(job_id)[-1].attachment == "charged"
    assert _status(order) == "charged"


def test_a_failing_run_rolls_its_orm_writes_back(queue: Queue) -> None:
    order = _order()
    job_id = charge_atomic.enqueue(order_id=order.pk, fail=True)
    assert queue.drain() == 1
    assert [e.outcome.value for e in queue.journal(job_id)] == ["retried"]
    assert _status(order) == "new"


def test_a_run_cancelled_meanwhile_commits_no_orm_write(queue: Queue) -> None:
    order = _order()
    _written.clear()
    job_id = charge_slowly.enqueue(order_id=order.pk)
    with queue.worker(concurrency=1, poll_interval=1) as worker:
        assert _written.wait(WAIT)
        assert queue.cancel(job_id)
        wait_until(lambda: len(worker.held) == 0, timeout=WAIT, what="the run to be fenced")
    assert _status(order) == "new"
    assert [e.outcome.value for e in queue.journal(job_id)] == ["cancelled"]


def test_atomic_is_checked_at_registration(orders_table: str) -> None:
    async def handler() -> None: ...

    with pytest.raises(ConfigurationError, match="async, but atomic=True"):
        venturi_django.job("shop.async_atomic", atomic=True)(handler)
    with pytest.raises(ConfigurationError, match=r"atomic of 'shop\.x' must be True or False"):
        venturi_django.job("shop.x", atomic="yes")  # type: ignore[arg-type]
    assert "shop.async_atomic" not in venturi_django.registry.kinds
