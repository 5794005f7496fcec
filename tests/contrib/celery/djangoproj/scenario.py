"""The example project's requests and tasks, run as a child process beside a real
`venturi worker --app tests.contrib.celery.djangoproj.celery:app`; prints ``ok``."""

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402

from tests.contrib.celery.djangoproj.celery import app, debug_task  # noqa: E402
from tests.contrib.celery.djangoproj.demoapp import tasks  # noqa: E402
from tests.contrib.celery.djangoproj.demoapp.models import Widget  # noqa: E402
from venturi.contrib.celery import AsyncResult  # noqa: E402


class Rollback(Exception):
    pass


def main() -> None:
    assert tasks.add.delay(2, 3).get(timeout=60) == 5
    assert tasks.mul.delay(4, 5).get(timeout=60) == 20
    assert tasks.xsum.delay([1, 2, 3]).get(timeout=60) == 6
    assert debug_task.delay().get(timeout=60) is None
    widget = Widget.objects.create(name="first")
    assert tasks.count_widgets.delay().get(timeout=60) == 1

    client = Client()
    answer = client.post(f"/widgets/{widget.id}/rename", {"name": "second"}).json()
    AsyncResult(answer["task"]).get(timeout=60)
    widget.refresh_from_db()
    assert widget.name == "second", widget.name  # the task saw the view's committed row

    answer = client.post(f"/widgets/{widget.id}/rename-on-commit", {"name": "third"}).json()
    assert AsyncResult(answer["task"]).get(timeout=60) is None
    widget.refresh_from_db()
    assert widget.name == "third", widget.name

    queue = app.venturi_queue()
    try:
        with transaction.atomic():
            undone = tasks.rename_widget.delay(widget.id, "never")
            raise Rollback
    except Rollback:
        pass
    assert queue.get(undone.id) is None  # the enqueue rolled back with the block
    assert AsyncResult(undone.id).state == "PENDING"
    every = queue.schedules["count-widgets"]  # CELERY_BEAT_SCHEDULE, on Django's queue
    assert every.kind == tasks.count_widgets.name and every.timing.expression == "every 1h"
    print("ok")


with connection.schema_editor() as editor:
    editor.create_model(Widget)
try:
    main()
finally:
    with connection.schema_editor() as editor:
        editor.delete_model(Widget)
