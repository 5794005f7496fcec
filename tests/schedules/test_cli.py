"""`venturi schedules`, `venturi schedules trigger`, `venturi worker --retention` and the
retention line of `venturi stats`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Protocol

import pytest
from click.testing import CliRunner, Result

from tests.support import Probe, wait_until
from venturi.cli.main import build_cli
from venturi.client import Queue

APP = textwrap.dedent(
    """
    import os
    from datetime import datetime
    import venturi

    queue = venturi.Queue(prefix=os.environ["APP_PREFIX"])

    @queue.periodic("nightly.report", cron="0 3 * * *", tz="Europe/Berlin")
    def nightly(scheduled_at: datetime) -> None:
        pass
    """
)


class Invoke(Protocol):
    def __call__(self, *args: str) -> Result: ...


@pytest.fixture
def invoke(database_dsn: str, prefix: str) -> Invoke:
    runner = CliRunner()
    cli = build_cli()

    def run(*args: str) -> Result:
        env: dict[str, str | None] = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": prefix}
        return runner.invoke(cli, list(args), env=env)

    return run


def test_schedules_lists_rows_and_trigger_enqueues(
    invoke: Invoke, queue: Queue, probe: Probe
) -> None:
    run = invoke
    assert "no schedules under prefix" in run("schedules").stdout

    @queue.periodic("emails.digest", cron="0 8 * * mon", payload={"period": "week"})
    def digest(period: str, scheduled_at: datetime) -> None: ...

    queue.worker().start().stop()  # writes the rows
    listed = run("schedules")
    assert listed.exit_code == 0, listed.output
    line = next(t for t in listed.stdout.splitlines() if t.startswith("emails.digest"))
    assert "0 8 * * mon" in line and "UTC" in line and line.rstrip().endswith("yes")
    rows = json.loads(run("schedules", "--json").stdout)
    assert rows[0]["name"] == "emails.digest" and rows[0]["payload"] == {"period": "week"}
    assert rows[0]["next_slot"] is not None and rows[0]["last_slot"] is None
    triggered = run("schedules", "trigger", "emails.digest")
    assert triggered.exit_code == 0, triggered.output
    job = queue.get(triggered.stdout.strip())
    assert job is not None and job.payload["period"] == "week"
    assert "scheduled_at" in job.payload
    unknown = run("schedules", "trigger", "nope")
    assert unknown.exit_code == 1 and "no schedule named 'nope'" in unknown.output
    assert probe.count("jobs") == 1


def test_worker_retention_option_and_stats(
    tmp_path: Path, database_dsn: str, invoke: Invoke, queue: Queue, probe: Probe
) -> None:
    prefix = queue.prefix
    run = invoke
    assert "retention: none in force" in run("stats").stdout
    (tmp_path / "schedapp.py").write_text(APP)
    log = tmp_path / "worker.log"
    args = ["worker", "--app", "schedapp", "--retention", "completed=3d,dead=never"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", "from venturi.cli import main; main()", *args],
            cwd=tmp_path,
            env={**os.environ, "VENTURI_DSN": database_dsn, "APP_PREFIX": prefix},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: probe.count("schedules") == 2, 60, what=f"the worker's rows; {log.read_text()}"
        )
        stats = run("stats")
        assert "completed 3d, cancelled 1d, dead never" in stats.stdout
        kept = json.loads(run("stats", "--json").stdout)["retention"]
        assert kept == {"completed": 259200.0, "cancelled": 86400.0, "dead": None}
        listed = run("schedules").stdout
        assert "0 3 * * *" in listed and "Europe/Berlin" in listed and "every 1m" in listed
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_worker_refuses_bad_retention(invoke: Invoke, tmp_path: Path, queue: Queue) -> None:
    run = invoke
    result = run("worker", "--app", "no_such_module:queue", "--retention", "completed=soon")
    assert result.exit_code == 2  # refused as usage, before the app is even imported
    assert "--retention" in result.output and "'soon'" in result.output
