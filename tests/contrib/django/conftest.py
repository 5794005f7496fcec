"""The example Django project, configured once per run on the test database; each test
gets its own venturi prefix through ``override_settings``. Django is imported inside the
fixtures: the test modules skip themselves when it is missing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contrib.django.project import build_settings
from venturi import Queue


@pytest.fixture(scope="session")
def orders_table(database_dsn: str) -> Iterator[str]:
    """Django set up on the test database, with the shop's table (dropped at the end)."""
    import django
    from django.conf import settings
    from django.db import connection, connections

    if not settings.configured:
        table = f"shop_orders_{uuid.uuid4().hex[:10]}"
        settings.configure(**build_settings(database_dsn, table, "unused"))
        django.setup()
    from tests.contrib.django.shop.models import Order

    with connection.schema_editor() as editor:
        editor.create_model(Order)
    yield settings.SHOP_ORDERS_TABLE
    with connection.schema_editor() as editor:
        editor.delete_model(Order)
    connections.close_all()


@pytest.fixture
def queue(orders_table: str, prefix: str) -> Iterator[Queue]:
    """The project's queue, under this test's prefix and migrated."""
    from django.db import connections
    from django.test.utils import override_settings

    from venturi.contrib.django import get_queue

    with override_settings(VENTURI={"PREFIX": prefix}):
        queue = get_queue()
        queue.migrate()
        yield queue
    connections.close_all()  # leaving override_settings closed the queue


@pytest.fixture
def shop(orders_table: str) -> Any:
    """The example shop's tasks module (Django 6.0+), with no orders."""
    from tests.contrib.django.shop import tasks
    from tests.contrib.django.shop.models import Order

    Order.objects.all().delete()
    return tasks


@pytest.fixture
def signals() -> Iterator[list[tuple[str, str, str]]]:
    """(signal, task name, status) of every ``django.tasks`` signal sent during the test."""
    from django.tasks.signals import task_enqueued, task_finished, task_started

    seen: list[tuple[str, str, str]] = []

    def receiver(name: str) -> Any:
        def record(sender: Any, task_result: Any, **kwargs: Any) -> None:
            seen.append((name, task_result.task.name, str(task_result.status)))

        return record

    names = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}
    handlers = {signal: receiver(name) for signal, name in names.items()}
    for signal, handler in handlers.items():
        signal.connect(handler)
    yield seen
    for signal, handler in handlers.items():
        signal.disconnect(handler)
