# Create your tasks here
# (Celery's examples/django/demoapp/tasks.py, but for the import line)

from venturi.contrib.celery import shared_task

from .models import Widget


@shared_task
def add(x, y):  # type: ignore[no-untyped-def]
    return x + y


@shared_task
def mul(x, y):  # type: ignore[no-untyped-def]
    return x * y


@shared_task
def xsum(numbers):  # type: ignore[no-untyped-def]
    return sum(numbers)


@shared_task
def count_widgets():  # type: ignore[no-untyped-def]
    return Widget.objects.count()


@shared_task
def rename_widget(widget_id, name):  # type: ignore[no-untyped-def]
    w = Widget.objects.get(id=widget_id)
    w.name = name
    w.save()
