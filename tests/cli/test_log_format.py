"""`venturi worker --log-format json`: one JSON object per line, job lines carrying
job_id, kind and run."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path
from typing import Any

import venturi
from tests.cli.conftest import start_cli_process
from tests.support import wait_until

APP = textwrap.dedent(
    """
    import os

    import venturi

    queue = venturi.Queue(prefix=os.environ["APP_PREFIX"], pool_size=2)


    @queue.job("crash", max_attempts=1)
    def crash() -> None:
        raise RuntimeError("the handler broke")
    """
)


def _lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_json_log_lines_carry_the_job_fields(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    (tmp_path / "jsonapp.py").write_text(APP)
    env = {"VENTURI_DSN": database_dsn, "APP_PREFIX": prefix}
    log = tmp_path / "worker.log"
    args = ["worker", "--app", "jsonapp", "--log-format", "json", "--poll-interval", "1s"]
    process = start_cli_process(args, tmp_path, env, log)
    try:
        with venturi.Queue(database_dsn, prefix=prefix) as queue:
            queue.migrate()
            job_id = queue.enqueue("crash")
            crashed = wait_until(
                lambda: [line for line in _lines(log) if line.get("job_id") == str(job_id)],
                timeout=60,
                what=f"a log line about the crashed job; log: {log.read_text()}",
            )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    line = crashed[0]
    assert (line["kind"], line["run"], line["level"]) == ("crash", 1, "WARNING")
    assert line["logger"] == "venturi.worker"
    assert "the handler broke" in line["message"]
    every = _lines(log)  # every line parses as JSON, the worker's own lines too
    assert any("stopping gracefully" in entry["message"] for entry in every)
