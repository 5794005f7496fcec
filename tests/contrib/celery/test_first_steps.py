"""Celery's "First steps" tutorial, run on venturi through a real `venturi worker`."""

from __future__ import annotations

from venturi.contrib.celery import AsyncResult

from .conftest import StartWorker
from .first_steps import tasks


def test_the_tutorials_add_runs_on_a_venturi_worker(celery_worker: StartWorker) -> None:
    worker = celery_worker("tests.contrib.celery.first_steps.tasks:app", "-c", "2")
    result = tasks.add.delay(4, 4)
    assert result.get(timeout=60) == 8, worker.log.read_text()  # type: ignore[attr-defined]
    assert result.ready() and result.successful() and not result.failed()
    assert result.state == result.status == "SUCCESS"
    again = AsyncResult(result.id, app=tasks.app)
    assert again.get(timeout=1) == 8 and again.result == 8
    assert tasks.add.name == "tests.contrib.celery.first_steps.tasks.add"


def test_calling_the_task_runs_it_inline(celery_env: str) -> None:
    assert tasks.add(2, 3) == 5
