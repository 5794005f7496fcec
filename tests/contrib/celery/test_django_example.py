"""Celery's Django example project (tasks, views, ``on_commit``) on venturi: a real
`venturi worker --app` runs its tasks, and the requests run in a child process of their
own, since Django is configured once per process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import REPO, StartWorker

pytest.importorskip("django")

APP = "tests.contrib.celery.djangoproj.celery:app"


@pytest.mark.parametrize("worker_command", [APP, "manage.py"])
def test_the_django_example_runs_on_venturi(
    celery_worker: StartWorker, database_dsn: str, prefix: str, worker_command: str
) -> None:
    """Through `venturi worker --app proj.celery:app` and `manage.py venturi worker`."""
    env = {
        **os.environ,
        "CELERY_EXAMPLE_DSN": database_dsn,
        "CELERY_EXAMPLE_PREFIX": prefix,
        "DJANGO_SETTINGS_MODULE": "tests.contrib.celery.djangoproj.settings",
    }
    names = ("CELERY_EXAMPLE_DSN", "CELERY_EXAMPLE_PREFIX", "DJANGO_SETTINGS_MODULE")
    os.environ.update({k: env[k] for k in names})
    try:
        worker = celery_worker(worker_command, "-c", "2")
        done = subprocess.run(
            [sys.executable, "-m", "tests.contrib.celery.djangoproj.scenario"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        for name in names:
            os.environ.pop(name, None)
    log = worker.log.read_text()  # type: ignore[attr-defined]
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\nworker:\n{log}"
    assert done.stdout.strip().endswith("ok")
