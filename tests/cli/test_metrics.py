"""Prometheus metrics scraped over HTTP match the jobs that ran: settlements, fenced
(zombie) settlements, lost leases, recoveries and the queue gauges."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from wsgiref.util import setup_testing_defaults

import pytest

import venturi
from tests.cli.conftest import CLOSED_PORT_DSN, answers, free_port, sample, scrape, settled_total
from tests.support import wait_until
from venturi.metrics import QueueMetrics, wsgi_app


def _finished(queue: venturi.Queue, ids: list[object]) -> bool:
    return all(queue.get(i).status in ("completed", "dead") for i in ids)  # type: ignore[arg-type, union-attr]


def test_worker_metrics_port_serves_what_ran(queue: venturi.Queue) -> None:
    ids: list[object] = [queue.enqueue("ok", {"n": n}) for n in range(4)]
    ids += [queue.enqueue("bad", {"n": 1}), queue.enqueue("flaky", {"fail": True})]
    port = free_port()
    worker = queue.worker(
        concurrency=2, poll_interval=1, metrics_port=port, metrics_addr="127.0.0.1"
    )
    with worker:
        wait_until(lambda: _finished(queue, ids), timeout=60, what="the jobs to finish")
        # Events follow the commit, so the counters may trail the rows by a moment.
        wait_until(
            lambda: settled_total(scrape(port)) >= 8, timeout=30, what="8 settlements counted"
        )
        samples = scrape(port)
    settled = "venturi_jobs_settled_total"
    assert sample(samples, settled, kind="ok", outcome="completed") == 4
    assert sample(samples, settled, kind="bad", outcome="dead") == 1
    assert sample(samples, settled, kind="flaky", outcome="retried") == 2
    assert sample(samples, settled, kind="flaky", outcome="dead") == 1
    assert sample(samples, "venturi_jobs_started_total", kind="flaky") == 3
    assert sample(samples, "venturi_job_run_seconds_count", kind="ok") == 4
    assert sample(samples, "venturi_job_wait_seconds_count", kind="ok") == 4
    assert sample(samples, "venturi_queue_up") == 1
    assert sample(samples, "venturi_queue_jobs", kind="ok", status="completed") == 4
    assert sample(samples, "venturi_queue_jobs", kind="bad", status="dead") == 1
    assert sample(samples, "venturi_queue_jobs", kind="ok", status="pending") == 0
    assert answers(lambda: scrape(port)) is None  # stopping the worker closed the port


def test_a_cancelled_run_counts_a_lost_lease_and_a_fenced_settlement(
    database_dsn: str, prefix: str
) -> None:
    queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=4)
    queue.migrate()
    started = threading.Event()

    @queue.job("long", context=True, lease=0.6)
    def long(ctx: venturi.JobContext) -> str:
        started.set()
        ctx.stopping.wait(60)
        return "finished anyway"

    metrics = QueueMetrics(queue)
    server = metrics.serve(0, "127.0.0.1")
    try:
        job_id = queue.enqueue("long")
        with queue.worker(concurrency=1, poll_interval=1, events=metrics.events):
            assert started.wait(30), "the job never started"
            assert queue.cancel(job_id)
            wait_until(
                lambda: sample(scrape(server.port), "venturi_jobs_fenced_total", kind="long",
                               outcome="completed"),
                timeout=30,
                what="the zombie settlement to be fenced",
            )  # fmt: skip
        samples = scrape(server.port)
    finally:
        server.close()
        queue.close()
    assert sample(samples, "venturi_leases_lost_total", kind="long") == 1
    assert sample(samples, "venturi_jobs_settled_total", kind="long", outcome="completed") == 0
    assert sample(samples, "venturi_queue_jobs", kind="long", status="cancelled") == 1


def test_a_stale_claim_taken_back_counts_a_recovery(queue: venturi.Queue) -> None:
    job_id = queue.enqueue("ok", {"n": 5})
    ghost = queue.store.claim("ghost-worker", {"ok": 0.2}, 1)
    assert [j.id for j in ghost] == [job_id]
    metrics = QueueMetrics(queue)
    with queue.worker(concurrency=1, poll_interval=0.5, events=metrics.events, reaper_interval=0.1):
        wait_until(
            lambda: queue.get(job_id).status == "completed",  # type: ignore[union-attr]
            timeout=30,
            what="the recovered job to run",
        )
    server = metrics.serve(0, "127.0.0.1")
    try:
        samples = scrape(server.port)
    finally:
        server.close()
    assert sample(samples, "venturi_jobs_recovered_total", kind="ok", outcome="retried") == 1
    assert sample(samples, "venturi_jobs_settled_total", kind="ok", outcome="completed") == 1


def _get(app: object) -> tuple[str, str]:
    environ: dict[str, object] = {}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h: status.append(s)))  # type: ignore[operator]
    return status[0], body.decode()


def test_the_wsgi_app_serves_gauges_and_reports_an_outage(queue: venturi.Queue) -> None:
    queue.enqueue("ok", {"n": 1})
    status, body = _get(wsgi_app(queue))
    assert status.startswith("200")
    assert 'venturi_queue_jobs{kind="ok",status="pending"} 1.0' in body
    assert "venturi_queue_up 1.0" in body
    assert 'venturi_queue_kind_paused{kind="ok"} 0.0' in body
    queue.pause("ok")
    assert 'venturi_queue_kind_paused{kind="ok"} 1.0' in _get(wsgi_app(queue))[1]
    down = venturi.Queue(CLOSED_PORT_DSN, prefix="down", pool_timeout=0.5)
    try:
        status, body = _get(wsgi_app(down))
    finally:
        down.close()
    assert status.startswith("200") and "venturi_queue_up 0.0" in body
    assert "venturi_queue_jobs" not in body


def test_a_busy_metrics_port_is_a_clear_error(queue: venturi.Queue) -> None:
    holder = QueueMetrics().serve(0, "127.0.0.1")
    try:
        with pytest.raises(venturi.ConfigurationError, match=f"metrics_port {holder.port}"):
            queue.worker(metrics_port=holder.port, metrics_addr="127.0.0.1")
    finally:
        holder.close()


def test_metrics_without_prometheus_client_is_a_clear_error(database_dsn: str) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["prometheus_client"] = None
        import venturi
        queue = venturi.Queue({database_dsn!r}, prefix="nometrics")
        try:
            queue.worker(metrics_port=9999)
        except venturi.ConfigurationError as exc:
            print(exc)
        finally:
            queue.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    assert "pip install 'venturi[metrics]'" in result.stdout
