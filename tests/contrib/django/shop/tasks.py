"""The shop's ``django.tasks`` tasks (Django 6.0+), run by venturi workers."""

from __future__ import annotations

from typing import Any

from django.tasks import TaskContext, task

from .models import Order


@task(priority=5)
def ship(order_id: int) -> dict[str, Any]:
    Order.objects.filter(pk=order_id).update(status="shipped")
    return {"order": order_id, "shipped": True}


class FirstTryError(Exception):
    pass


@task(takes_context=True, queue_name="mail")
def flaky(context: TaskContext[Any, Any], order_id: int) -> int:
    if context.attempt < 2:
        raise FirstTryError(f"attempt {context.attempt} fails")
    return context.attempt


@task()
def broken() -> None:
    raise KeyError("always")
