"""The "First steps with Celery" tasks module, as Celery's tutorial writes it but for the
import line (the broker URL is not PostgreSQL, so the jobs go to VENTURI_DSN)."""

from venturi.contrib.celery import Celery

app = Celery("tasks", broker="pyamqp://guest@localhost//")


@app.task
def add(x, y):  # type: ignore[no-untyped-def]
    return x + y
