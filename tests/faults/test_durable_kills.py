"""Durable handlers under SIGKILL: worker processes running jobs of recorded steps are
killed twenty times, between steps and inside them. Every job completes; each
transactional step's work committed exactly once (its ledger row is written in the
step's own transaction); each job's result is what its recorded steps returned, however
many runs it took."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from psycopg import sql

import venturi
from tests.faults import durable_worker
from tests.support import wait_until
from tests.support.fleet import REPO_ROOT, _child_env

JOBS = 60
KILLS = 20
WORKERS = 2
# Steps each job records: a transactional and a plain one per round, and its sleep.
STEPS_PER_JOB = 2 * durable_worker.STEPS + 1


class Process:
    """One ``python -m tests.faults.durable_worker`` child, its output in a log file."""

    def __init__(self, dsn: str, prefix: str, name: str, log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.durable_worker", dsn, prefix, name],
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=_child_env(),
        )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._log.close()

    def stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture
def ledgers(database_dsn: str, prefix: str) -> Iterator[None]:
    durable_worker.create(database_dsn, prefix)
    yield
    durable_worker.drop(database_dsn, prefix)


def _scalar(conn: psycopg.Connection[Any], query: sql.Composed) -> Any:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkilled_durable_runs_record_each_step_once_and_complete(
    database_dsn: str, prefix: str, ledgers: None, tmp_path: Path
) -> None:
    queue = venturi.Queue(database_dsn, prefix=prefix)
    queue.migrate()
    ids = queue.enqueue_many([venturi.NewJob(durable_worker.KIND) for _ in range(JOBS)])
    seed = int(os.environ.get("VENTURI_FAULT_SEED", str(time.time_ns() % 100_000)))
    rng = random.Random(seed)
    processes = [Process(database_dsn, prefix, f"d{n}", tmp_path) for n in range(WORKERS)]
    watch = psycopg.connect(database_dsn, autocommit=True)
    steps = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(f"{prefix}_steps"))
    total = JOBS * STEPS_PER_JOB
    began = time.monotonic()
    try:
        for number in range(1, KILLS + 1):
            target = total * number // (KILLS + 2)
            wait_until(lambda t=target: _scalar(watch, steps) >= t, 120, 0.01, "progress")  # type: ignore[misc]
            victim = rng.choice([p for p in processes if p.alive])
            victim.kill()
            processes.append(Process(database_dsn, prefix, f"d{len(processes)}", tmp_path))
        unfinished = sql.SQL(
            "SELECT count(*) FROM {} WHERE status NOT IN ('completed', 'dead', 'cancelled')"
        ).format(sql.Identifier(f"{prefix}_jobs"))
        wait_until(lambda: _scalar(watch, unfinished) == 0, 300, 0.2, "every job settled")
        elapsed = time.monotonic() - began
        statuses: dict[str, int] = dict(
            watch.execute(
                sql.SQL("SELECT status, count(*) FROM {} GROUP BY 1").format(
                    sql.Identifier(f"{prefix}_jobs")
                )
            ).fetchall()
        )
        journal: dict[str, int] = dict(
            watch.execute(
                sql.SQL("SELECT outcome, count(*) FROM {} GROUP BY 1").format(
                    sql.Identifier(f"{prefix}_journal")
                )
            ).fetchall()
        )
        per_table = {}
        for name, table in (
            ("transactional", durable_worker.effects(prefix)),
            ("plain", durable_worker.runs(prefix)),
        ):
            rows, calls, twice = watch.execute(
                sql.SQL(
                    "SELECT count(*), coalesce(sum(calls), 0), count(*) FILTER (WHERE calls > 1)"
                    " FROM {}"
                ).format(table)
            ).fetchone() or (0, 0, 0)
            per_table[name] = (rows, calls, twice)
        recorded = _scalar(watch, steps)
        mismatched = 0
        for job_id in ids:
            job = queue.get(job_id)
            assert job is not None and job.durable is not None
            results = [s.result for s in job.durable.steps if not s.name.startswith("sleep")]
            if queue.result(job_id, timeout=5) != results:
                mismatched += 1
    finally:
        for process in processes:
            if process.alive:
                process.stop()
        watch.close()
        queue.close()
    runs = sum(journal.get(o, 0) for o in ("completed", "recovered", "paused", "retried"))
    print(
        f"\ndurable runs under SIGKILL (seed {seed}): {JOBS} jobs of {STEPS_PER_JOB} steps, "
        f"{WORKERS} worker processes, {KILLS} SIGKILLs in {elapsed:.1f}s\n"
        f"  runs {runs} (journal {journal}); steps recorded {recorded}\n"
        f"  transactional steps: {per_table['transactional'][0]} effects committed by "
        f"{per_table['transactional'][1]} runs, {per_table['transactional'][2]} twice\n"
        f"  plain steps: {per_table['plain'][0]} recorded, their work finished "
        f"{per_table['plain'][1]} times ({per_table['plain'][2]} finished again after a "
        "kill between the work and its record)\n"
        f"  jobs whose result differs from their recorded steps: {mismatched}"
    )
    assert statuses == {"completed": JOBS}
    assert recorded == total
    assert journal.get("recovered", 0) > 0, "no kill interrupted a run: nothing was proven"
    assert per_table["transactional"] == (JOBS * durable_worker.STEPS,) * 2 + (0,)
    assert per_table["plain"][0] == JOBS * durable_worker.STEPS
    assert mismatched == 0
