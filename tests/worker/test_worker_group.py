"""`venturi worker --processes N`: a child killed is restarted, the group stops
gracefully (a second signal releases at once), children are recycled by run count
without a job lost or run twice, and children that crash on start stop the group."""

from __future__ import annotations

import os
import re
import signal
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from tests.faults import invariants
from tests.support import Probe, ledger, wait_until
from tests.support.fleet import REPO_ROOT
from tests.support.group_app import GROW_KIND
from tests.support.worker_group import APP, GroupProcess, alive
from venturi import NewJob, Queue
from venturi.processes import WorkerGroup

WAIT = 60.0

pytestmark = pytest.mark.slow


@pytest.fixture
def start_group(
    database_dsn: str, queue: Queue, tmp_path: Path
) -> Iterator[Callable[..., GroupProcess]]:
    """Start supervisors on the test's prefix (its ledger made); all stopped at teardown."""
    ledger.create(database_dsn, queue.prefix)
    started: list[GroupProcess] = []

    def start(*args: str, **options: Any) -> GroupProcess:
        log = tmp_path / f"group{len(started)}.log"
        group = GroupProcess(database_dsn, queue.prefix, log, *args, **options)
        started.append(group)
        return group

    yield start
    for group in started:
        group.close()
    ledger.drop(database_dsn, queue.prefix)


def executions(probe: Probe) -> list[tuple[Any, ...]]:
    """(job_id, run_no, pid, finished) of every handler run the ledger recorded."""
    query = sql.SQL("SELECT job_id, run_no, pid, finished_at IS NOT NULL FROM {}").format(
        ledger.table(probe.prefix.name)
    )
    return probe.conn.execute(query).fetchall()


def all_completed(probe: Probe, count: int) -> bool:
    return probe.count("jobs", "status = 'completed'") == count


def test_a_sigkilled_child_is_restarted_and_the_group_keeps_running_jobs(
    database_dsn: str, queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    group = start_group("--processes", "2", "--concurrency", "2")
    first, second = group.wait_running(2)
    os.kill(first, signal.SIGKILL)
    group.wait_logged(f"worker process {first} ended (signal SIGKILL); starting another")
    running = group.wait_running(2)
    assert first not in running and second in running
    ids = queue.enqueue_many([NewJob(ledger.WORK_KIND, {"ms": 1}) for _ in range(40)])
    wait_until(lambda: all_completed(probe, 40), WAIT, what="40 jobs completed")
    group.signal(signal.SIGTERM)
    assert group.wait_exit(WAIT) == 0, group.log()
    invariants.check(database_dsn, queue.prefix, ids, reruns=())
    assert not any(alive(pid) for pid in group.ever_started())


def test_children_of_a_killed_supervisor_stop_gracefully(
    queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    group = start_group("--processes", "2", "--name", "orphan")
    children = group.wait_running(2)
    queue.enqueue_many([NewJob(ledger.WORK_KIND, {"ms": 1}) for _ in range(10)])
    wait_until(lambda: all_completed(probe, 10), WAIT, what="10 jobs completed")
    for pid in children:  # each child's worker has a name of its own
        assert f"worker orphan:{pid} started" in group.log()
    group.signal(signal.SIGKILL)
    group.wait_exit(WAIT)
    wait_until(lambda: not any(alive(pid) for pid in children), WAIT, what="orphans to stop")
    assert "supervisor is gone" in group.log()
    assert "stopped: released 0 prefetched and 0 running jobs" in group.log()


def test_sigterm_stops_the_group_after_running_jobs_finish(
    database_dsn: str, queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    group = start_group("--processes", "2", "--concurrency", "2", "--stop-timeout", "60s")
    group.wait_running(2)
    payload = {"ms": 1500, "cooperative": False}  # runs on through the stop
    queue.enqueue_many([NewJob(ledger.WORK_KIND, payload) for _ in range(4)])
    wait_until(lambda: len(executions(probe)) == 4, WAIT, what="4 runs started")
    group.signal(signal.SIGTERM)
    assert group.wait_exit(WAIT) == 0, group.log()
    assert probe.count("jobs", "status = 'completed'") == 4
    assert all(finished for *_, finished in executions(probe))
    assert "stopping the worker group gracefully" in group.log()
    assert not any(alive(pid) for pid in group.ever_started())


def test_a_second_signal_releases_running_jobs_at_once(
    queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    group = start_group("--processes", "2", "--concurrency", "1", "--stop-timeout", "10m")
    group.wait_running(2)
    job_id = queue.enqueue(ledger.STUBBORN_KIND, {})  # ignores ctx.stopping
    wait_until(lambda: executions(probe), WAIT, what="the stubborn run to start")
    group.signal(signal.SIGTERM)
    group.wait_logged("stopping the worker group gracefully")
    group.signal(signal.SIGTERM)
    assert group.wait_exit(WAIT) == 0, group.log()
    assert "second stop" in group.log()
    assert [e.outcome.value for e in queue.journal(str(job_id))] == ["released"]
    record = queue.get(str(job_id))
    assert record is not None and record.status.value == "pending"


def test_children_are_recycled_by_run_count_without_losing_or_doubling_a_job(
    database_dsn: str, queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    group = start_group("--processes", "2", "--concurrency", "2", "--max-jobs-per-child", "60")
    group.wait_running(2)
    count = 800
    ids = queue.enqueue_many([NewJob(ledger.WORK_KIND, {"ms": 20}) for _ in range(count)])
    wait_until(lambda: all_completed(probe, count), 2 * WAIT, what=f"{count} jobs completed")
    log = group.log()
    assert re.search(r"worker process \d+ takes over from \d+", log), log
    assert "recycled worker process" in log
    runs = executions(probe)
    assert len(runs) == count, "a job ran twice" if len(runs) > count else "a run is missing"
    assert len({job_id for job_id, *_ in runs}) == count
    assert len({pid for _, _, pid, _ in runs}) > 2, "no replacement ran a job"
    invariants.check(database_dsn, queue.prefix, ids, reruns=())
    group.signal(signal.SIGTERM)
    assert group.wait_exit(WAIT) == 0, group.log()


def test_a_child_above_its_memory_limit_is_recycled(
    queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    limit = "--max-memory-per-child", "150MB"
    group = start_group("--processes", "1", "--concurrency", "1", *limit)
    [first] = group.wait_running(1)
    queue.enqueue(GROW_KIND, {"mb": 200})
    group.wait_logged(f"recycling worker process {first}: it uses")
    group.wait_logged(f"takes over from {first}")
    group.wait_logged(f"recycled worker process {first} ended (status 0)")
    assert probe.count("jobs", "status = 'completed'") == 1
    [second] = group.wait_running(1)
    assert second != first


def test_children_crashing_on_start_stop_the_group_with_a_clear_error(
    start_group: Callable[..., GroupProcess],
) -> None:
    group = start_group("--processes", "2", app="tests.support.no_such_module:queue")
    assert group.wait_exit(WAIT) == 1
    log = group.log()
    assert "before its worker ran; 3 in a row did so: not restarting them" in log, log
    assert "Error: worker process" in log  # the CLI's one-line error, exit status 1
    assert not any(alive(pid) for pid in group.ever_started())


def test_one_metrics_port_serves_the_groups_summed_counters(
    queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    pytest.importorskip("prometheus_client")
    group = start_group("--processes", "2", "--metrics-port", "0", "--concurrency", "2")
    group.wait_running(2)
    found = wait_until(
        lambda: re.search(r"metrics served at http://[\d.]+:(\d+)/metrics", group.log()),
        WAIT,
        what="the metrics port",
    )
    queue.enqueue_many([NewJob(ledger.WORK_KIND, {"ms": 1}) for _ in range(30)])
    wait_until(lambda: all_completed(probe, 30), WAIT, what="30 jobs completed")
    pids = {pid for _, _, pid, _ in executions(probe)}
    url = f"http://127.0.0.1:{found[1]}/metrics"

    def settled() -> float:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        pattern = r'venturi_jobs_settled_total\{kind="fault.work",outcome="completed"\} (\S+)'
        return sum(float(v) for v in re.findall(pattern, text))

    wait_until(lambda: settled() == 30, WAIT, what="30 settled in the group's metrics")
    with urllib.request.urlopen(url, timeout=5) as response:
        assert "venturi_worker_failed 0.0" in response.read().decode()
    assert len(pids) == 2, "both children ran jobs, so the sum spans processes"
    group.signal(signal.SIGTERM)
    assert group.wait_exit(WAIT) == 0


def test_the_python_entry_point_runs_a_group_and_stops_it(
    database_dsn: str, queue: Queue, probe: Probe, start_group: Callable[..., GroupProcess]
) -> None:
    env = {**os.environ, "VENTURI_DSN": database_dsn, "VENTURI_PREFIX": queue.prefix}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    group = WorkerGroup.for_app(APP, 2, worker_args=["--concurrency", "1"], env=env)
    runner = threading.Thread(target=group.run)  # signals are the main thread's: stop() here
    runner.start()
    try:
        queue.enqueue_many([NewJob(ledger.WORK_KIND, {"ms": 1}) for _ in range(20)])
        wait_until(lambda: all_completed(probe, 20), WAIT, what="20 jobs completed")
        children = group.pids
        assert len(children) == 2
    finally:
        group.stop()
        runner.join(WAIT)
    assert not runner.is_alive() and group.failure is None
    assert not any(alive(pid) for pid in children)
