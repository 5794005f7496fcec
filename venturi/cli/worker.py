"""`venturi worker`: one worker in this process, or with --processes a supervised
group of worker processes (`venturi.processes`)."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Literal

import click

from venturi.cli.support import DURATION, CliState, import_queue, pass_state
from venturi.client import Queue
from venturi.errors import ConfigurationError
from venturi.jsonlog import JsonFormatter
from venturi.processes.channel import ChildSettings
from venturi.processes.child import child_events, run_child
from venturi.processes.group import WorkerGroup, WorkerGroupFailed
from venturi.processes.recycling import parse_size
from venturi.schedules.retention import Retention

# Options that make `worker` a supervisor; one of them must be on its command line.
_GROUP_OPTIONS = ("--processes", "--max-jobs-per-child", "--max-memory-per-child")


def _configure_logging(level: str, log_format: str = "text") -> None:
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _retention_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> Retention | Literal[False] | None:
    """--retention as a `Retention` (None for 'none'; False when not given: the queue's)."""
    if value is None:
        return False
    if value.strip().lower() == "none":
        return None
    try:
        return Retention.of(value)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def worker_command(embedded: bool) -> click.Command:
    """`worker`; with ``embedded`` (an application supplies the queue) it has no --app."""

    @click.command("worker")
    @click.option(
        "--app",
        envvar="VENTURI_APP",
        metavar="MODULE:QUEUE",
        help="Import this venturi.Queue (its jobs registered at import) [env VENTURI_APP]. "
        "Its own DSN and prefix apply.",
    )
    @click.option(
        "-Q",
        "--kinds",
        help="Comma-separated kinds to run (default: every registered kind); for a Celery "
        "app, task names.",
    )
    @click.option("-c", "--concurrency", type=click.IntRange(min=1), default=4, show_default=True)
    @click.option("--priority-floor", type=click.IntRange(-32768, 32767), help="Skip jobs below.")
    @click.option(
        "--poll-interval",
        type=DURATION,
        default="5s",
        show_default=True,
        help="Longest idle sleep when no NOTIFY arrives.",
    )
    @click.option("--name", help="Worker name recorded in claimed_by (default host:pid:random).")
    @click.option(
        "--retention",
        metavar="STATUS=AGE,...",
        callback=_retention_option,
        help="How long finished jobs are kept, e.g. completed=3d,dead=never (default: the "
        "queue's; completed and cancelled 1d, dead 7d). 'none' keeps every job.",
    )
    @click.option(
        "--vacuum/--no-vacuum",
        default=True,
        show_default=True,
        help="Vacuum the jobs table between autovacuum's visits once enough dead rows "
        "accumulate; --no-vacuum leaves it to autovacuum alone.",
    )
    @click.option(
        "--processes",
        type=click.IntRange(1, 256),
        help="Run N worker processes under one supervisor, each a fresh interpreter with "
        "--concurrency threads: restarted when they die, stopped together.",
    )
    @click.option(
        "--max-jobs-per-child",
        type=click.IntRange(min=1),
        help="Recycle a worker process after this many runs (its replacement starts "
        "first). Implies a supervisor (--processes 1 by default).",
    )
    @click.option(
        "--max-memory-per-child",
        metavar="SIZE",
        callback=_size_option,
        help="Recycle a worker process whose resident memory passes SIZE, e.g. 512MB or "
        "2GB. Implies a supervisor.",
    )
    @click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        help="Serve Prometheus metrics (with --processes: the group's, summed).",
    )
    @click.option(
        "--metrics-host",
        "--metrics-addr",
        "metrics_addr",
        default="127.0.0.1",
        show_default=True,
        help="Address the metrics port listens on: this machine only by default; "
        "0.0.0.0 (or a host's own address) exposes it to the network.",
    )
    @click.option(
        "--stop-timeout",
        type=DURATION,
        default="30s",
        show_default=True,
        help="Grace for running jobs on SIGINT/SIGTERM before they are released.",
    )
    @click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"]),
        default="info",
        show_default=True,
    )
    @click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: one JSON object per line, with job_id, kind and run on job lines.",
    )
    @pass_state
    def worker(state: CliState, /, *, app: str | None = None, **options: Any) -> None:
        """Run jobs until SIGINT or SIGTERM.

        The first signal stops claiming and gives running jobs --stop-timeout to finish
        (their `ctx.stopping` is set); a second one releases them at once. With
        --processes N, a supervisor runs this command line in N worker processes,
        restarts and recycles them, and passes both signals on to each.
        """
        source: Callable[[], Queue]
        if embedded:
            source = state.queue
        elif app is not None:
            source = functools.partial(import_queue, app)
        else:
            raise click.UsageError(
                "worker needs --app MODULE:QUEUE (or VENTURI_APP): the venturi.Queue whose "
                "jobs it runs"
            )
        _configure_logging(options.pop("log_level"), options.pop("log_format"))
        child = ChildSettings.take_from_environment()
        group = {
            k: options.pop(k) for k in ("processes", "max_jobs_per_child", "max_memory_per_child")
        }
        if child is None and any(v is not None for v in group.values()):
            _run_group(source, **group, **options)
        else:
            _run_worker(source(), child, **options)

    if embedded:  # the application supplies the queue, so there is nothing to import
        worker.params = [p for p in worker.params if p.name != "app"]
    return worker


def _run_worker(
    queue: Queue,
    child: ChildSettings | None,
    *,
    kinds: str | None,
    concurrency: int,
    priority_floor: int | None,
    poll_interval: float,
    name: str | None,
    retention: Retention | Literal[False] | None,
    vacuum: bool,
    metrics_port: int | None,
    metrics_addr: str,
    stop_timeout: float,
) -> None:
    chosen = None if kinds is None else [k.strip() for k in kinds.split(",") if k.strip()]
    options: dict[str, Any] = {}
    if child is not None:  # counts for its supervisor, which serves the metrics
        options["events"] = events = child_events(child)
        # Every worker process needs a name of its own (claimed_by, the registry).
        name = None if name is None else f"{name}:{os.getpid()}"
    elif metrics_port is not None:
        options.update(metrics_port=metrics_port, metrics_addr=metrics_addr)
    if retention is not False:
        options["retention"] = retention
    worker = queue.worker(
        chosen,
        concurrency=concurrency,
        priority_floor=priority_floor,
        name=name,
        poll_interval=poll_interval,
        vacuum=vacuum,
        **options,
    )
    if child is not None:
        run_child(worker, child, events, stop_timeout)
        return
    try:
        worker.run(timeout=stop_timeout)
    finally:
        worker.stop(stop_timeout)  # a no-op after run(); frees the metrics port otherwise


def _run_group(
    source: Callable[[], Queue],
    *,
    processes: int | None,
    max_jobs_per_child: int | None,
    max_memory_per_child: int | None,
    metrics_port: int | None,
    metrics_addr: str,
    stop_timeout: float,
    **worker_options: Any,
) -> None:
    """Supervise worker processes that each run this same command line as a child."""
    command = list(sys.orig_argv)
    if not any(arg.startswith(_GROUP_OPTIONS) for arg in command[1:]):
        raise click.UsageError(
            "--processes re-runs this command line in each worker process, but this "
            "process was not started with it (called from Python?); use "
            "venturi.processes.group.WorkerGroup instead"
        )
    group = WorkerGroup(
        command,
        processes or 1,
        max_jobs_per_child=max_jobs_per_child,
        max_memory_per_child=max_memory_per_child,
        stop_timeout=stop_timeout,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
        stats_source=None if metrics_port is None else source(),
    )
    try:
        group.run()
    except WorkerGroupFailed as exc:
        raise click.ClickException(str(exc)) from None
