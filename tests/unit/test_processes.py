"""The worker group's pure parts: sizes, the recycle policy, the child's settings and
reports, the supervisor's reading of a child's pipe, and refused options (no database)."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest
from click.testing import CliRunner

from tests.support import wait_until
from venturi.cli.main import build_cli
from venturi.errors import ConfigurationError
from venturi.processes.channel import CHILD_ENV, ChildSettings, Report
from venturi.processes.child import Reporter, RunCounter, resident_bytes
from venturi.processes.children import ChildProcess, describe_exit
from venturi.processes.group import WorkerGroup
from venturi.processes.recycling import RecyclePolicy, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512MB", 512 * 1024**2),
        ("2GB", 2 * 1024**3),
        ("1.5G", int(1.5 * 1024**3)),
        ("800m", 800 * 1024**2),
        ("64KiB", 64 * 1024),
        (" 100 MB ", 100 * 1024**2),
        ("4096", 4096),
    ],
)
def test_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "-5MB", "5TB", "5 XB", "0MB", "lots", "1e3MB"])
def test_bad_sizes_are_refused_with_the_rule(text: str) -> None:
    with pytest.raises(ConfigurationError, match="size"):
        parse_size(text)


def test_the_policy_recycles_at_the_run_count_or_above_the_memory() -> None:
    policy = RecyclePolicy(max_jobs=100, max_memory=200 * 1024**2)
    assert policy.reason(Report(True, 99, 100 * 1024**2)) is None
    assert "ran 100 jobs" in (policy.reason(Report(True, 100, 0)) or "")
    assert "uses 201 MiB" in (policy.reason(Report(True, 1, 201 * 1024**2)) or "")
    assert RecyclePolicy().reason(Report(True, 10**9, 10**12)) is None
    # Above the limit from the start: a replacement would be too, so memory is no reason.
    assert policy.reason(Report(True, 1, 300 * 1024**2), rss_at_start=250 * 1024**2) is None
    assert policy.reason(Report(True, 100, 0), rss_at_start=250 * 1024**2) is not None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_the_policy_refuses_limits_below_one(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_jobs_per_child must be an int >= 1"):
        RecyclePolicy(max_jobs=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_memory_per_child must be an int >= 1"):
        RecyclePolicy(max_memory=bad)  # type: ignore[arg-type]


def test_child_settings_and_reports_round_trip_and_refuse_foreign_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = ChildSettings(7, 123, max_jobs=50, metrics=True)
    monkeypatch.setenv(CHILD_ENV, settings.encode())
    assert ChildSettings.take_from_environment() == settings
    assert CHILD_ENV not in os.environ  # a handler's subprocesses are no children
    assert ChildSettings.take_from_environment() is None
    with pytest.raises(ValueError, match=CHILD_ENV):
        ChildSettings.decode('{"fd": "x"}')
    report = Report(True, 12, 3456)
    assert Report.decode(report.encode()) == report
    with pytest.raises(ValueError, match="not a worker report"):
        Report.decode(b"[1, 2]")


def test_the_group_refuses_bad_options() -> None:
    with pytest.raises(ConfigurationError, match="processes must be an int >= 1"):
        WorkerGroup(["true"], 0)
    with pytest.raises(ConfigurationError, match="command must name"):
        WorkerGroup([], 1)
    with pytest.raises(ConfigurationError, match="stop_timeout"):
        WorkerGroup(["true"], 1, stop_timeout=-1)
    with pytest.raises(ConfigurationError, match="max_jobs_per_child"):
        WorkerGroup(["true"], 1, max_jobs_per_child=0)


def test_the_supervisor_reads_reports_split_across_writes_and_skips_bad_lines() -> None:
    script = (
        "import json, os\n"
        f"fd = json.loads(os.environ[{CHILD_ENV!r}])['fd']\n"
        'os.write(fd, b\'{"ready": false, "jobs": 0, "rss": 1}\\nnot json\\n{"ready": tr\')\n'
        'os.write(fd, b\'ue, "jobs": 5, "rss": 2}\\n\')\n'
    )
    child = ChildProcess(
        [sys.executable, "-c", script], dict(os.environ), max_jobs=None, metrics=False
    )
    try:
        assert wait_until(lambda: child.exit_code() is not None or None, 30) is True
        assert child.ready and child.report == Report(True, 5, 2)
        assert child.eof
    finally:
        child.close()
    assert describe_exit(-signal.SIGKILL) == "signal SIGKILL"
    assert describe_exit(3) == "status 3"


class _Worker:
    healthy = True


def test_a_child_whose_supervisor_is_gone_signals_itself_to_stop() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the supervisor is gone
    stopped = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        reporter = Reporter(ChildSettings(write_fd, os.getppid()), _Worker(), RunCounter())  # type: ignore[arg-type]
        reporter.report_once()
        assert wait_until(stopped.is_set, 10, what="SIGTERM to itself")
        reporter.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert resident_bytes() > 0


def test_the_run_counter_sets_its_event_at_the_limit() -> None:
    counter = RunCounter(limit=2)
    for _ in range(2):
        assert not counter.limit_reached.is_set()
        counter.job_settled(None, None, None, 0.0)  # type: ignore[arg-type]
    assert counter.limit_reached.is_set() and counter.count == 2


def test_worker_options_refused_before_anything_starts() -> None:
    cli = build_cli()
    bad_size = CliRunner().invoke(cli, ["worker", "--app", "x:y", "--max-memory-per-child", "lots"])
    assert bad_size.exit_code == 2 and "is not a size" in bad_size.output
    zero = CliRunner().invoke(cli, ["worker", "--app", "x:y", "--processes", "0"])
    assert zero.exit_code == 2 and "--processes" in zero.output
    # From Python (here, pytest), the command line to re-run has no --processes.
    from_python = CliRunner().invoke(cli, ["worker", "--app", "x:y", "--processes", "2"])
    assert from_python.exit_code == 2 and "WorkerGroup" in from_python.output
