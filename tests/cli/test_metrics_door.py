"""The metrics port's doors (issue 36): it listens on 127.0.0.1 unless told otherwise,
answers on /metrics only, and reads the queue's stats at most once per period however
often it is scraped."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import venturi
from tests.cli.conftest import answers, free_port, sample, scrape, start_cli_process
from tests.support import wait_until
from venturi.metrics import QueueCollector, QueueMetrics
from venturi.models import StatsSnapshot

APP = """
import os
import venturi

queue = venturi.Queue(prefix=os.environ["APP_PREFIX"], pool_size=2)


@queue.job("ok")
def ok() -> None:
    pass
"""


class CountingStats:
    """The real queue's `stats()`, counting its calls."""

    def __init__(self, queue: venturi.Queue) -> None:
        self.queue = queue
        self.calls = 0

    def stats(self) -> StatsSnapshot:
        self.calls += 1
        return self.queue.stats()


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_metrics_server_listens_on_localhost_by_default(queue: venturi.Queue) -> None:
    server = QueueMetrics(queue).serve(0)
    try:
        assert server.host == "127.0.0.1"
        assert status(f"http://127.0.0.1:{server.port}/metrics") == 200
    finally:
        server.close()


@pytest.mark.parametrize("path", ["/", "/anything", "/metrics/x", "/favicon.ico"])
def test_the_metrics_server_answers_on_metrics_only(queue: venturi.Queue, path: str) -> None:
    source = CountingStats(queue)
    server = QueueMetrics(source).serve(0, "127.0.0.1")
    try:
        assert status(f"http://127.0.0.1:{server.port}{path}") == 404
        assert source.calls == 0  # a wrong path reads nothing
        assert status(f"http://127.0.0.1:{server.port}/metrics?name[]=venturi_queue_up") == 200
    finally:
        server.close()


def test_scrapes_in_a_row_read_the_stats_once(queue: venturi.Queue) -> None:
    queue.enqueue("ok", {"n": 1})
    source = CountingStats(queue)
    server = QueueMetrics(source).serve(0, "127.0.0.1")
    try:
        for _ in range(10):
            samples = scrape(server.port)
            assert sample(samples, "venturi_queue_jobs", kind="ok", status="pending") == 1
        assert source.calls == 1
    finally:
        server.close()


def test_the_reading_is_refreshed_once_it_is_older_than_its_period(
    queue: venturi.Queue,
) -> None:
    clock = FakeClock()
    source = CountingStats(queue)
    collector = QueueCollector(source, max_age=5.0, clock=clock)
    list(collector.collect())
    queue.enqueue("ok", {"n": 1})
    clock.now += 4.9
    assert _pending(collector) == 0 and source.calls == 1  # still the first reading
    clock.now += 0.2
    assert _pending(collector) == 1 and source.calls == 2
    with pytest.raises(ValueError, match="max_age"):
        QueueCollector(source, max_age=-1)


def _pending(collector: QueueCollector) -> float:
    for family in collector.collect():
        for found in family.samples:
            if found.name == "venturi_queue_jobs" and found.labels == {
                "kind": "ok",
                "status": "pending",
            }:
                return float(found.value)
    return 0.0


def test_worker_metrics_port_listens_on_localhost_unless_told(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    (tmp_path / "metricsapp.py").write_text(APP)
    port = free_port()
    env = {"VENTURI_DSN": database_dsn, "APP_PREFIX": prefix}
    args = ["worker", "--app", "metricsapp:queue", "--metrics-port", str(port)]
    log = tmp_path / "worker.log"
    with venturi.Queue(database_dsn, prefix=prefix) as setup:
        setup.migrate()
    process = start_cli_process(args, tmp_path, env, log)
    try:
        wait_until(
            lambda: answers(lambda: scrape(port)) or process.poll() is not None,
            60,
            what="metrics",
        )
        assert process.poll() is None, log.read_text()
        wait_until(lambda: "metrics served at" in log.read_text(), 30, what="the log line")
        assert f"metrics served at http://127.0.0.1:{port}/metrics" in log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def test_worker_metrics_host_option_is_documented() -> None:
    from click.testing import CliRunner

    from venturi.cli.main import build_cli

    shown = CliRunner().invoke(build_cli(), ["worker", "--help"]).output
    assert "--metrics-host" in shown and "127.0.0.1" in shown
