"""`venturi migrate / sql / healthcheck / worker` and the group mounted with an
application's queue (as Flask and Django do)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
from click.testing import CliRunner

import venturi
from tests.cli.conftest import (
    CLOSED_PORT_DSN,
    Invoke,
    Samples,
    answers,
    free_port,
    one_error_line,
    sample,
    scrape,
    settled_total,
    start_cli_process,
)
from tests.support import wait_until
from venturi.cli.main import build_cli
from venturi.store.migrations import known_migrations, latest_version

APP = textwrap.dedent(
    """
    import os
    import venturi

    queue = venturi.Queue(prefix=os.environ["APP_PREFIX"], pool_size=4)

    @queue.job("greet", lease=5)
    def greet(name: str) -> str:
        return f"hello {name}"

    @queue.job("poison", max_attempts=1)
    def poison() -> None:
        raise venturi.Fail("cannot be helped")

    @queue.job("checkpoint", context=True, lease=5)
    def checkpoint(ctx: venturi.JobContext) -> None:
        print("checkpoint handler running", flush=True)
        ctx.stopping.wait(120)
        raise venturi.Pause(carry={"stopped": True}, note="worker stopping")

    def make_queue() -> venturi.Queue:
        return queue

    not_a_queue = 42
    """
)


def test_migrate_creates_then_reports_up_to_date(invoke: Invoke, prefix: str) -> None:
    first = invoke("migrate")
    every = ", ".join(name for _, name in known_migrations())
    assert first.exit_code == 0 and first.stdout.strip() == f"prefix {prefix!r}: applied {every}"
    again = invoke("migrate")
    assert again.stdout.strip() == f"prefix {prefix!r} is up to date"


def test_sql_builds_a_schema_that_venturi_accepts(
    invoke: Invoke, database_dsn: str, prefix: str
) -> None:
    script = invoke("sql")
    assert script.exit_code == 0
    assert f'"{prefix}_jobs"' in script.stdout and "%(" not in script.stdout
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(script.stdout.encode())
    assert invoke("migrate").stdout.strip() == f"prefix {prefix!r} is up to date"
    with venturi.Queue(database_dsn, prefix=prefix) as queue:

        @queue.job("add")
        def add(a: int, b: int) -> int:
            return a + b

        job_id = add.enqueue(a=1, b=2)
        assert queue.drain() == 1
        assert queue.journal(job_id)[-1].attachment == 3


def test_sql_after_the_latest_version_holds_no_migration(invoke: Invoke) -> None:
    script = invoke("sql", "--after", str(latest_version())).stdout
    assert "migrations (none)" in script and "CREATE TABLE IF NOT EXISTS" in script
    assert "INSERT INTO" not in script


def test_sql_refuses_a_bad_prefix(invoke: Invoke) -> None:
    result = invoke("--prefix", "Bad-Prefix", "sql")
    assert result.exit_code == 1 and "must match" in one_error_line(result)


def test_healthcheck_passes_on_a_migrated_prefix(invoke: Invoke) -> None:
    invoke("migrate")
    result = invoke("healthcheck")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == [
        "ok   database reachable",
        "ok   read-write server",
        "ok   schema current",
        "ok   listen/notify",
    ]
    # Then vacuum: a WARN line for any other session on the shared server holding the
    # horizon past five minutes, but never a FAIL.
    assert lines[4:] and all(line[5:].startswith("vacuum: ") for line in lines[4:])
    assert lines[-1].startswith("ok   vacuum: ") or lines[-1].startswith("WARN vacuum: ")
    assert lines[1].endswith(" (read-write)")  # host:port as libpq reached it


def test_healthcheck_fails_without_schema_or_database(invoke: Invoke) -> None:
    no_schema = invoke("healthcheck")
    assert no_schema.exit_code == 1
    assert no_schema.stdout.splitlines()[-1].startswith("FAIL schema current: ")
    unreachable = invoke("--dsn", CLOSED_PORT_DSN, "healthcheck")
    assert unreachable.exit_code == 1
    assert unreachable.stdout.startswith("FAIL database reachable: cannot connect")
    assert "topsecret" not in unreachable.output


def test_healthcheck_reads_a_worker_s_metrics(
    invoke: Invoke, queue: venturi.Queue, database_dsn: str
) -> None:
    @queue.job("k")
    def k() -> None: ...

    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    worker = queue.worker(poll_interval=0.2, metrics_port=port, metrics_addr="127.0.0.1")
    worker.start()
    try:
        running = invoke("healthcheck", "--worker-metrics", url)
        assert running.exit_code == 0, running.output
        where = queue.server().address
        assert running.stdout.splitlines()[-1] == (
            f"ok   worker: {url}: running, on {where} (read-write)"
        )
        # A worker that stops itself closes its metrics port (the probe then fails for no
        # answer, as below); kept open here to see the failure the metrics report.
        worker.stop_hooks.clear()
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {queue.prefix}_journal, {queue.prefix}_jobs CASCADE")
        wait_until(lambda: worker.failure is not None, timeout=30, what="the worker to fail")
        failed = invoke("healthcheck", "--worker-metrics", url)
        assert failed.exit_code == 1
        assert failed.stdout.splitlines()[-1].startswith(f"FAIL worker: {url}: the worker stopped")
    finally:
        worker.stop(timeout=5)
    elsewhere = f"http://127.0.0.1:{free_port()}/metrics"
    unreachable = invoke("healthcheck", "--worker-metrics", elsewhere)
    assert unreachable.exit_code == 1
    assert unreachable.stdout.splitlines()[-1].startswith(
        f"FAIL worker: no answer from {elsewhere}"
    )


def _counted(samples: Samples | None, settlements: int) -> Samples | None:
    """The samples once they count ``settlements`` settled runs, else None."""
    return samples if samples is not None and settled_total(samples) >= settlements else None


def _app_dir(tmp_path: Path, name: str) -> Path:
    (tmp_path / f"{name}.py").write_text(APP)
    return tmp_path


def test_worker_runs_jobs_serves_metrics_and_stops_on_sigterm(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    port = free_port()
    env = {"VENTURI_DSN": database_dsn, "APP_PREFIX": prefix}
    args = ["worker", "--app", "termapp", "--concurrency", "2", "--poll-interval", "1s"]
    args += ["--metrics-port", str(port), "--metrics-addr", "127.0.0.1"]
    log = tmp_path / "worker.log"
    process = start_cli_process(args, _app_dir(tmp_path, "termapp"), env, log)
    try:
        with venturi.Queue(database_dsn, prefix=prefix) as queue:
            queue.migrate()
            greetings = [queue.enqueue("greet", {"name": str(n)}) for n in range(3)]
            poisoned = queue.enqueue("poison")
            wanted = [*greetings, poisoned]
            wait_until(
                lambda: all(queue.get(i).status in ("completed", "dead") for i in wanted),  # type: ignore[union-attr]
                timeout=60,
                what=f"the worker to finish its jobs; log: {log.read_text()}",
            )
            # Events follow the commit, so the counters may trail the rows by a moment.
            samples = wait_until(
                lambda: _counted(answers(lambda: scrape(port)), 4), what="4 settlements counted"
            )
            assert samples is not None
            assert queue.journal(greetings[0])[-1].attachment == "hello 0"
        settled = "venturi_jobs_settled_total"
        assert sample(samples, settled, kind="greet", outcome="completed") == 3
        assert sample(samples, settled, kind="poison", outcome="dead") == 1
        assert sample(samples, "venturi_queue_jobs", kind="greet", status="completed") == 3
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    output = log.read_text()
    assert "stopping gracefully" in output and "stopped" in output
    assert answers(lambda: scrape(port)) is None  # the metrics port closed with the worker


def test_sigint_lets_a_running_job_checkpoint_before_exit(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    env = {"VENTURI_DSN": database_dsn, "APP_PREFIX": prefix}
    log = tmp_path / "worker.log"
    args = [
        "worker",
        "--app",
        "intapp:make_queue",
        "--kinds",
        "checkpoint",
        "--stop-timeout",
        "30s",
    ]
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
        job_id = queue.enqueue("checkpoint")
        process = start_cli_process(args, _app_dir(tmp_path, "intapp"), env, log)
        try:
            # Running, not only claimed: a prefetched job is handed back unstarted.
            wait_until(
                lambda: "checkpoint handler running" in log.read_text(),
                timeout=60,
                what="the job's handler to start",
            )
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
        job = queue.get(job_id)
        assert job is not None and (job.status, job.carry) == ("pending", {"stopped": True})
        assert queue.journal(job_id)[-1].outcome == "paused"


def test_worker_refuses_a_missing_or_wrong_app(invoke: Invoke) -> None:
    no_app = invoke("worker")
    assert no_app.exit_code == 2 and "--app" in one_error_line(no_app)
    missing = invoke("worker", "--app", "no_such_module_here:queue")
    assert missing.exit_code == 1 and "No module named" in one_error_line(missing)


def test_worker_refuses_an_attribute_that_is_not_a_queue(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    env = {"VENTURI_DSN": database_dsn, "APP_PREFIX": prefix}
    for spec, message in [
        ("badapp:not_a_queue", "not a venturi.Queue"),
        ("badapp:nope", "no attribute"),
    ]:
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "from venturi.cli import main; main()",
                "worker",
                "--app",
                spec,
            ],
            check=False,
            cwd=_app_dir(tmp_path, "badapp"),
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert message in result.stderr and "Traceback" not in result.stderr


def test_the_group_mounted_with_an_application_queue(database_dsn: str, prefix: str) -> None:
    queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=4)

    @queue.job("ping")
    def ping() -> str:
        return "pong"

    cli = build_cli(lambda: queue)
    runner = CliRunner()
    try:
        assert runner.invoke(cli, ["migrate"]).exit_code == 0
        job_id = runner.invoke(cli, ["enqueue", "ping"]).stdout.strip()
        assert queue.drain() == 1
        shown = runner.invoke(cli, ["job", job_id, "--json"])
        assert '"status": "completed"' in shown.stdout
        assert "--app" not in runner.invoke(cli, ["worker", "--help"]).stdout
        assert "--dsn" not in runner.invoke(cli, ["--help"]).stdout
        refused = runner.invoke(cli, ["--dsn", database_dsn, "stats"])
        assert refused.exit_code == 2 and "--dsn" in refused.output
        assert queue.get(job_id) is not None  # the application's queue stays open
    finally:
        queue.close()


def test_version_is_printed(invoke: Invoke) -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and venturi.__version__ in result.stdout


def test_bench_is_a_sub_command(invoke: Invoke) -> None:
    result = invoke("bench", "--help")
    assert result.exit_code == 0 and "raw-SQL ceilings" in result.stdout


def test_sql_in_an_application_uses_its_queues_prefix(database_dsn: str, prefix: str) -> None:
    app_queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=1)
    try:
        result = CliRunner().invoke(build_cli(lambda: app_queue), ["sql"], catch_exceptions=False)
    finally:
        app_queue.close()
    assert result.exit_code == 0, result.output
    assert f"schema of prefix {prefix!r}" in result.stdout and f'"{prefix}_jobs"' in result.stdout
