"""Worker processes killed with SIGKILL mid-run: nothing lost, duplicates only for killed runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

import pytest
from psycopg import sql

from tests.faults import invariants
from tests.faults.scenario import Watch, run_under_sigkills
from tests.faults.server import ThrowawayServer
from tests.support import ledger
from tests.support.fleet import Fleet

JOBS = int(os.environ.get("VENTURI_FAULT_JOBS", "5000"))
KILLS = 20
WORKERS = 3
LEASE = 3.0  # heartbeats every second: a loaded CI machine must not lapse one
REAPER_INTERVAL = 0.5


def _recovery_latencies(watch: Watch, prefix: str, kills: dict[str, datetime]) -> list[float]:
    """Seconds from each kill to the recovery of each run the killed worker held."""
    rows = watch.rows(
        sql.SQL(
            "SELECT substring(note FROM 'lease held by (\\S+) expired'), recorded_at"
            " FROM {} WHERE outcome IN ('recovered', 'dead') AND note LIKE 'lease held by %%'"
        ).format(sql.Identifier(f"{prefix}_journal"))
    )
    latencies = []
    for worker, recorded_at in rows:
        assert worker in kills, f"a run of {worker}, which was never killed, was recovered"
        latencies.append((recorded_at - kills[worker]).total_seconds())
    return latencies


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkill_random_workers_during_a_run(
    own_server: ThrowawayServer, own_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    dsn = own_server.dsn
    run = run_under_sigkills(
        dsn,
        own_prefix,
        make_fleet,
        kind=ledger.WORK_KIND,
        jobs=JOBS,
        kills=KILLS,
        workers=WORKERS,
        lease=LEASE,
        reaper_interval=REAPER_INTERVAL,
    )
    ids, seed, kills, elapsed, watch = run.ids, run.seed, run.kills, run.elapsed, run.watch
    figures = invariants.check(dsn, own_prefix, ids, stale_after=LEASE + REAPER_INTERVAL + 5)
    latencies = _recovery_latencies(watch, own_prefix, kills)
    killed_executions = sum(1 for row in watch.executions() if row[2] in kills)
    watch.close()
    print(
        f"\nworker crashes (seed {seed}): {JOBS} jobs, {WORKERS} worker processes, "
        f"{len(kills)} SIGKILLs in {elapsed:.1f}s\n  {figures.line()}\n"
        f"  executions by killed workers {killed_executions}; runs recovered "
        f"{len(latencies)}; kill -> recovery max {max(latencies, default=0):.2f}s "
        f"(lease {LEASE}s + reaper interval {REAPER_INTERVAL}s)"
    )
    assert figures.statuses == {"completed": JOBS}
    assert latencies, "no run was recovered: the kills hit idle workers only"
    # Not a speed claim: a run the reaper missed would wait forever, not a second longer.
    assert max(latencies) < LEASE + REAPER_INTERVAL + 10
