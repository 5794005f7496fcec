"""The project's settings module, read with ``app.config_from_object``."""

from datetime import timedelta

from venturi.contrib.celery import crontab

timezone = "Europe/Berlin"
task_serializer = "json"
accept_content = ["json"]
task_acks_late = True
beat_schedule = {
    "tick-every-second": {
        "task": "tests.contrib.celery.proj.tasks.tick",
        "schedule": timedelta(seconds=1),
        "args": ("beat",),
        "kwargs": {"step": 1},
    },
    "nightly": {
        "task": "tests.contrib.celery.proj.tasks.tick",
        "schedule": crontab(hour=3, minute=30, day_of_week="mon-fri"),
        "args": ("night",),
    },
}
