"""`venturi bench --quick`: every workload runs, checks exactly-once, and reports its
figures in the documented JSON shape. Speed is never asserted here.

Budget: about 25 s on the shared 2-core machine (one quick run with two rounds and one-
and two-process scaling).
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from venturi.bench import fairness as bench_fairness
from venturi.bench import workloads as bench_workloads
from venturi.bench.command import WORKLOADS, bench_command
from venturi.bench.report import COMPARISONS, DEFAULT_PREPARATION_LABEL, LIMITS
from venturi.bench.support import new_prefix
from venturi.cli.main import build_cli

EXPECTED_SERIES = {
    "enqueue",
    "enqueue-many",
    "drain.c1",
    "drain.c4",
    "drain.c16",
    "backlog.c16",
    "limited8.c16",
    "transactional.c1",
    "transactional.c16",
    "limited3.10ms.c16",
    "limited3.10ms.c16.ideal",
    "ceiling.limited3.10ms",
    "prune.alone.c16",
    "prune.beside.c16",
    "prune.deleted",
    "prune.ratio",
    "durable.beside.c16",
    "durable.alone.c16",
    "durable.ratio",
    *(
        f"fair.drain.{shape}.{side}"
        for shape in ("one_key", "many_keys")
        for side in ("fair", "unfair", "ratio")
    ),
    *(
        f"fair.starvation.{side}.{figure}"
        for side in ("fair", "fair.prefetch0", "unfair")
        for figure in ("p50_ms", "p99_ms", "started")
    ),
    "fair.weights.runs",
    *(
        f"fair.claim.{backlog}.{side}_ms"
        for backlog in ("small", "deep", "many_keys")
        for side in ("fair", "unfair")
    ),
    *(f"fair.weights.{key}.of_share" for key in ("w1", "w2", "w4")),
    *(
        f"sustained.{arm}c16{figure}"
        for arm in ("", "autovacuum.")
        for figure in ("", ".of_first.ratio", ".dead_rows")
    ),
    *(
        f"held_horizon.{side}.{figure}"
        for side in ("unheld", "snapshot")
        for figure in (
            "c16",
            "last",
            "round01",
            "round02",
            "dead_rows",
            "latency_p50_ms",
            "latency_p99_ms",
        )
    ),
    "held_horizon.snapshot.ratio",
    "held_horizon.snapshot.last.ratio",
    "held_horizon.snapshot.pickup_p99.ratio",
    *(f"latency.{where}.p{q}" for where in ("c1", "c16", "inprocess.c4") for q in (50, 95, 99)),
    "rss.c16",
    *(f"soak.rss_{when}_mb" for when in ("start", "end", "peak")),
    "soak.growth",
    "processes.1.c16",
    "processes.2.c16",
    *(
        f"processes.{n}.c16.{per}"
        for n in (1, 2)
        for per in ("wal_bytes_per_job", "jobs_per_commit")
    ),
    "backends.1.c16",
    "backends.2.c16",
    "cpu.1p",
    "cpu.2p",
    "cpu.ceiling.1p",
    "cpu.ceiling.2p",
    "ceiling.insert_notify",
    "ceiling.multi_insert",
    "ceiling.copy",
    "ceiling.insert_notify.own_table",
    "ceiling.copy.own_table",
    *(f"ceiling.{shape}.c{c}" for shape in ("commit_per_job", "batched") for c in (1, 4, 16)),
}

ENQUEUE_SERIES = {"enqueue", "ceiling.insert_notify", "ceiling.insert_notify.own_table"}


def _bench_tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'bench\\_%'"
        ).fetchall()
    return {row[0] for row in rows}


@pytest.fixture(scope="module")
def quick_report(database_dsn: str) -> dict[str, Any]:
    # Other runs on the shared server create and drop bench tables meanwhile: only the
    # prefixes this run created are looked for afterwards.
    created: list[str] = []

    def recorded(label: str) -> str:
        created.append(new_prefix(label))
        return created[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench_workloads, "new_prefix", recorded)
        patch.setattr(bench_fairness, "new_prefix", recorded)
        result = CliRunner().invoke(
            bench_command, ["--quick", "--json", "--dsn", database_dsn, "--processes", "1,2"]
        )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    report["_prefixes"] = created
    report["_left_behind"] = {
        table for table in _bench_tables(database_dsn) if table.startswith(tuple(created))
    }
    return report


def test_quick_run_measures_every_series_each_round(quick_report: dict[str, Any]) -> None:
    series = quick_report["series"]
    assert set(series) == EXPECTED_SERIES
    for key, stats in series.items():
        assert len(stats["samples"]) == quick_report["settings"]["rounds"] == 2, key
        assert stats["min"] <= stats["median"] <= stats["max"], key
        assert stats["min"] >= 0, key
        units = {
            "latency": "ms",
            "rss": "MB",
            "growth": "x",
            "ratio": "x",
            "wal_bytes": "WAL bytes/job",
            "per_commit": "jobs/writing transaction",
            "backends": "backends",
            "dead_rows": "dead row versions",
            "_ms": "ms",
            "of_share": "x its weight's share",
            ".started": "fraction started",
            ".runs": "runs",
        }
        wanted = next((unit for part, unit in units.items() if part in key), "jobs/s")
        assert stats["unit"] == wanted, key
    # Latencies may be 0 ms; the statistics may not count a round's dead rows yet; the
    # small keys of a kind that is not fair may not start at all.
    assert all(
        series[key]["min"] > 0
        for key in series
        if not key.startswith("latency.")
        and not key.endswith(".dead_rows")
        and not key.endswith(".started")
    )
    # Each job's row is inserted, claimed, completed and journaled: hundreds of WAL bytes
    # at least (other traffic on a shared server only adds to the count).
    assert series["processes.1.c16.wal_bytes_per_job"]["min"] >= 200


def test_quick_run_reports_every_ratio_and_limit(quick_report: dict[str, Any]) -> None:
    comparisons = {(row["series"], row["ceiling"]): row for row in quick_report["comparisons"]}
    # Every comparison whose series ran (--processes 1,2: no 4-process rows).
    measured = [row for row in COMPARISONS if row[1] in quick_report["series"]]
    assert {(key, ceiling) for _, key, ceiling, _ in measured} == set(comparisons)
    assert {"processes.2.c16", "cpu.2p"} <= {key for key, _ in comparisons}
    assert {
        ("enqueue-many", "ceiling.multi_insert"),
        ("enqueue-many", "ceiling.copy"),
        ("enqueue-many", "ceiling.copy.own_table"),
        ("enqueue", "ceiling.insert_notify.own_table"),
    } <= set(comparisons)
    assert quick_report["settings"]["cpu_loops"] > 0
    for _, key, ceiling, target in measured:
        row = comparisons[key, ceiling]
        medians = quick_report["series"]
        assert row["ceiling"] == ceiling
        assert row["ratio"] == pytest.approx(medians[key]["median"] / medians[ceiling]["median"])
        assert row["met"] == (None if target is None else row["ratio"] >= target)
        rounds = zip(medians[key]["samples"], medians[ceiling]["samples"], strict=True)
        per_round = [value / base for value, base in rounds]
        assert row["paired"] == {
            "median": pytest.approx(statistics.median(per_round)),
            "min": pytest.approx(min(per_round)),
            "max": pytest.approx(max(per_round)),
        }
    limits = {row["series"]: row for row in quick_report["limits"]}
    # Every limit but the held slot's (the quick run holds no slot: --held-slot).
    assert set(limits) == {key for _, key, _ in LIMITS if not key.startswith("held_horizon.slot.")}
    assert quick_report["settings"]["workloads"] == list(WORKLOADS)
    assert "dsn" not in quick_report["settings"]


def test_quick_run_drops_its_tables(quick_report: dict[str, Any]) -> None:
    # the main prefix, the backlog's, the two limited kinds', the transactional kind's,
    # the sustained rounds' two (vacuuming workers, autovacuum alone), the durable
    # workload's two (beside suspended jobs, alone), the fair workload's two (fair, not),
    # the held-horizon workload's two (nothing held, a snapshot held)
    assert len(quick_report["_prefixes"]) == 13
    assert quick_report["_left_behind"] == set()


def test_compare_unprepared_runs_the_limited_kind_both_ways(database_dsn: str) -> None:
    args = ["--dsn", database_dsn, "--quick", "--json", "--rounds", "1", "--jobs", "50"]
    result = CliRunner().invoke(
        bench_command, [*args, "--workload", "limited", "--compare-unprepared"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["series"]) == {
        "limited8.c16",
        "drain.c16",
        "limited3.10ms.c16",
        "limited3.10ms.c16.unprepared",
        "limited3.10ms.c16.ideal",
        "ceiling.limited3.10ms",
    }
    compared = {(row["series"], row["ceiling"]): row for row in report["comparisons"]}
    unprepared = "limited3.10ms.c16.unprepared"
    assert compared[(unprepared, "limited3.10ms.c16.ideal")]["target"] is None
    assert compared[(unprepared, "limited3.10ms.c16")]["ceiling_label"] == (
        DEFAULT_PREPARATION_LABEL
    )
    assert compared[("limited3.10ms.c16", "ceiling.limited3.10ms")]["target"] == 0.8
    assert compared[("limited3.10ms.c16", "limited3.10ms.c16.ideal")]["target"] is None


def test_bad_process_counts_are_refused_before_anything_runs(database_dsn: str) -> None:
    result = CliRunner().invoke(bench_command, ["--dsn", database_dsn, "--processes", "1,x"])
    assert result.exit_code == 2
    assert "--processes takes counts like 1,2,4" in result.output


def test_a_zero_backlog_drops_the_backlog_workload(database_dsn: str) -> None:
    args = ["--dsn", database_dsn, "--quick", "--json", "--rounds", "1", "--backlog", "0"]
    result = CliRunner().invoke(bench_command, [*args, "--workload", "backlog"])
    assert result.exit_code == 2
    assert "--backlog 0 leaves no workload" in result.output
    result = CliRunner().invoke(
        bench_command, [*args, "--workload", "backlog", "--workload", "enqueue"]
    )
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["series"]) == ENQUEUE_SERIES


def test_latency_samples_sets_how_many_jobs_each_latency_times(
    database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["--dsn", database_dsn, "--quick", "--json", "--rounds", "1", "--jobs", "50"]
    timed: list[int] = []
    original = bench_workloads.latency_figures

    def counted(series: str, ledger: Any, committed: list[float]) -> dict[str, float]:
        timed.append(len(committed))
        return original(series, ledger, committed)

    monkeypatch.setattr(bench_workloads, "latency_figures", counted)
    result = CliRunner().invoke(
        bench_command, [*args, "--workload", "held-horizon", "--latency-samples", "12"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["settings"]["latency_samples"] == 12
    assert timed == [12, 12]  # the unheld side's and the held snapshot's


def test_venturi_bench_takes_the_groups_dsn(database_dsn: str) -> None:
    args = ["--dsn", database_dsn, "bench", "--quick", "--json", "--workload", "enqueue"]
    result = CliRunner().invoke(build_cli(), [*args, "--rounds", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["series"]) == ENQUEUE_SERIES
    assert [row["series"] for row in report["comparisons"]] == ["enqueue", "enqueue"]
