"""Fixtures for the worker tests: a migrated `Queue` per test, plain-SQL access to its
tables, workers that are always stopped, and worker processes that are always stopped
(the ledger fleet, and the flow control processes of `tests.worker.flow_proc`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support import Probe, ledger, wait_until
from tests.support.fleet import REPO_ROOT, Fleet
from venturi import Queue, Worker

# Flow worker processes each fixture starts.
PROCESSES = 4


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


@pytest.fixture
def fleet(database_dsn: str, queue: Queue, tmp_path: Path) -> Iterator[Fleet]:
    """Worker processes on the test's prefix, recording their runs in its ledger; every
    process is stopped at teardown, before the ledger and the prefix's tables go."""
    ledger.create(database_dsn, queue.prefix)
    processes = Fleet(
        database_dsn,
        queue.prefix,
        tmp_path,
        concurrency=2,
        pool_size=6,
        lease=30,
        reaper_interval=0.2,
        stop_timeout=30,
    )
    yield processes
    processes.close()
    ledger.drop(database_dsn, queue.prefix)


@pytest.fixture
def flow_ledger(database_dsn: str, queue: Queue) -> Iterator[str]:
    """The table the flow worker processes record each run in."""
    table = sql.Identifier(f"{queue.prefix}_flowledger")
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (job_id uuid NOT NULL, concurrency_key text, "
                "claimed_at timestamptz NOT NULL, started float8 NOT NULL, "
                "ended float8 NOT NULL, pid int NOT NULL)"
            ).format(table)
        )
    yield f"{queue.prefix}_flowledger"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))


class FlowProcess:
    """One ``python -m tests.worker.flow_proc`` child; its stdout and stderr go to one
    log file (a pipe nobody reads could fill and stall it)."""

    def __init__(self, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.worker.flow_proc", *args],
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        """Wait until it printed ``ready`` (its listener is up)."""

        def ready() -> bool:
            lines = self.log().splitlines()
            if "not listening" in lines or self.proc.poll() is not None:
                raise AssertionError(f"flow worker {self.proc.pid} never listened:\n{self.log()}")
            return "ready" in lines

        wait_until(ready, 60, interval=0.05, what=f"flow worker {self.proc.pid} to listen")

    def stop(self) -> None:
        """SIGTERM; SIGKILL if it has not exited within 30 s. Closes its log."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self._log.close()


@pytest.fixture
def flow_workers(
    database_dsn: str, prefix: str, flow_ledger: str, tmp_path: Path
) -> Iterator[Callable[..., None]]:
    """Start ``PROCESSES`` flow worker processes with the given options, each ready
    (listening) before it returns; all are stopped at teardown."""
    children: list[FlowProcess] = []

    def start(*args: str) -> None:
        for _ in range(PROCESSES):
            log_path = tmp_path / f"flow{len(children) + 1}.log"
            children.append(FlowProcess(log_path, database_dsn, prefix, *args))
        for child in children:
            child.wait_ready()

    yield start
    for child in children:
        child.stop()
