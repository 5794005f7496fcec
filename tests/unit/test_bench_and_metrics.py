"""The benchmark's in-process ledger and percentiles, and per-queue metric registries:
pure logic, no database."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from venturi.bench import report
from venturi.bench.support import BenchFailure, Ledger, percentile
from venturi.metrics import QueueMetrics


def test_ledger_catches_a_job_run_twice_or_never() -> None:
    ledger = Ledger()
    ledger.reset(3)
    for n in (0, 1, 1):
        ledger.record(n)
    with pytest.raises(BenchFailure, match=r"jobs \[1\] ran more than once"):
        ledger.check(3, "drain")
    ledger.reset(3)
    ledger.record(0)
    with pytest.raises(BenchFailure, match="2 of 3 jobs never ran"):
        ledger.check(3, "drain")
    ledger.record(1)
    ledger.record(2)
    assert ledger.wait(0)
    ledger.check(3, "drain")


def test_percentile_interpolates() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == pytest.approx(50.5, abs=0.1)
    assert percentile(values, 0.99) == pytest.approx(99.0, abs=0.1)
    assert percentile([3.0], 0.99) == 3.0


def test_registries_are_per_queue() -> None:
    first, second = QueueMetrics(), QueueMetrics()  # the same names, no collision
    assert first.registry is not second.registry
    own = CollectorRegistry()
    assert QueueMetrics(registry=own).registry is own


def test_each_comparison_names_its_own_ceiling() -> None:
    samples = {
        "drain.c16": [9000.0],
        "backlog.c16": [8000.0],
        "drain.c16.unprepared": [6500.0],
        "ceiling.commit_per_job.c16": [3000.0],
    }
    comparisons = {row["name"]: row for row in report.build({}, samples)["comparisons"]}
    assert comparisons["drain c16"]["ceiling_label"] == "raw claim+complete, 1/commit"
    assert comparisons["drain c16, backlog"]["ceiling_label"] == "venturi drain c16, empty table"
    unprepared = comparisons["drain c16, unprepared"]
    assert unprepared["ceiling_label"] == "venturi, prepared (default)"
    assert unprepared["ratio"] == pytest.approx(6500 / 9000)


def test_enqueue_many_is_compared_with_both_its_ceilings() -> None:
    samples = {
        "enqueue-many": [90000.0],
        "ceiling.multi_insert": [100000.0],
        "ceiling.copy": [150000.0],
    }
    comparisons = {row["name"]: row for row in report.build({}, samples)["comparisons"]}
    inserted, copied = comparisons["enqueue-many"], comparisons["enqueue-many vs COPY"]
    assert inserted["ceiling_label"] == "raw multi-row INSERT"
    assert (inserted["ratio"], inserted["met"]) == (pytest.approx(0.9), False)
    assert copied["ceiling_label"] == "raw binary COPY"
    assert (copied["ratio"], copied["met"]) == (pytest.approx(0.6), None)


def test_a_ratio_per_round_pairs_figures_of_the_same_round() -> None:
    # The machine's speed moved between rounds: the medians (200 and 340) come from
    # different rounds, the per-round ratios from the same one each.
    samples = {"cpu.1p": [300.0, 150.0, 200.0], "cpu.2p": [540.0, 300.0, 340.0]}
    row = {r["name"]: r for r in report.build({}, samples)["comparisons"]}[
        "CPU-bound jobs, 2 worker processes"
    ]
    assert (row["ratio"], row["met"]) == (pytest.approx(1.7), True)
    assert row["paired"] == {
        "median": pytest.approx(1.8),
        "min": pytest.approx(1.7),
        "max": pytest.approx(2.0),
    }


def test_series_sampled_in_different_rounds_have_no_ratio_per_round() -> None:
    assert report.paired_ratio([1.0, 2.0], [1.0]) is None
    assert report.paired_ratio([], []) is None
