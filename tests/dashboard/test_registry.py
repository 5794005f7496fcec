"""The worker registry: a worker's heartbeat writes its row, a stopping worker removes
it, a dead worker's row is left out and pruned; `venturi workers` prints it."""

from __future__ import annotations

import json
import os
import socket
import threading

from click.testing import CliRunner
from werkzeug.test import Client

import venturi
from tests.support import Probe, wait_until
from venturi.cli.main import build_cli
from venturi.dashboard import Dashboard
from venturi.observations import WorkerPresence


def test_a_worker_is_registered_while_it_runs(queue: venturi.Queue) -> None:
    release = threading.Event()

    @queue.job("slow", lease=30)
    def slow() -> None:
        release.wait(30)

    with queue.worker(concurrency=3, name="reg-1", heartbeat_interval=0.1):
        (row,) = wait_until(queue.workers, what="the worker's row")
        assert (row.name, row.host, row.pid) == ("reg-1", socket.gethostname(), os.getpid())
        assert (row.kinds, row.concurrency, row.running) == (("slow",), 3, 0)
        queue.enqueue("slow", {})
        queue.enqueue("slow", {})
        wait_until(lambda: queue.workers()[0].running == 2, what="two running jobs counted")
        html = Client(Dashboard(queue)).get("/workers").text
        assert 'data-name="reg-1"' in html
        release.set()
        wait_until(lambda: queue.workers()[0].running == 0, what="the jobs to end")
    assert queue.workers() == []


def test_a_dead_workers_row_is_left_out_and_pruned(
    queue: venturi.Queue, database_dsn: str, prefix: str
) -> None:
    probe = Probe(database_dsn, prefix)
    try:
        probe.rows(
            "INSERT INTO {workers} (name, host, pid, kinds, concurrency, beat_every, last_seen)"
            " VALUES ('gone', 'h', 1, ARRAY['a'], 1, 1.0, now() - interval '40 seconds')"
        )
        probe.rows(
            "INSERT INTO {workers} (name, host, pid, kinds, concurrency, beat_every, last_seen)"
            " VALUES ('late', 'h', 2, ARRAY['a'], 1, 5.0, now() - interval '40 seconds')"
        )
        # 'gone' missed three one-second beats and half a minute; 'late' (5 s beats) not.
        assert [w.name for w in queue.workers()] == ["late"]
        assert probe.count("workers") == 2
        queue.store.beat_worker(WorkerPresence("alive", ("a",), 1, 1.0), 0)
        names = [r[0] for r in probe.rows("SELECT name FROM {workers} ORDER BY name")]
        assert names == ["alive", "late"]
    finally:
        probe.close()


def test_venturi_workers_prints_the_registry(
    queue: venturi.Queue, database_dsn: str, prefix: str
) -> None:
    runner = CliRunner()
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
    empty = runner.invoke(build_cli(), ["workers"], env=env, catch_exceptions=False)
    assert empty.exit_code == 0 and "no worker is running" in empty.output
    queue.store.beat_worker(WorkerPresence("w-cli", ("a", "b"), 4, 5.0), 1)
    shown = runner.invoke(build_cli(), ["workers"], env=env, catch_exceptions=False)
    assert "w-cli" in shown.output and "a, b" in shown.output
    raw = runner.invoke(build_cli(), ["workers", "--json"], env=env, catch_exceptions=False)
    (row,) = json.loads(raw.output)
    assert (row["name"], row["kinds"], row["concurrency"], row["running"]) == (
        "w-cli",
        ["a", "b"],
        4,
        1,
    )
