"""Fixtures for the Celery-compatible API: the test's prefix in the environment (where a
Celery app reads it), apps closed after each test, and real `venturi worker --app`
processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from venturi.contrib.celery.current import all_apps

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def celery_env(database_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """VENTURI_DSN and VENTURI_PREFIX set for this test; every app's queue closed after."""
    monkeypatch.setenv("VENTURI_DSN", database_dsn)
    monkeypatch.setenv("VENTURI_PREFIX", prefix)
    yield prefix
    for app in all_apps():
        app.close()


StartWorker = Callable[..., subprocess.Popen[bytes]]
# What a project's manage.py does.
MANAGE_PY = (
    "import sys; from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', *sys.argv[1:]])"
)


@pytest.fixture
def celery_worker(celery_env: str, database_dsn: str, tmp_path: Path) -> Iterator[StartWorker]:
    """Start `venturi worker --app SPEC ARGS` processes; each stopped with SIGTERM after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(spec: str, *args: str) -> subprocess.Popen[bytes]:
        """``spec`` is an ``--app`` target, or ``manage.py`` for Django's command (the
        project named by DJANGO_SETTINGS_MODULE)."""
        log = tmp_path / f"worker-{len(started)}.log"
        env = {**os.environ, "VENTURI_DSN": database_dsn, "VENTURI_PREFIX": celery_env}
        if spec == "manage.py":
            command = [sys.executable, "-c", MANAGE_PY, "venturi", "worker"]
        else:
            command = [sys.executable, "-m", "venturi", "worker", "--app", spec]
        command += ["--poll-interval", "1s"]
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*command, *args], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        process.log = log  # type: ignore[attr-defined]
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
