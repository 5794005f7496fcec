"""A fair kind under SIGKILL: worker processes killed mid-run while its jobs take turns
across fifty keys lose nothing, double nothing but killed runs, and leave nothing stuck;
every job was tagged (the jobs were written before any worker declared the kind fair,
so the first declaration tagged them) and ran."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from psycopg import sql

from tests.faults import invariants
from tests.faults.scenario import run_under_sigkills
from tests.faults.server import ThrowawayServer
from tests.support import ledger
from tests.support.fleet import Fleet

JOBS = int(os.environ.get("VENTURI_FAULT_JOBS", "5000")) // 2
KEYS = 50
KILLS = 10
WORKERS = 3
LEASE = 3.0
REAPER_INTERVAL = 0.5


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkilled_workers_of_a_fair_kind_lose_and_double_nothing(
    own_server: ThrowawayServer, own_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    dsn = own_server.dsn
    run = run_under_sigkills(
        dsn,
        own_prefix,
        make_fleet,
        kind=ledger.FAIR_KIND,
        jobs=JOBS,
        kills=KILLS,
        workers=WORKERS,
        lease=LEASE,
        reaper_interval=REAPER_INTERVAL,
        keys=KEYS,
    )
    figures = invariants.check(dsn, own_prefix, run.ids, stale_after=LEASE + REAPER_INTERVAL + 5)
    jobs = sql.Identifier(f"{own_prefix}_jobs")
    [(untagged, keys)] = run.watch.rows(
        sql.SQL(
            "SELECT count(*) FILTER (WHERE fair_tag IS NULL), count(DISTINCT concurrency_key)"
            " FROM {}"
        ).format(jobs)
    )
    kinds = run.watch.rows(
        sql.SQL("SELECT kind, fair FROM {}").format(sql.Identifier(f"{own_prefix}_kinds"))
    )
    run.watch.close()
    print(
        f"\nfair kind under SIGKILL (seed {run.seed}): {JOBS} jobs over {KEYS} keys, "
        f"{len(run.kills)} kills in {run.elapsed:.1f}s\n  {figures.line()}"
    )
    assert figures.statuses == {"completed": JOBS}
    assert (untagged, keys) == (0, KEYS)
    assert (ledger.FAIR_KIND, True) in kinds
