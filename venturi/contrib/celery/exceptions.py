"""The errors of the Celery-compatible API, named as Celery names them."""

from __future__ import annotations

import builtins

from venturi.errors import ConfigurationError, VenturiError


class NotSupported(ConfigurationError):
    """A Celery feature this API does not provide; the message names the feature and
    what to use instead. Raised where the feature is configured or called, never later."""

    def __init__(self, feature: str, instead: str) -> None:
        super().__init__(f"{feature} is not supported by venturi.contrib.celery: {instead}")
        self.feature = feature


class Retry(Exception):  # Celery's name
    """Raised by ``self.retry()``: the run ends and the task runs again after ``when``
    seconds (None: the task's ``default_retry_delay``)."""

    def __init__(
        self, message: str | None = None, exc: BaseException | None = None, when: float = 0.0
    ) -> None:
        super().__init__(message or "retry requested")
        self.exc = exc
        self.when = when


class MaxRetriesExceededError(VenturiError):
    """``self.retry()`` was called after the task's ``max_retries`` retries."""


class TaskRevokedError(VenturiError):
    """``AsyncResult.get()`` of a task that was revoked (venturi: cancelled)."""


class TimeoutError(VenturiError, builtins.TimeoutError):  # Celery's name
    """``AsyncResult.get(timeout=...)`` passed before the task finished."""
