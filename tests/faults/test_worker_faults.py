"""A frozen worker, a handler that holds the GIL past its lease, and graceful shutdown."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from psycopg import sql
from ulid import ULID

from tests.faults import invariants
from tests.faults.scenario import Watch, prepare
from tests.support import ledger, wait_until
from tests.support.fleet import Fleet, WorkerProcess

LEASE = 1.0
REAPER_INTERVAL = 0.25
STOP_SLACK = 5.0  # seconds a graceful stop may take past its grace on a busy machine


def _executor(watch: Watch, fleet: Fleet, run: int) -> WorkerProcess:
    """The worker process that started ``run`` of the (only) job, from the ledger."""

    def started() -> str | None:
        return next((str(row[2]) for row in watch.executions() if row[1] == run), None)

    name = wait_until(started, 60, 0.02, f"run {run} to start")
    return next(w for w in fleet.workers if w.name == name)


def _takeover(
    dsn: str, prefix: str, make_fleet: Callable[..., Fleet], kind: str, payload: dict[str, object]
) -> tuple[Fleet, Watch, ULID, WorkerProcess, WorkerProcess]:
    """Two idle workers and one job: returns the one running it and the other one."""
    queue = prepare(dsn, prefix)
    fleet = make_fleet(
        dsn, prefix, lease=LEASE, reaper_interval=REAPER_INTERVAL, concurrency=1, prefetch=0
    )
    first, second = fleet.spawn(), fleet.spawn()
    job_id = queue.enqueue(kind, payload)
    queue.close()
    watch = Watch(dsn, prefix)
    holder = _executor(watch, fleet, 1)
    other = second if holder is first else first
    return fleet, watch, job_id, holder, other


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_frozen_worker_is_fenced_when_it_wakes(
    database_dsn: str, shared_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    fleet, watch, job_id, zombie, other = _takeover(
        database_dsn, shared_prefix, make_fleet, ledger.WORK_KIND, {"first_ms": 30_000}
    )
    zombie.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    wait_until(lambda: watch.count("completed") == 1, 60, 0.05, "the other worker to finish")
    frozen_for = time.monotonic() - frozen_at
    zombie.signal(signal.SIGCONT)
    wait_until(lambda: "fenced: job" in zombie.log(), 60, 0.05, "the zombie to log its fencing")
    assert zombie.alive, zombie.log()
    fleet.close()
    figures = invariants.check(database_dsn, shared_prefix, [job_id])
    executions = watch.executions()
    watch.close()
    fenced = next(line for line in zombie.log().splitlines() if "fenced: job" in line)
    print(
        f"\nfrozen worker: SIGSTOP for {frozen_for:.1f}s past a {LEASE}s lease; run 2 by "
        f"{other.name} completed; zombie {zombie.name} woke and logged:\n  {fenced}\n"
        f"  {figures.line()}"
    )
    assert [(row[1], row[2]) for row in executions] == [(1, zombie.name), (2, other.name)]
    assert figures.journal == {"recovered": 1, "completed": 1}
    assert "lost its lease" in zombie.log()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_handler_holding_the_gil_past_its_lease(
    database_dsn: str, shared_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    """Documented outcome: the heartbeat cannot run, the lease lapses, another worker
    reaps and re-runs the job, and the late settlement is fenced; nothing is corrupted."""
    hold = 5 * LEASE
    fleet, watch, job_id, holder, other = _takeover(
        database_dsn, shared_prefix, make_fleet, ledger.GIL_KIND, {"seconds": hold}
    )
    wait_until(lambda: watch.count("completed") == 1, 60, 0.05, "the other worker to finish")
    wait_until(lambda: "fenced: job" in holder.log(), 60, 0.05, "the late settlement's fencing")
    fleet.close()
    figures = invariants.check(database_dsn, shared_prefix, [job_id])
    executions = watch.executions()
    watch.close()
    print(
        f"\nGIL-holding handler: {hold:.0f}s in one C call with a {LEASE}s lease; "
        f"{figures.line()}; the holder's late completion was fenced"
    )
    assert [(row[1], row[2]) for row in executions] == [(1, holder.name), (2, other.name)]
    assert figures.journal == {"recovered": 1, "completed": 1}


def _released_after(watch: Watch, prefix: str, moment: datetime) -> dict[ULID, float]:
    """Seconds from ``moment`` to each job's 'released' journal row."""
    rows = watch.rows(
        sql.SQL("SELECT job_id, recorded_at - %s FROM {} WHERE outcome = 'released'").format(
            sql.Identifier(f"{prefix}_journal")
        ),
        (moment,),
    )
    return {ULID.from_uuid(job_id): delta.total_seconds() for job_id, delta in rows}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigterm_releases_prefetched_and_waits_for_running(
    database_dsn: str, shared_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    queue = prepare(database_dsn, shared_prefix)
    # Two running (one ends within the grace period, one outlasts it), four prefetched
    # behind them, two more left pending. The lease is long: nothing may wait for it.
    short = queue.enqueue(ledger.WORK_KIND, {"ms": 2500, "cooperative": False}, priority=9)
    long = queue.enqueue(ledger.WORK_KIND, {"first_ms": 60_000, "cooperative": False}, priority=9)
    rest = [queue.enqueue(ledger.WORK_KIND, {"ms": 10}) for _ in range(6)]
    grace = 4.0
    fleet = make_fleet(database_dsn, shared_prefix, lease=120, concurrency=2, prefetch=4)
    watch = Watch(database_dsn, shared_prefix)
    worker = fleet.spawn(stop_timeout=grace)
    wait_until(lambda: len(watch.executions()) == 2, 60, 0.02, "two runs to start")
    wait_until(lambda: watch.count("claimed") == 6, 60, 0.02, "six claims (two running)")
    signalled = watch.clock()
    began = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.wait_exit(60)
    exited = time.monotonic() - began
    released = _released_after(watch, shared_prefix, signalled)
    [short_run] = watch.executions(short)
    short_done = (short_run[5] - signalled).total_seconds()
    assert code == 0, worker.log()
    assert watch.count("claimed") == 0, "a job was left claimed: it would wait for its lease"
    assert queue.get(short).status == "completed"  # type: ignore[union-attr]
    assert long in released and len(released) == 5
    long_after = released.pop(long)
    prefetched_after = max(released.values())
    fleet.spawn()
    wait_until(lambda: watch.unfinished() == 0, 60, 0.05, "the rest to run")
    fleet.close()
    queue.close()
    figures = invariants.check(database_dsn, shared_prefix, [short, long, *rest])
    watch.close()
    print(
        f"\ngraceful shutdown: SIGTERM with 2 running and 4 prefetched; prefetched released "
        f"within {prefetched_after:.2f}s, the short run completed, the long run released "
        f"after {long_after:.2f}s (grace {grace}s); exit code {code} after {exited:.2f}s; "
        f"0 left claimed\n  {figures.line()}"
    )
    # Seconds counted with generous slack for a shared machine, never a speed claim: the
    # long run is let go once the grace has passed and not long after, the prefetched jobs
    # go back at once (before the short run, already going, ended), and the process exits
    # when stop returns.
    assert grace <= long_after < grace + STOP_SLACK, f"long run released after {long_after:.2f}s"
    assert prefetched_after < short_done < grace, (
        f"prefetched jobs released after {prefetched_after:.2f}s, the short run ended after "
        f"{short_done:.2f}s"
    )
    assert grace <= exited < grace + STOP_SLACK, f"the worker exited after {exited:.2f}s"
