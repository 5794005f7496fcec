"""`venturi bench --workload fair`: each measurement runs on the fair and the unfair
side, every drain checks its jobs ran once, and the figures tell the two apart (a small
key waits behind the backlog only without fairness). Speed is never asserted here."""

from __future__ import annotations

import json

from click.testing import CliRunner

from venturi.bench.command import bench_command
from venturi.bench.fairness import FairBench
from venturi.bench.support import BenchSettings


def test_a_round_measures_both_sides_and_only_the_unfair_one_starves(database_dsn: str) -> None:
    settings = BenchSettings.quick(database_dsn, fair_seconds=1.5, fair_backlog=20_000)
    bench = FairBench(settings)
    try:
        figures = bench.round()
    finally:
        bench.close()
    assert figures["fair.starvation.fair.started"] == 1.0
    assert figures["fair.starvation.unfair.started"] < 0.5
    assert figures["fair.starvation.fair.p50_ms"] * 5 < figures["fair.starvation.unfair.p50_ms"]
    for key in ("w1", "w2", "w4"):
        assert 0.5 < figures[f"fair.weights.{key}.of_share"] < 1.5
    for shape in ("one_key", "many_keys"):
        assert figures[f"fair.drain.{shape}.ratio"] == (
            figures[f"fair.drain.{shape}.fair"] / figures[f"fair.drain.{shape}.unfair"]
        )


def test_the_command_runs_the_fair_workload_alone(database_dsn: str) -> None:
    result = CliRunner().invoke(
        bench_command,
        ["--quick", "--json", "--rounds", "1", "--dsn", database_dsn, "--workload", "fair"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert all(key.startswith("fair.") for key in report["series"])
    compared = {(row["series"], row["ceiling"]): row["target"] for row in report["comparisons"]}
    assert compared == {
        ("fair.drain.one_key.fair", "fair.drain.one_key.unfair"): 0.9,
        ("fair.drain.many_keys.fair", "fair.drain.many_keys.unfair"): 0.8,
    }
