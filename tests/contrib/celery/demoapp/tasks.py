"""The shared tasks of Celery's Django example app (``examples/django/demoapp/tasks.py``)
that need no models, as written there but for the import line."""

from venturi.contrib.celery import shared_task


@shared_task
def add(x, y):  # type: ignore[no-untyped-def]
    return x + y


@shared_task
def mul(x, y):  # type: ignore[no-untyped-def]
    return x * y


@shared_task
def xsum(numbers):  # type: ignore[no-untyped-def]
    return sum(numbers)
