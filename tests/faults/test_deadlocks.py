"""Deadlock-free by construction: a fleet draining a large batch, with no fault injected.

Heartbeats, batched completions and recoveries update many rows of one worker's claims.
If two of them lock those rows in different orders, PostgreSQL aborts one with
"deadlock detected", and the runs it carried stay claimed under leases the heartbeat keeps
renewing. With ``log_lock_waits`` on and a short ``deadlock_timeout``, the server's log
counts both the deadlocks and the lock waits of every run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import LiteralString

import attrs
import psycopg
import pytest
from psycopg import sql

from tests.faults import invariants
from tests.faults.scenario import Watch, enqueue_work, prepare
from tests.faults.server import ThrowawayServer
from tests.support import drop_prefix, fresh_prefix, ledger, wait_until
from tests.support.fleet import Fleet

# Two runs in CI; the README's figures are from VENTURI_DEADLOCK_RUNS=5 (before the fix,
# 4 runs of 5 left claims stuck, so two runs catch that 24 times in 25).
RUNS = int(os.environ.get("VENTURI_DEADLOCK_RUNS", "2"))
PROCESSES = 8
CONCURRENCY = 16
JOBS = 30_000
LEASE = 2.0
# A drain that completes nothing for this long is stuck (a dozen heartbeats, a dozen
# reaper passes: anything recoverable would have been recovered).
STALL = 20.0
RUN_LIMIT = 300.0


@attrs.frozen
class RunFigures:
    completed: int
    stuck: int
    deadlocks: int
    lock_waits: int
    seconds: float
    deadlock_reports: tuple[str, ...] = ()

    def line(self, run: int) -> str:
        return (
            f"run {run}: {self.completed} of {JOBS} completed in {self.seconds:.1f}s; "
            f"stuck claims {self.stuck}; deadlocks {self.deadlocks}; lock waits {self.lock_waits}"
        )


class ServerLog:
    """The lines the server logged since a mark (its log file only grows)."""

    def __init__(self, server: ThrowawayServer) -> None:
        self.path = server.log
        self.offset = self.path.stat().st_size

    def since_mark(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            return log.read().decode(errors="replace")


def _setting(dsn: str, name: LiteralString) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
        return str(row[0]) if row else ""


def _deadlock_reports(log: str) -> tuple[str, ...]:
    """Each "deadlock detected" entry of the log with the lines that follow it (the
    processes' waits, their statements), for the failure message."""
    lines = log.splitlines()
    return tuple(
        "\n".join(lines[at : at + 12])
        for at, line in enumerate(lines)
        if "deadlock detected" in line
    )


def _drain(watch: Watch) -> float:
    """Wait until nothing is unfinished, or nothing finished for `STALL` seconds."""
    began = time.monotonic()
    last, progressed = watch.unfinished(), time.monotonic()
    while last and time.monotonic() - progressed < STALL:
        assert time.monotonic() - began < RUN_LIMIT, f"{last} jobs unfinished after {RUN_LIMIT}s"
        time.sleep(0.5)  # a poll interval, not a wait for something to happen
        now = watch.unfinished()
        if now < last:
            last, progressed = now, time.monotonic()
    return time.monotonic() - began


def _one_run(server: ThrowawayServer, make_fleet: Callable[..., Fleet]) -> RunFigures:
    dsn = server.dsn
    prefix = fresh_prefix("deadlock")
    try:
        queue = prepare(dsn, prefix)
        ids = enqueue_work(queue, JOBS)
        queue.close()
        log = ServerLog(server)
        fleet = make_fleet(dsn, prefix, concurrency=CONCURRENCY, pool_size=8, lease=LEASE)
        workers = [fleet.spawn(wait=False) for _ in range(PROCESSES)]
        for worker in workers:
            worker.wait_started()
        watch = Watch(dsn, prefix)
        seconds = _drain(watch)
        fleet.close()  # graceful: whatever a worker still holds is released or stays stuck
        claimed = sql.SQL("SELECT count(*) FROM {} WHERE status = 'claimed'").format(watch.jobs)
        stuck = int(watch.rows(claimed)[0][0])
        completed = watch.count("completed")
        watch.close()
        text = log.since_mark()
        figures = RunFigures(
            completed,
            stuck,
            text.count("deadlock detected"),
            text.count("still waiting for"),
            seconds,
            _deadlock_reports(text),
        )
        if not stuck and completed == JOBS:
            invariants.check(dsn, prefix, ids)
        return figures
    finally:
        ledger.drop(dsn, prefix)
        drop_prefix(dsn, prefix)


@pytest.mark.slow
@pytest.mark.timeout(RUNS * (RUN_LIMIT + 120))
def test_a_fleet_drains_without_deadlocks_or_stuck_claims(
    own_server: ThrowawayServer, make_fleet: Callable[..., Fleet]
) -> None:
    own_server.write_conf({"log_lock_waits": "on", "deadlock_timeout": "'100ms'"})
    own_server.reload()
    wait_until(
        lambda: _setting(own_server.dsn, "deadlock_timeout") == "100ms", 10, what="the reload"
    )
    figures: list[RunFigures] = []
    try:
        for run in range(1, RUNS + 1):
            figures.append(_one_run(own_server, make_fleet))
            print(figures[-1].line(run))
    finally:  # the server outlives this test: give the next ones its defaults back
        own_server.write_conf({"log_lock_waits": "off", "deadlock_timeout": "'1s'"})
        own_server.reload()
    stuck = sum(f.stuck for f in figures)
    deadlocks = sum(f.deadlocks for f in figures)
    waits = sum(f.lock_waits for f in figures)
    print(
        f"{RUNS} runs x {PROCESSES} processes x concurrency {CONCURRENCY} x {JOBS} jobs: "
        f"stuck claims {stuck} (runs with any: {sum(1 for f in figures if f.stuck)}), "
        f"deadlocks {deadlocks}, lock waits {waits}"
    )
    reports = "\n\n".join(report for f in figures for report in f.deadlock_reports)
    assert deadlocks == 0, f"the server detected {deadlocks} deadlocks:\n{reports}"
    assert stuck == 0, f"{stuck} claims stuck after the workers stopped"
    assert all(f.completed == JOBS for f in figures), [f.completed for f in figures]
