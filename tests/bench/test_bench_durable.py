"""`venturi bench --workload durable`: the drain beside suspended durable jobs leaves them
untouched, checks its own jobs ran once, and reports both drains and their ratio.
Speed is never asserted here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from venturi.bench.command import bench_command
from venturi.bench.support import BenchSettings, compose, fetch_one
from venturi.bench.suspended import SuspendedBench
from venturi.bench.workloads import VenturiBench


def test_a_round_drains_beside_suspended_jobs_and_leaves_them_as_they_were(
    database_dsn: str,
) -> None:
    settings = BenchSettings.quick(database_dsn, suspended=300, durable_jobs=100)
    beside, alone = VenturiBench(settings, "ds"), VenturiBench(settings, "da")
    try:
        bench = SuspendedBench(beside, alone)
        bench.fill()
        figures = [bench.round(), bench.round()]

        def count(template: str) -> Any:
            return fetch_one(beside.conn, compose(template, beside.prefix))[0]

        assert count("SELECT count(*) FROM {jobs} WHERE status = 'pending'") == 300
        assert (
            count("SELECT count(*) FROM {jobs} WHERE status = 'pending' AND run_count = 1") == 300
        )
        assert count("SELECT count(*) FROM {steps}") == 600
        assert count("SELECT count(*) FROM {waits}") == 300
        assert count("SELECT count(DISTINCT what) FROM {waits}") == 2
    finally:
        beside.close()
        alone.close()
    for round_figures in figures:
        assert set(round_figures) == {"durable.beside.c16", "durable.alone.c16", "durable.ratio"}
        assert all(value > 0 for value in round_figures.values())


def test_the_command_runs_the_durable_workload_alone(database_dsn: str) -> None:
    result = CliRunner().invoke(
        bench_command,
        [
            "--quick",
            "--json",
            "--dsn",
            database_dsn,
            "--workload",
            "durable",
            "--suspended",
            "200",
            "--durable-jobs",
            "50",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["series"]) == {"durable.beside.c16", "durable.alone.c16", "durable.ratio"}
    assert report["settings"]["suspended"] == 200
    assert report["settings"]["durable_jobs"] == 50
    [row] = report["comparisons"]
    assert (row["series"], row["ceiling"]) == ("durable.beside.c16", "durable.alone.c16")


@pytest.mark.parametrize("option", ["--suspended", "--durable-jobs"])
def test_sizes_below_one_are_refused(database_dsn: str, option: str) -> None:
    result = CliRunner().invoke(bench_command, ["--dsn", database_dsn, option, "0"])
    assert result.exit_code == 2 and option in result.output
