"""Worker processes: killed mid-job, killed by their own job, stopped by signals, and
two of them sharing 2,000 jobs. Each child runs `tests.support.worker_process`."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest
from psycopg import sql

from tests.support import Probe, ledger, wait_until
from tests.support.fleet import Fleet, WorkerProcess
from venturi import JobContext, NewJob, Queue, Worker

WAIT = 60.0

pytestmark = pytest.mark.slow


def ledger_rows(probe: Probe) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT job_id, run_no, pid FROM {} ORDER BY run_no").format(
        ledger.table(probe.prefix.name)
    )
    return probe.conn.execute(query).fetchall()


def outcomes(queue: Queue, job_id: object) -> list[tuple[str, int]]:
    return [(e.outcome.value, e.run_no) for e in queue.journal(str(job_id))]


def test_a_sigkilled_workers_job_is_recovered_and_finished_elsewhere(
    queue: Queue,
    probe: Probe,
    fleet: Fleet,
    start_worker: Callable[..., Worker],
) -> None:
    victim = fleet.spawn(label="victim", kinds=ledger.HANG_KIND, lease=1, wait=False)
    victim.wait_ready()
    job_id = queue.enqueue(ledger.HANG_KIND, {})
    wait_until(lambda: ledger_rows(probe), timeout=WAIT, what="the victim to start")
    victim.signal(signal.SIGKILL)
    assert victim.wait_exit() == -signal.SIGKILL

    @queue.job(ledger.HANG_KIND, context=True)
    def rescue(ctx: JobContext) -> str:
        return f"finished on attempt {ctx.attempt}"

    start_worker(concurrency=1, reaper_interval=0.1)
    wait_until(
        lambda: (job := queue.get(job_id)) is not None and job.status == "completed",
        timeout=WAIT,
        what="another worker to recover and finish the job",
    )
    assert outcomes(queue, job_id) == [("recovered", 1), ("completed", 2)]
    recovered, completed = queue.journal(job_id)
    assert recovered.note is not None and f"held by {victim.name} " in recovered.note
    assert completed.attachment == "finished on attempt 2"
    job = queue.get(job_id)
    assert job is not None and job.failure_count == 1


def test_a_job_that_kills_its_worker_is_dead_after_max_attempts(
    queue: Queue, probe: Probe, fleet: Fleet
) -> None:
    job_id = queue.enqueue(ledger.SUICIDE_KIND, {}, max_attempts=3)

    def job_state() -> tuple[str, int, int]:
        job = queue.get(job_id)
        assert job is not None
        return job.status.value, job.run_count, job.failure_count

    survivor: WorkerProcess | None = None
    for _ in range(4):  # three runs that kill their process, then one that finds it dead
        child = fleet.spawn(kinds=ledger.SUICIDE_KIND, lease=1, reaper_interval=0.1, wait=False)

        def ended(c: WorkerProcess = child) -> bool:
            return not c.alive or job_state()[0] == "dead"

        wait_until(ended, timeout=WAIT, what="the job to kill this worker, or to be dead")
        if job_state()[0] == "dead":
            survivor = child
            break
        assert child.wait_exit() == -signal.SIGKILL
    assert survivor is not None, f"still {job_state()} after four workers"
    assert job_state() == ("dead", 3, 3)
    assert outcomes(queue, job_id) == [("recovered", 1), ("recovered", 2), ("dead", 3)]
    assert len({pid for _, _, pid in ledger_rows(probe)}) == 3
    # The last worker stays up and never claims the dead job again.
    survivor.signal(signal.SIGTERM)
    assert survivor.wait_exit() == 0, survivor.log()
    assert job_state() == ("dead", 3, 3)


def test_sigterm_stops_run_gracefully(queue: Queue, probe: Probe, fleet: Fleet) -> None:
    child = fleet.spawn(kinds=ledger.HANG_KIND, wait=False)
    child.wait_ready()
    job_id = queue.enqueue(ledger.HANG_KIND, {})
    wait_until(lambda: ledger_rows(probe), timeout=WAIT, what="the run to start")
    child.signal(signal.SIGTERM)
    assert child.wait_exit() == 0, child.log()
    assert child.log().splitlines()[-1] == "stopped"
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.failure_count, job.carry) == (
        "pending",
        0,
        {"stopped_in": child.pid},
    )
    assert [(e.outcome.value, e.note) for e in queue.journal(job_id)] == [("paused", "stopping")]


def test_a_second_signal_releases_running_jobs_at_once(
    queue: Queue, probe: Probe, fleet: Fleet
) -> None:
    child = fleet.spawn(kinds=ledger.STUBBORN_KIND, concurrency=1, stop_timeout=600, wait=False)
    child.wait_ready()
    stubborn = queue.enqueue(ledger.STUBBORN_KIND, {}, priority=5)
    wait_until(lambda: ledger_rows(probe), timeout=WAIT, what="the run to start")
    prefetched = queue.enqueue(ledger.STUBBORN_KIND, {})
    wait_until(
        lambda: probe.count("jobs", "status = 'claimed'") == 2,
        timeout=WAIT,
        what="a second job to be prefetched",
    )
    child.signal(signal.SIGTERM)
    # The first signal hands the prefetched job back at once; the running one ignores
    # its stopping flag, so the worker would wait the whole stop timeout for it ...
    wait_until(
        lambda: outcomes(queue, prefetched) == [("released", 1)],
        timeout=WAIT,
        what="the first signal to release the prefetched job",
    )
    assert child.alive
    # ... until a second signal releases it too.
    child.signal(signal.SIGTERM)
    assert child.wait_exit(timeout=WAIT) == 0, child.log()
    assert outcomes(queue, stubborn) == [("released", 1)]
    job = queue.get(stubborn)
    assert job is not None and (job.status, job.failure_count) == ("pending", 0)


def test_two_processes_of_four_threads_complete_2000_jobs_exactly_once(
    queue: Queue, probe: Probe, fleet: Fleet
) -> None:
    workers = [
        fleet.spawn(kinds=ledger.WORK_KIND, concurrency=4, pool_size=8, wait=False)
        for _ in range(2)
    ]
    for child in workers:
        child.wait_ready()
    queue.enqueue_many([NewJob(ledger.WORK_KIND, {}) for _ in range(2000)])
    wait_until(
        lambda: probe.count("jobs", "status = 'completed'") == 2000,
        timeout=120,
        interval=0.2,
        what="2000 completed jobs",
    )
    for child in workers:
        child.signal(signal.SIGTERM)
    for child in workers:
        assert child.wait_exit() == 0, child.log()
    table = ledger.table(queue.prefix)
    runs, jobs, pids = probe.conn.execute(
        sql.SQL("SELECT count(*), count(DISTINCT job_id), count(DISTINCT pid) FROM {}").format(
            table
        )
    ).fetchone() or (0, 0, 0)
    assert (runs, jobs) == (2000, 2000), "every job ran exactly once"
    assert pids == 2, "both processes took part"
    assert probe.rows("SELECT status, count(*) FROM {jobs} GROUP BY status") == [
        ("completed", 2000)
    ]
    assert probe.count("jobs", "run_count <> 1 OR failure_count <> 0 OR claimed_by IS NULL") == 0
    assert probe.rows(
        "SELECT outcome, count(*), count(DISTINCT job_id) FROM {journal} GROUP BY 1"
    ) == [("completed", 2000, 2000)]
    unledgered = sql.SQL(
        "SELECT count(*) FROM {jobs} j "
        "WHERE NOT EXISTS (SELECT FROM {ledger} l WHERE l.job_id = j.id)"
    ).format(jobs=sql.Identifier(f"{queue.prefix}_jobs"), ledger=table)
    assert probe.conn.execute(unledgered).fetchone() == (0,)
