"""The Django app: ``INSTALLED_APPS = [..., "venturi.contrib.django"]``."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    from .queue import reset_queue

    if setting in ("VENTURI", "DATABASES"):
        reset_queue()
    elif setting == "TASKS" and tasks_available():
        from .tasks import register_configured_backends

        register_configured_backends()


def tasks_available() -> bool:
    """True when this Django has the Tasks framework (``django.tasks``, Django 6.0+)."""
    return importlib.util.find_spec("django.tasks") is not None


class VenturiConfig(AppConfig):
    """Adds ``manage.py venturi`` and registers the kinds of ``TASKS`` venturi backends.

    Nothing connects here: the queue is built on first use.
    """

    name = "venturi.contrib.django"
    label = "venturi"
    verbose_name = "venturi job queue"

    def ready(self) -> None:
        setting_changed.connect(_settings_changed, dispatch_uid="venturi.settings_changed")
        if tasks_available():
            from .tasks import register_configured_backends

            # Here rather than in the backend's constructor alone: Django builds backends
            # lazily, and a worker process may never touch one before it starts claiming.
            register_configured_backends()
