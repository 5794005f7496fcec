"""The project's Celery app, as Celery's examples make one, but for the import line."""

from venturi.contrib.celery import Celery

app = Celery("proj", include=["tests.contrib.celery.proj.tasks"])
app.config_from_object("tests.contrib.celery.proj.celeryconfig")
app.autodiscover_tasks(["tests.contrib.celery.demoapp"])
