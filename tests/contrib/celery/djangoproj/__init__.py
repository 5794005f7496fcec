"""Celery's Django example project (``examples/django``), as written there but for the
import lines; run only in child processes (`test_django_example`), since Django is
configured once per process. Its package imports the app, as Celery's guide asks."""

from .celery import app as celery_app

__all__ = ("celery_app",)
