"""The shop's ``django.tasks`` tasks (Django 6.0+), run by venturi workers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.tasks import TaskContext, task

from venturi import Pause

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


@task()
def quit_now() -> None:
    raise SystemExit("the task called sys.exit")


@task()
async def quit_async() -> None:
    await asyncio.sleep(0)
    raise SystemExit("the async task called sys.exit")


@task()
def quit_after_shipping(order_id: int) -> None:
    """Ships, then exits: on a backend with ``ATOMIC`` the shipping rolls back."""
    Order.objects.filter(pk=order_id).update(status="shipped")
    raise SystemExit(3)


class Abandon(BaseException):
    """A ``BaseException`` of the task's own: neither SystemExit nor KeyboardInterrupt."""


@task()
def abandon() -> None:
    raise Abandon("given up")


@task()
def interrupt() -> None:
    raise KeyboardInterrupt("stop this process")


@task()
async def ship_async(order_id: int) -> dict[str, Any]:
    await asyncio.sleep(0)
    # The async ORM runs its queries back in the handler thread (async_to_sync).
    updated = await Order.objects.filter(pk=order_id).aupdate(status="shipped async")
    return {"order": order_id, "updated": updated, "thread": threading.current_thread().name}


@task(takes_context=True)
async def snooze(context: TaskContext[Any, Any]) -> int:
    await asyncio.sleep(0)
    if context.attempt == 1:
        raise Pause(after=0)
    return context.attempt


@task()
def ship_or_fail(order_id: int, fail: bool = False) -> dict[str, Any]:
    """Ships, then fails if asked: on a backend with ``ATOMIC`` the shipping rolls back."""
    Order.objects.filter(pk=order_id).update(status="shipped")
    if fail:
        raise FirstTryError("the carrier refused the parcel")
    return {"order": order_id, "shipped": True}
