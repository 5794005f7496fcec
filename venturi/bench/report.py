"""Turns `venturi bench` samples into medians, ratios and targets; prints them as a table."""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Console
from rich.table import Table

from venturi.cli.render import console as stdout_console

# (label, venturi series, ceiling series, target ratio or None): each venturi figure
# against the raw-SQL ceiling (or the empty-table rate) measured in the same run.
COMPARISONS: tuple[tuple[str, str, str, float | None], ...] = (
    ("enqueue, 1/transaction", "enqueue", "ceiling.insert_notify", 0.8),
    ("enqueue-many", "enqueue-many", "ceiling.multi_insert", 1.0),
    ("enqueue-many vs COPY", "enqueue-many", "ceiling.copy", None),
    # The same writes on the prefix's own jobs table, without venturi's contract (its
    # checks, ids, fair tags): what the contract costs, and what the table's shape does.
    ("enqueue, own jobs table", "enqueue", "ceiling.insert_notify.own_table", 0.9),
    ("enqueue-many vs COPY, own jobs table", "enqueue-many", "ceiling.copy.own_table", 0.8),
    ("raw COPY: jobs table vs minimal", "ceiling.copy.own_table", "ceiling.copy", None),
    ("drain c1", "drain.c1", "ceiling.commit_per_job.c1", 1.0),
    ("drain c4", "drain.c4", "ceiling.commit_per_job.c4", None),
    ("drain c16", "drain.c16", "ceiling.commit_per_job.c16", 2.0),
    ("drain c16, backlog", "backlog.c16", "drain.c16", 0.8),
    ("drain c16, kind limited to 8", "limited8.c16", "drain.c16", None),
    # The kind drains at 0.8 of what its three places drain in raw SQL, each completing
    # its job and claiming the next in one statement; and how far both are from three
    # places whose runs' ends cost nothing.
    (
        "drain c16, kind limited to 3, 10 ms jobs",
        "limited3.10ms.c16",
        "ceiling.limited3.10ms",
        0.8,
    ),
    ("… against free runs' ends", "limited3.10ms.c16", "limited3.10ms.c16.ideal", None),
    ("raw SQL, 3 places passed on", "ceiling.limited3.10ms", "limited3.10ms.c16.ideal", None),
    (
        "drain c16, kind limited to 3, 10 ms jobs, unprepared",
        "limited3.10ms.c16.unprepared",
        "limited3.10ms.c16.ideal",
        None,
    ),
    ("drain c16 beside a prune", "prune.beside.c16", "prune.alone.c16", 0.8),
    (
        "drain c16 beside suspended durable jobs",
        "durable.beside.c16",
        "durable.alone.c16",
        None,
    ),
    (
        "drain c16, fair kind, one deep key",
        "fair.drain.one_key.fair",
        "fair.drain.one_key.unfair",
        0.9,
    ),
    (
        "drain c16, fair kind, 1,000 keys of 100",
        "fair.drain.many_keys.fair",
        "fair.drain.many_keys.unfair",
        0.8,
    ),
    ("no-op jobs, 2 worker processes", "processes.2.c16", "processes.1.c16", None),
    ("no-op jobs, 4 worker processes", "processes.4.c16", "processes.1.c16", None),
    ("CPU-bound jobs, 1 worker process", "cpu.1p", "cpu.ceiling.1p", None),
    ("CPU-bound jobs, 2 worker processes", "cpu.2p", "cpu.1p", 1.7),
    ("CPU-bound jobs, 4 worker processes", "cpu.4p", "cpu.1p", None),
    ("CPU-bound work, 2 plain processes", "cpu.ceiling.2p", "cpu.ceiling.1p", None),
    ("CPU-bound work, 4 plain processes", "cpu.ceiling.4p", "cpu.ceiling.1p", None),
    (
        "sustained drain c16, workers vacuum",
        "sustained.c16",
        "sustained.autovacuum.c16",
        None,
    ),
    (
        "sustained drain c16, a snapshot held",
        "held_horizon.snapshot.c16",
        "held_horizon.unheld.c16",
        0.8,
    ),
    (
        "the same, last round",
        "held_horizon.snapshot.last",
        "held_horizon.unheld.c16",
        0.8,
    ),
    (
        "sustained drain c16, a slot left by a stopped standby",
        "held_horizon.slot.c16",
        "held_horizon.unheld.c16",
        0.8,
    ),
    (
        "the same, last round",
        "held_horizon.slot.last",
        "held_horizon.unheld.c16",
        0.8,
    ),
    ("drain c1, transactional completion", "transactional.c1", "drain.c1", None),
    ("drain c16, transactional completion", "transactional.c16", "drain.c16", None),
)
# `--compare-unprepared`: each workload with server-side prepared statements off (as
# behind a transaction pooler), against venturi's default measured in the same rounds.
UNPREPARED_SUFFIX = ".unprepared"
UNPREPARED_COMPARISONS: tuple[tuple[str, str, str, float | None], ...] = tuple(
    (f"{label}, unprepared", key + UNPREPARED_SUFFIX, key, None)
    for label, key in (
        ("enqueue", "enqueue"),
        ("enqueue-many", "enqueue-many"),
        ("drain c1", "drain.c1"),
        ("drain c4", "drain.c4"),
        ("drain c16", "drain.c16"),
        ("drain c16, kind limited to 3, 10 ms jobs", "limited3.10ms.c16"),
    )
)
# (label, series, upper limit): absolute targets.
# Latency: enqueue commit to handler start, the worker in a process of its own (as
# deployed) at concurrency 1 and 16, and in the bench's own process at 4.
LIMITS: tuple[tuple[str, str, float], ...] = (
    ("latency p50, worker process, c1", "latency.c1.p50", 1.2),
    ("latency p95, worker process, c1", "latency.c1.p95", float("inf")),
    ("latency p99, worker process, c1", "latency.c1.p99", 2.5),
    ("latency p50, worker process, c16", "latency.c16.p50", float("inf")),
    ("latency p95, worker process, c16", "latency.c16.p95", float("inf")),
    ("latency p99, worker process, c16", "latency.c16.p99", 3.0),
    ("latency p50, in-process worker, c4", "latency.inprocess.c4.p50", float("inf")),
    ("latency p99, in-process worker, c4", "latency.inprocess.c4.p99", float("inf")),
    ("peak RSS, c16 worker process", "rss.c16", 60.0),
    # Fair kinds: a small key's wait beside a deep key's backlog, 5 ms handlers at c16;
    # the goal is three handlers' time and a claim's round trip.
    ("small keys' wait p50 beside a deep key, fair", "fair.starvation.fair.p50_ms", float("inf")),
    ("small keys' wait p99 beside a deep key, fair", "fair.starvation.fair.p99_ms", 16.0),
    (
        "the same, worker with prefetch=0",
        "fair.starvation.fair.prefetch0.p99_ms",
        16.0,
    ),
    ("the same, not fair (lower bound)", "fair.starvation.unfair.p99_ms", float("inf")),
    ("RSS after a soak, c16 worker process", "soak.rss_end_mb", 50.0),
    (
        "pick-up p99 after sustained rounds, a snapshot held against none",
        "held_horizon.snapshot.pickup_p99.ratio",
        2.0,
    ),
    (
        "the same, a slot held against none",
        "held_horizon.slot.pickup_p99.ratio",
        2.0,
    ),
    ("RSS growth over a soak after warm-up", "soak.growth", float("inf")),
)
CEILING_LABELS = {
    "ceiling.insert_notify": "raw INSERT+NOTIFY",
    "ceiling.multi_insert": "raw multi-row INSERT",
    "ceiling.copy": "raw binary COPY",
    "ceiling.insert_notify.own_table": "raw INSERT+NOTIFY, jobs table",
    "ceiling.copy.own_table": "raw binary COPY, jobs table",
    "drain.c16": "venturi drain c16, empty table",
    "prune.alone.c16": "the same drain, no prune",
    "durable.alone.c16": "the same drain, nothing suspended",
    "fair.drain.one_key.unfair": "the same kind, not fair",
    "fair.drain.many_keys.unfair": "the same kind, not fair",
    "sustained.autovacuum.c16": "the same rounds, autovacuum alone",
    "held_horizon.unheld.c16": "the same rounds, nothing held",
    "processes.1.c16": "1 worker process",
    "cpu.1p": "1 worker process",
    "cpu.ceiling.1p": "the same work, 1 plain process",
    "limited3.10ms.c16.ideal": "3 places x 100 jobs/s",
    "ceiling.limited3.10ms": "raw complete+claim, 3 places",
}
# An unprepared row's ceiling is the same workload with venturi's default ("auto":
# prepared on a connection straight to the server, as the bench's is).
DEFAULT_PREPARATION_LABEL = "venturi, prepared (default)"


def unit_of(key: str) -> str:
    if key.startswith("latency."):
        return "ms"
    if key.startswith("rss.") or key.startswith("soak.rss_"):
        return "MB"
    if key == "soak.growth":
        return "x"
    if key.startswith("backends."):
        return "backends"
    if key.endswith(".ratio"):
        return "x"
    if key.endswith(".wal_bytes_per_job"):
        return "WAL bytes/job"
    if key.endswith(".dead_rows"):
        return "dead row versions"
    if key.endswith(".jobs_per_commit"):
        return "jobs/writing transaction"
    if key.endswith("_ms"):
        return "ms"
    if key.endswith(".of_share"):
        return "x its weight's share"
    if key.endswith(".started"):
        return "fraction started"
    if key.endswith(".runs"):
        return "runs"
    return "jobs/s"


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Median, min and max of every series, with its samples and unit."""
    return {
        key: {
            "unit": unit_of(key),
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "samples": values,
        }
        for key, values in samples.items()
        if values
    }


def paired_ratio(values: list[float], ceilings: list[float]) -> dict[str, float] | None:
    """The median, min and max of the round-by-round ratios of two series measured once
    per round (None otherwise). Each ratio pairs two figures of one round, taken minutes
    apart at most, so a machine whose speed drifts between rounds moves it less than it
    moves the ratio of the two medians, which may pair figures from different rounds."""
    if len(values) != len(ceilings) or not values:
        return None
    ratios = [value / ceiling for value, ceiling in zip(values, ceilings, strict=True)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def build(settings: dict[str, Any], samples: dict[str, list[float]]) -> dict[str, Any]:
    """The machine-readable report (`--json`): series, ratios and targets."""
    series = summarize(samples)
    comparisons = []
    labelled = [
        *((row, CEILING_LABELS.get(row[2], "raw claim+complete, 1/commit")) for row in COMPARISONS),
        *((row, DEFAULT_PREPARATION_LABEL) for row in UNPREPARED_COMPARISONS),
    ]
    for (label, key, ceiling, target), ceiling_label in labelled:
        if key not in series or ceiling not in series:
            continue
        ratio = series[key]["median"] / series[ceiling]["median"]
        comparisons.append(
            {
                "name": label,
                "series": key,
                "ceiling": ceiling,
                "ceiling_label": ceiling_label,
                "ratio": ratio,
                "paired": paired_ratio(samples[key], samples[ceiling]),
                "target": target,
                "met": None if target is None else ratio >= target,
            }
        )
    limits = [
        {
            "name": label,
            "series": key,
            "value": series[key]["median"],
            "max": None if limit == float("inf") else limit,
            "met": None if limit == float("inf") else series[key]["median"] <= limit,
        }
        for label, key, limit in LIMITS
        if key in series
    ]
    return {"settings": settings, "series": series, "comparisons": comparisons, "limits": limits}


def _figure(stats: dict[str, Any]) -> str:
    if stats["unit"] == "jobs/s":
        return f"{stats['median']:,.0f} ({stats['min']:,.0f}-{stats['max']:,.0f})"
    return f"{stats['median']:.2f} ({stats['min']:.2f}-{stats['max']:.2f})"


def _paired(paired: dict[str, float] | None) -> str:
    if paired is None:
        return ""
    return f"{paired['median']:.2f}x ({paired['min']:.2f}-{paired['max']:.2f})"


def _met(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "NOT met")


def render(report: dict[str, Any], console: Console | None = None) -> None:
    """Print the report as tables: ratios to ceilings, absolute limits, every series."""
    console = console or stdout_console()
    series = report["series"]
    ratios = Table(title="venturi vs. ceilings (median, min-max over rounds)")
    for column in (
        "workload",
        "venturi jobs/s",
        "ceiling",
        "ceiling jobs/s",
        "ratio",
        "per round",
        "target",
    ):
        ratios.add_column(column)
    for row in report["comparisons"]:
        target = "" if row["target"] is None else f">= {row['target']:g}x {_met(row['met'])}"
        ratios.add_row(
            row["name"],
            _figure(series[row["series"]]),
            row["ceiling_label"],
            _figure(series[row["ceiling"]]),
            f"{row['ratio']:.2f}x",
            _paired(row["paired"]),
            target,
        )
    console.print(ratios)
    limits = Table(title="absolute figures (median, min-max over rounds)")
    for column in ("measure", "value", "limit"):
        limits.add_column(column)
    for row in report["limits"]:
        unit = series[row["series"]]["unit"]
        limit = "" if row["max"] is None else f"<= {row['max']:g} {unit} {_met(row['met'])}"
        limits.add_row(row["name"], f"{_figure(series[row['series']])} {unit}", limit)
    console.print(limits)
    every = Table(title="every series")
    for column in ("series", "unit", "median (min-max)", "rounds"):
        every.add_column(column)
    for key, stats in sorted(series.items()):
        every.add_row(key, stats["unit"], _figure(stats), str(len(stats["samples"])))
    console.print(every)
