"""Django integration: the project's queue, ORM-transactional enqueue, ``manage.py
venturi`` and a ``django.tasks`` backend.

```python
INSTALLED_APPS = [..., "venturi.contrib.django"]
VENTURI = {"DATABASE": "default", "PREFIX": "venturi"}
TASKS = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend"}}  # Django 6.0+
```
"""

from __future__ import annotations

from typing import Any

from .conf import SettingsError, VenturiSettings, connection_params, connection_string
from .connection import django_connection
from .queue import (
    enqueue,
    enqueue_on_commit,
    get_queue,
    job,
    periodic,
    registry,
    reset_queue,
    schedule,
)

__all__ = [
    "SettingsError",
    "VenturiBackend",
    "VenturiSettings",
    "connection_params",
    "connection_string",
    "django_connection",
    "enqueue",
    "enqueue_on_commit",
    "get_queue",
    "job",
    "periodic",
    "registry",
    "reset_queue",
    "schedule",
]


def __getattr__(name: str) -> Any:
    # Imported on demand: django.tasks exists only from Django 6.0, and the rest of this
    # package works without it.
    if name == "VenturiBackend":
        try:
            from .tasks import VenturiBackend
        except ImportError as exc:
            raise ImportError(
                f"venturi.contrib.django.VenturiBackend needs Django 6.0+ (django.tasks): {exc}"
            ) from exc
        return VenturiBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
