"""The shop's venturi jobs (found by ``manage.py venturi`` through AUTODISCOVER)."""

from __future__ import annotations

import asyncio

from venturi.contrib import django as venturi_django

from .models import Order


@venturi_django.job("shop.fulfil", max_attempts=3)
def fulfil(order_id: int) -> str:
    """Runs on a worker thread with its own Django connection."""
    updated = Order.objects.filter(pk=order_id).update(status="fulfilled")
    return "fulfilled" if updated else "missing"


@venturi_django.job("shop.fulfil_async", max_attempts=3)
async def fulfil_async(order_id: int) -> str:
    """An async job: its async ORM queries run back in the handler thread."""
    await asyncio.sleep(0)
    updated = await Order.objects.filter(pk=order_id).aupdate(status="fulfilled async")
    return "fulfilled" if updated else "missing"
