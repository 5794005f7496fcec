"""A Celery-compatible task API on venturi, without Celery: change
``from celery import Celery, shared_task`` to
``from venturi.contrib.celery import Celery, shared_task`` and the tasks run on venturi.

See the guide "Coming from Celery" for what is supported, what differs and what raises
`NotSupported`.
"""

from . import states
from .app import Celery
from .beat import crontab
from .canvas import Signature, chain, chord, group, signature
from .current import current_app
from .exceptions import (
    MaxRetriesExceededError,
    NotSupported,
    Retry,
    TaskRevokedError,
    TimeoutError,
)
from .results import AsyncResult, GroupResult
from .running import Request
from .tasks import Task, shared_task

__all__ = [
    "AsyncResult",
    "Celery",
    "GroupResult",
    "MaxRetriesExceededError",
    "NotSupported",
    "Request",
    "Retry",
    "Signature",
    "Task",
    "TaskRevokedError",
    "TimeoutError",
    "chain",
    "chord",
    "crontab",
    "current_app",
    "group",
    "shared_task",
    "signature",
    "states",
]
