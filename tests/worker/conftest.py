"""Fixtures for the worker tests: a migrated `Queue` per test, plain-SQL access to its
tables, workers that are always stopped, and worker processes that are always killed."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql
import pytest

from tests.support import Probe
from venturi import Queue, Worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    """A migrated queue under this test's prefix."""
    instance = Queue(database_dsn, prefix=prefix, pool_size=8)
    instance.migrate()
    yield instance
    instance.close()


@pytest.fixture
def probe(database_dsn: str, queue: Queue) -> Iterator[Probe]:
    """Plain SQL on this test's tables, behind the queue's back."""
    instance = Probe(database_dsn, queue.prefix)
    yield instance
    instance.close()


@pytest.fixture
def start_worker(queue: Queue) -> Iterator[Callable[..., Worker]]:
    """Start workers on the test's queue with test-friendly intervals; all are stopped
    at teardown (before the queue closes)."""
    started: list[Worker] = []

    def start(**options: Any) -> Worker:
        options.setdefault("poll_interval", 1.0)
        options.setdefault("reaper_interval", 0.2)
        worker = queue.worker(**options)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop(timeout=5)


class Child:
    """A worker process running `tests.worker.proc_worker`."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def line(self, timeout: float = 60.0) -> str:
        """The next line the child prints; fails after ``timeout`` or if it exits."""
        stdout = self.popen.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        assert ready, f"worker process {self.pid} printed nothing within {timeout}s"
        return stdout.readline().strip()

    def wait_ready(self) -> None:
        line = self.line()
        assert line == "ready", f"worker process said {line!r}: {self.stderr_text()}"

    def exit_code(self, timeout: float = 60.0) -> int:
        return self.popen.wait(timeout)

    def stderr_text(self) -> str:
        if self.popen.poll() is None:
            return "(still running)"
        assert self.popen.stderr is not None
        return self.popen.stderr.read()


@pytest.fixture
def spawn(database_dsn: str, prefix: str, ledger: str) -> Iterator[Callable[..., Child]]:
    """Start worker processes (`proc_worker` options as arguments); all are killed at
    teardown, before their ledger and the prefix's tables are dropped."""
    children: list[Child] = []

    def start(*args: str) -> Child:
        popen = subprocess.Popen(
            [sys.executable, "-m", "tests.worker.proc_worker", database_dsn, prefix, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(Child(popen))
        return children[-1]

    yield start
    for child in children:
        if child.popen.poll() is None:
            child.popen.kill()
        child.popen.communicate(timeout=30)


@pytest.fixture
def ledger(database_dsn: str, queue: Queue) -> Iterator[str]:
    """The table the process workers' handlers write one row per run into."""
    table = psycopg.sql.Identifier(f"{queue.prefix}_ledger")
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL(
                "CREATE TABLE {} (job_id uuid NOT NULL, run_no int NOT NULL, pid int NOT NULL)"
            ).format(table)
        )
    yield f"{queue.prefix}_ledger"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP TABLE IF EXISTS {}").format(table))
