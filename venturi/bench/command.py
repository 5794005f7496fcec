"""`venturi bench`: venturi's throughput and latency beside raw-SQL ceilings, one server.

Each round runs every selected workload for venturi and its plain-psycopg ceiling back
to back, alternating which goes first, so drift on a shared machine hits both alike.
Every round proves each job ran exactly once. The report gives medians with min-max over
rounds and each venturi figure as a ratio to its ceiling.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import click

from venturi.bench import report as bench_report
from venturi.bench.ceilings import CEILING_BATCH, Ceilings
from venturi.bench.fairness import FairBench
from venturi.bench.horizon import HeldHorizonBench
from venturi.bench.pruning import PruneBench
from venturi.bench.report import UNPREPARED_SUFFIX
from venturi.bench.soak import Soak
from venturi.bench.support import BenchFailure, BenchSettings
from venturi.bench.suspended import SuspendedBench
from venturi.bench.worker import cpu_ceiling, drive, latency, loops_for
from venturi.bench.workloads import VenturiBench
from venturi.cli.support import warn_if_password_shown
from venturi.store.connections import Preparation

WORKLOADS = (
    "enqueue",
    "enqueue-many",
    "drain",
    "latency",
    "backlog",
    "limited",
    "transactional",
    "prune",
    "sustained",
    "held-horizon",
    "durable",
    "fair",
    "rss",
    "soak",
    "cpu",
)
DRAIN_CONCURRENCIES = (1, 4, 16)
# Handler threads of the worker process whose pick-up latency the "latency" workload takes.
LATENCY_CONCURRENCIES = (1, 16)
# The "limited" workload drains a kind limited to this many running jobs at concurrency 16,
# and one limited to SLOW_LIMIT whose jobs take SLOW_JOB_SECONDS, against the most those
# places can run (SLOW_LIMIT / SLOW_JOB_SECONDS jobs/s).
LIMITED_CONCURRENCY = 8
SLOW_LIMIT = 3
SLOW_JOB_SECONDS = 0.01
# The "cpu" workload: threads per worker process, and process counts without --processes.
CPU_CONCURRENCY = 4
CPU_PROCESSES = (1, 2)
# The "transactional" workload drains a transactional kind at these concurrencies.
TRANSACTIONAL_CONCURRENCIES = (1, 16)
Step = Callable[[], dict[str, float]]


def _groups(
    workloads: Sequence[str],
    processes: Sequence[int],
    main: VenturiBench,
    raw: Ceilings,
    backlog: VenturiBench | None,
    *,
    unprepared: VenturiBench | None = None,
    limited: tuple[VenturiBench, ...] = (),
    cpu_loops: int = 0,
    transactional: VenturiBench | None = None,
    sustained: tuple[VenturiBench, VenturiBench] | None = None,
    held_horizon: HeldHorizonBench | None = None,
    suspended: SuspendedBench | None = None,
    fairness: FairBench | None = None,
) -> list[list[Step]]:
    """Each group's steps are measured back to back in one round (venturi beside its
    ceilings, and beside itself with prepared statements off); rounds reverse the order
    within each group."""
    s = main.settings

    def twin(step: Callable[..., dict[str, float]], *args: Any) -> list[Step]:
        """``step`` (a `VenturiBench` method) run on the unprepared bench too."""
        if unprepared is None:
            return []
        method = getattr(unprepared, step.__name__)
        return [functools.partial(_suffixed, UNPREPARED_SUFFIX, functools.partial(method, *args))]

    groups: list[list[Step]] = []
    if "enqueue" in workloads:
        groups.append(
            [
                main.enqueue_one,
                raw.insert_notify,
                main.insert_notify_own_table,
                *twin(main.enqueue_one),
            ]
        )
    if "enqueue-many" in workloads:
        groups.append(
            [
                main.enqueue_many,
                raw.multi_insert,
                raw.copy,
                main.copy_own_table,
                *twin(main.enqueue_many),
            ]
        )
    if "drain" in workloads:
        for c in DRAIN_CONCURRENCIES:
            groups.append(
                [
                    functools.partial(main.drain, c),
                    functools.partial(raw.drain, c, 1),
                    functools.partial(raw.drain, c, CEILING_BATCH),
                    *twin(main.drain, c),
                ]
            )
    if "latency" in workloads:
        # As deployed (a worker process of its own), and the secondary in-process figure.
        deployed = [functools.partial(latency, main, c) for c in LATENCY_CONCURRENCIES]
        groups.append([*deployed, main.latency])
    if backlog is not None:
        steps: list[Step] = [functools.partial(backlog.drain, 16, "backlog.c16")]
        if "drain" not in workloads:
            steps.append(functools.partial(main.drain, 16))
        groups.append(steps)
    if limited:
        quick, slow, *slow_unprepared = limited
        steps = [functools.partial(quick.drain, 16, f"limited{LIMITED_CONCURRENCY}.c16")]
        if "drain" not in workloads:
            steps.append(functools.partial(main.drain, 16))
        groups.append(steps)
        groups.append(
            [
                functools.partial(_slow_limited, slow),
                functools.partial(raw.passing, SLOW_LIMIT, SLOW_JOB_SECONDS, _slow_count(s)),
                *(
                    functools.partial(
                        _suffixed, UNPREPARED_SUFFIX, functools.partial(_slow_limited, bench, False)
                    )
                    for bench in slow_unprepared
                ),
            ]
        )
    if transactional is not None:
        for c in TRANSACTIONAL_CONCURRENCIES:
            steps = [functools.partial(transactional.drain, c, f"transactional.c{c}")]
            if "drain" not in workloads:
                steps.append(functools.partial(main.drain, c))
            groups.append(steps)
    if "prune" in workloads:
        groups.append([PruneBench(main).round])
    if sustained is not None:
        vacuuming, unvacuumed = sustained
        groups.append(
            [
                functools.partial(vacuuming.sustain, "sustained.c16"),
                functools.partial(unvacuumed.sustain, "sustained.autovacuum.c16"),
            ]
        )
    if held_horizon is not None:
        groups.append([held_horizon.round])
    if suspended is not None:
        groups.append([suspended.round])
    if fairness is not None:
        groups.append([fairness.round])
    if "rss" in workloads:
        groups.append([functools.partial(_only, "rss.", drive, main, 1, 16, s.rss_jobs)])
    if "soak" in workloads:
        groups.append([Soak(main).round])
    for count in processes:
        figures = ("processes.", "backends.")  # throughput, and the group's peak backends
        groups.append([functools.partial(_only, figures, drive, main, count, 16, s.jobs)])
    if "cpu" in workloads:
        # One group, so that each round takes every process count back to back (the next
        # round in the reverse order) and the per-round ratios pair figures seconds apart.
        groups.append(
            [
                step
                for count in processes or CPU_PROCESSES
                for step in (
                    functools.partial(drive, main, count, CPU_CONCURRENCY, s.cpu_jobs, cpu_loops),
                    functools.partial(cpu_ceiling, count, s.cpu_jobs, cpu_loops),
                )
            ]
        )
    return groups


def _slow_limited(bench: VenturiBench, with_ideal: bool = True) -> dict[str, float]:
    """The drain of the kind limited to `SLOW_LIMIT` with jobs of `SLOW_JOB_SECONDS`
    (`_slow_count` of them), beside (``with_ideal``) the most its places could run if a
    run's end cost nothing."""
    key = f"limited{SLOW_LIMIT}.{SLOW_JOB_SECONDS * 1000:g}ms.c16"
    figures = bench.drain(16, key, _slow_count(bench.settings))
    if not with_ideal:
        return figures
    return {**figures, f"{key}.ideal": SLOW_LIMIT / SLOW_JOB_SECONDS}


def _slow_count(settings: BenchSettings) -> int:
    """Jobs of the limited kind with slow jobs: a fifth of ``jobs``, at most 1,000."""
    return max(1, min(1000, settings.jobs // 5))


def _suffixed(suffix: str, step: Step) -> dict[str, float]:
    """The figures of ``step()``, each series name followed by ``suffix``."""
    return {key + suffix: value for key, value in step().items()}


def _only(
    prefix: str | tuple[str, ...], step: Callable[..., dict[str, float]], *args: Any
) -> dict[str, float]:
    """The figures of ``step(*args)`` whose series name starts with ``prefix`` (or one of
    several)."""
    return {key: value for key, value in step(*args).items() if key.startswith(prefix)}


def run(
    settings: BenchSettings,
    workloads: Sequence[str] = WORKLOADS,
    processes: Sequence[int] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return its report (see `bench_report.build`).

    Creates fresh prefixes and drops them at the end, whatever happens. Raises
    `BenchFailure` when a job was lost or ran twice, or a round did not finish.
    """
    say = progress or (lambda _text: None)
    samples: dict[str, list[float]] = defaultdict(list)
    # Each close drops its own tables; the stack runs every one, whatever raised.
    with contextlib.ExitStack() as cleanup:
        main = VenturiBench(settings)
        cleanup.callback(main.close)
        raw = Ceilings(settings, main.prefix)
        cleanup.callback(raw.close)
        backlog: VenturiBench | None = None
        if "backlog" in workloads:
            backlog = VenturiBench(settings, "b")
            cleanup.callback(backlog.close)
            say(f"filling a backlog of {settings.backlog:,} pending rows")
            backlog.fill_backlog(settings.backlog)
        unprepared: VenturiBench | None = None
        if settings.compare_unprepared:
            unprepared = VenturiBench(settings, "u", prepared_statements=False)
            cleanup.callback(unprepared.close)
        limited: tuple[VenturiBench, ...] = ()
        if "limited" in workloads:
            quick = VenturiBench(settings, "l", concurrency_limit=LIMITED_CONCURRENCY)
            cleanup.callback(quick.close)
            limited = (quick,)
            settings_by_label: tuple[tuple[str, Preparation], ...] = (("s", "auto"), ("su", False))
            for label, prepared_statements in settings_by_label:
                if prepared_statements is False and not settings.compare_unprepared:
                    continue
                slow = VenturiBench(
                    settings,
                    label,
                    prepared_statements=prepared_statements,
                    concurrency_limit=SLOW_LIMIT,
                    job_seconds=SLOW_JOB_SECONDS,
                )
                cleanup.callback(slow.close)
                limited += (slow,)
        cpu_loops = loops_for(settings.cpu_ms) if "cpu" in workloads else 0
        transactional: VenturiBench | None = None
        if "transactional" in workloads:
            transactional = VenturiBench(settings, "x", transactional=True)
            cleanup.callback(transactional.close)
        sustained: tuple[VenturiBench, VenturiBench] | None = None
        if "sustained" in workloads:
            sustained = (
                VenturiBench(settings, "sv"),
                VenturiBench(settings, "sa", vacuum=False),
            )
            for bench in sustained:
                cleanup.callback(bench.close)
        held_horizon: HeldHorizonBench | None = None
        if "held-horizon" in workloads:
            held_horizon = HeldHorizonBench(settings)
            cleanup.callback(held_horizon.close)
        suspended: SuspendedBench | None = None
        if "durable" in workloads:
            beside, alone = VenturiBench(settings, "ds"), VenturiBench(settings, "da")
            cleanup.callback(beside.close)
            cleanup.callback(alone.close)
            suspended = SuspendedBench(beside, alone)
            say(f"staging {settings.suspended:,} jobs suspended in durable sleeps and waits")
            suspended.fill()
        fairness: FairBench | None = None
        if "fair" in workloads:
            fairness = FairBench(settings)
            cleanup.callback(fairness.close)
        groups = _groups(
            workloads,
            processes,
            main,
            raw,
            backlog,
            unprepared=unprepared,
            limited=limited,
            cpu_loops=cpu_loops,
            transactional=transactional,
            sustained=sustained,
            held_horizon=held_horizon,
            suspended=suspended,
            fairness=fairness,
        )
        for index in range(settings.rounds):
            say(f"round {index + 1} of {settings.rounds}")
            for group in groups:
                for step in group if index % 2 == 0 else reversed(group):
                    for key, value in step().items():
                        samples[key].append(value)
    described = {**attrs.asdict(settings), "workloads": list(workloads)}
    described.pop("dsn")
    described["processes"] = list(processes)
    if "cpu" in workloads:
        described["cpu_loops"] = cpu_loops
    return bench_report.build(described, dict(samples))


def _resolve_dsn(dsn: str | None) -> str:
    """``--dsn`` here, else the `venturi` group's ``--dsn``, else VENTURI_DSN or libpq's."""
    if dsn is not None:
        return dsn
    ctx = click.get_current_context(silent=True)
    parent = ctx.find_root().params.get("dsn") if ctx is not None else None
    return str(parent) if parent else os.environ.get("VENTURI_DSN", "")


def _processes(value: str | None) -> list[int]:
    if not value:
        return []
    try:
        counts = [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"--processes takes counts like 1,2,4, got {value!r}") from None
    if any(count < 1 or count > 16 for count in counts):
        raise click.BadParameter("--processes counts must be within [1, 16]")
    return counts


@click.command("bench")
@click.option("--dsn", metavar="DSN", help="Database [default: venturi --dsn, VENTURI_DSN].")
@click.option("--quick", is_flag=True, help="Small sizes: checks every workload in seconds.")
@click.option("--rounds", type=click.IntRange(1), help="Rounds per workload (default 5).")
@click.option("--jobs", type=click.IntRange(1), help="Jobs per drain round (default 5000).")
@click.option("--backlog", type=click.IntRange(0), help="Backlog rows (default 1,000,000).")
@click.option(
    "--suspended",
    type=click.IntRange(1),
    help="Jobs suspended in durable sleeps and waits beside the durable workload's drain "
    "(default 100,000).",
)
@click.option(
    "--durable-jobs",
    type=click.IntRange(1),
    help="Jobs per drain of the durable workload (default 20,000).",
)
@click.option(
    "--prune-rows",
    type=click.IntRange(1),
    help="Finished rows the prune workload deletes beside a draining worker (default 1,000,000).",
)
@click.option(
    "--workload",
    "workloads",
    multiple=True,
    type=click.Choice(WORKLOADS),
    help="Run only these workloads (repeatable; default all).",
)
@click.option(
    "--processes",
    help="Also drain no-op jobs with N worker processes, e.g. 1,2,4 (and the cpu workload "
    "with these counts instead of 1,2).",
)
@click.option(
    "--cpu-ms",
    type=click.FloatRange(min=0.1, max=1000),
    help="Pure-Python work per job of the cpu workload, in milliseconds (default 3).",
)
@click.option(
    "--soak-seconds",
    type=click.FloatRange(min=4),
    help="Length of each round of the soak workload, in seconds (default 60).",
)
@click.option(
    "--held-rounds",
    type=click.IntRange(1),
    help="Sustained rounds on each side of the held-horizon workload, per round (default 5).",
)
@click.option(
    "--held-slot",
    is_flag=True,
    help="Also run the held-horizon rounds while a replication slot holds the horizon, left "
    "by a standby this bench copies with pg_basebackup, runs with hot_standby_feedback and "
    "stops (needs PostgreSQL's programs here and replication access to the server).",
)
@click.option(
    "--latency-samples",
    type=click.IntRange(10),
    help="Jobs timed from commit to handler start in each latency measurement (default "
    "250): more samples make a p99 less a matter of whether a checkpoint's sync fell in "
    "the measurement.",
)
@click.option("--fillfactor", type=click.IntRange(10, 100), help="Jobs table fillfactor.")
@click.option(
    "--compare-unprepared",
    is_flag=True,
    help="Also run enqueue, enqueue-many, drain and the limited kind with 10 ms jobs with "
    "server-side prepared statements off (as behind a transaction pooler), side by side "
    "in each round.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bench_command(
    *,
    dsn: str | None,
    quick: bool,
    rounds: int | None,
    jobs: int | None,
    backlog: int | None,
    suspended: int | None,
    durable_jobs: int | None,
    prune_rows: int | None,
    workloads: tuple[str, ...],
    processes: str | None,
    cpu_ms: float | None,
    soak_seconds: float | None,
    held_rounds: int | None,
    held_slot: bool,
    latency_samples: int | None,
    fillfactor: int | None,
    compare_unprepared: bool,
    as_json: bool,
) -> None:
    """Benchmark venturi against raw-SQL ceilings on the same server.

    Workloads: enqueue (one transaction each), enqueue-many, drain at concurrency 1, 4
    and 16, latency (enqueue commit to handler start on an idle worker in a process of its
    own at concurrency 1 and 16, and in this process at 4), drain beside a
    backlog of pending rows, drain at concurrency 16 of a kind limited to 8 running jobs
    (every claim takes the limited path) and of one limited to 3 with 10 ms jobs (against
    the 300 jobs/s its places allow), a transactional kind's drain at concurrency 1 and 16
    (each completion in the run's own transaction), drain c16 beside the retention's prune
    of finished rows, sustained load (each round drains --jobs more jobs at concurrency 16
    into the same table, nothing deleted, with workers that vacuum it and with autovacuum
    alone; run with --rounds 20), held-horizon (--held-rounds such rounds with nothing
    holding back the xmin horizon, then as many into another table while a REPEATABLE READ
    snapshot stays open, with --held-slot as many again while a slot a stopped standby
    left holds it, and the pick-up latency after each; run with --rounds 1 --jobs 20000
    --held-rounds 20), durable (drain c16 of --durable-jobs ordinary jobs beside
    --suspended jobs suspended in durable sleeps and waits, against the same drain alone,
    side by side each round), fair (a fair kind against the same kind without fairness:
    the small keys' wait beside a deep key's backlog, runs shared by weights 1, 2 and 4
    over a minute, and drains of one deep key and of 1,000 keys of 100 jobs), a
    concurrency-16 worker process's peak RSS, the same worker's RSS over a soak
    (--soak-seconds of about 400 jobs/s that complete, retry, pause and die, beside a
    periodic job and a short retention's prunes), and CPU-bound jobs
    (--cpu-ms of pure Python each) drained by 1 and 2 worker processes (or --processes).
    --compare-unprepared adds each of enqueue, enqueue-many, drain and the limited kind
    with 10 ms jobs again with server-side prepared statements off. Every job is checked to
    have run exactly once. Uses fresh table prefixes and drops them after.
    """
    warn_if_password_shown(click.get_current_context(), "dsn", "--dsn")
    overrides: dict[str, Any] = {
        key: value
        for key, value in {
            "rounds": rounds,
            "jobs": jobs,
            "backlog": backlog,
            "suspended": suspended,
            "durable_jobs": durable_jobs,
            "prune_rows": prune_rows,
            "fillfactor": fillfactor,
            "cpu_ms": cpu_ms,
            "soak_seconds": soak_seconds,
            "held_rounds": held_rounds,
            "held_slot": held_slot or None,
            "latency_samples": latency_samples,
            "compare_unprepared": compare_unprepared or None,
        }.items()
        if value is not None
    }
    dsn = _resolve_dsn(dsn)
    settings = BenchSettings.quick(dsn, **overrides) if quick else BenchSettings(dsn, **overrides)
    chosen = workloads or WORKLOADS
    if settings.backlog == 0:  # no rows to drain beside
        chosen = tuple(w for w in chosen if w != "backlog")
        if not chosen:
            raise click.BadParameter(
                "--backlog 0 leaves no workload to run", param_hint="'--workload'"
            )
    say = None if as_json else (lambda text: click.echo(text, err=True))
    try:
        report = run(settings, chosen, _processes(processes), progress=say)
    except BenchFailure as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        bench_report.render(report)
