"""Tasks exercising retries, backoff, time limits, rate limits and revocation."""

from __future__ import annotations

import os
import threading
from typing import Any

import venturi
from venturi.contrib.celery import shared_task

from .celery import app


class FlakyError(Exception):
    """Raised by the flaky tasks until their budget of failures is spent."""


@app.task(bind=True, max_retries=3, default_retry_delay=0.1)
def retry_until(self: Any, succeed_on: int) -> dict[str, Any]:
    if self.request.retries < succeed_on:
        raise self.retry(exc=FlakyError(f"attempt {self.request.retries}"))
    return {"id": self.request.id, "retries": self.request.retries}


@app.task(bind=True, max_retries=1)
def retry_countdown(self: Any, countdown: float) -> int:
    if self.request.retries == 0:
        raise self.retry(countdown=countdown)
    return int(self.request.retries)


@app.task(
    bind=True,
    autoretry_for=(FlakyError,),
    retry_backoff=True,
    retry_backoff_max=1,
    retry_jitter=False,
    max_retries=2,
)
def autoretried(self: Any, fail_times: int) -> int:
    if self.request.retries < fail_times:
        raise FlakyError(f"failure {self.request.retries + 1}")
    return int(self.request.retries)


class PermanentError(FlakyError):
    """A flaky error that no retry will fix."""


@app.task(bind=True, autoretry_for=(FlakyError,), dont_autoretry_for=(PermanentError,))
def gives_up(self: Any) -> None:
    raise PermanentError(f"after {self.request.retries} retries")


@app.task(name="proj.explode")
def explode(message: str) -> None:
    raise LookupError(message)


@app.task(name="proj.echo", acks_late=True, ignore_result=False, rate_limit="100/m")
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@app.task(name="proj.not_json")
def not_json() -> object:
    return object()


@app.task(soft_time_limit=30, time_limit=60)
def sleepy(seconds: float) -> str:
    threading.Event().wait(seconds)
    return "slept"


@app.task(soft_time_limit=0.2)
def stops_at_its_time_limit() -> str:
    # A time limit kills nothing: it sets the run's stopping event, which the task checks.
    run = venturi.current_job()
    assert run is not None
    return "stopped" if run.stopping.wait(30) else "ran on"


@shared_task
def tick(label: str, step: int = 0) -> str:
    return f"{label}:{step}:{os.getpid()}"
