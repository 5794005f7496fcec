"""Transactional runs under faults: killed, frozen and taken-over workers never commit an
effect twice. Each run of `ledger.TXN_KIND` writes one effects row in its transaction and
one execution row on a connection of its own: the executions show every run (at least
once); the effects must show exactly one row per completed job."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from psycopg import sql

from tests.faults import effects, invariants
from tests.faults.scenario import Watch, prepare, run_under_sigkills
from tests.faults.server import ThrowawayServer
from tests.support import ledger, wait_until
from tests.support.fleet import Fleet, WorkerProcess

JOBS = int(os.environ.get("VENTURI_FAULT_JOBS", "5000"))
KILLS = 20
WORKERS = 3
LEASE = 3.0
REAPER_INTERVAL = 0.5


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkilled_workers_never_commit_an_effect_twice(
    own_server: ThrowawayServer, own_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    dsn = own_server.dsn
    run = run_under_sigkills(
        dsn,
        own_prefix,
        make_fleet,
        kind=ledger.TXN_KIND,
        jobs=JOBS,
        kills=KILLS,
        workers=WORKERS,
        lease=LEASE,
        reaper_interval=REAPER_INTERVAL,
    )
    ids, seed, killed, elapsed, watch = run.ids, run.seed, run.kills, run.elapsed, run.watch
    figures = invariants.check(dsn, own_prefix, ids, stale_after=LEASE + REAPER_INTERVAL + 5)
    effect_figures = effects.check(dsn, own_prefix)
    killed_executions = sum(1 for row in watch.executions() if row[2] in killed)
    watch.close()
    recovered = figures.journal.get("recovered", 0)
    print(
        f"\ntransactional runs under SIGKILL (seed {seed}): {JOBS} jobs, {WORKERS} worker "
        f"processes, {len(killed)} workers killed by {KILLS} SIGKILLs in {elapsed:.1f}s\n"
        f"  {figures.line()}\n  runs recovered {recovered}; executions by killed workers "
        f"{killed_executions}; executions beyond one per job "
        f"{figures.executions - JOBS}\n  {effect_figures.line()}"
    )
    assert figures.statuses == {"completed": JOBS}
    assert recovered > 0, "no run was recovered: the kills hit idle workers only"
    assert figures.executions > JOBS, "no run was executed twice: nothing was proven"
    assert (effect_figures.effect_rows, effect_figures.duplicates) == (JOBS, 0)


def _executor(watch: Watch, fleet: Fleet, run: int) -> WorkerProcess:
    def started() -> str | None:
        return next((str(row[2]) for row in watch.executions() if row[1] == run), None)

    name = wait_until(started, 60, 0.02, f"run {run} to start")
    return next(w for w in fleet.workers if w.name == name)


def _effect_rows(watch: Watch, prefix: str) -> list[tuple[object, ...]]:
    return watch.rows(
        sql.SQL("SELECT run_no, worker FROM {} ORDER BY run_no").format(
            ledger.effects_table(prefix)
        )
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_frozen_worker_wakes_to_a_fenced_commit(
    database_dsn: str, shared_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    queue = prepare(database_dsn, shared_prefix)
    fleet = make_fleet(
        database_dsn, shared_prefix, lease=1.0, reaper_interval=0.25, concurrency=1, prefetch=0
    )
    first, second = fleet.spawn(), fleet.spawn()
    # Run 1 writes its effect, then waits 30 s (or until told its lease is gone).
    job_id = queue.enqueue(ledger.TXN_KIND, {"first_ms": 30_000})
    queue.close()
    watch = Watch(database_dsn, shared_prefix)
    zombie = _executor(watch, fleet, 1)
    other = second if zombie is first else first
    zombie.signal(signal.SIGSTOP)
    wait_until(lambda: watch.count("completed") == 1, 60, 0.05, "the other worker to finish")
    assert _effect_rows(watch, shared_prefix) == [(2, other.name)]
    zombie.signal(signal.SIGCONT)
    wait_until(lambda: "fenced: job" in zombie.log(), 60, 0.05, "the zombie's fenced commit")
    fleet.close()
    figures = invariants.check(database_dsn, shared_prefix, [job_id])
    effect_figures = effects.check(database_dsn, shared_prefix)
    rows = _effect_rows(watch, shared_prefix)
    executions = [(row[1], row[2]) for row in watch.executions()]
    watch.close()
    print(
        f"\nfrozen transactional run: {figures.line()}\n  {effect_figures.line()}; effects {rows}"
    )
    assert executions == [(1, zombie.name), (2, other.name)]
    assert rows == [(2, other.name)]  # the zombie's effect never appears
    assert figures.journal == {"recovered": 1, "completed": 1}
