"""Sub-commands that act on many jobs or change their state: stats, cancel, signal, requeue,
cleanup."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from venturi.cli.render import console, echo_json, show_age, show_time, table
from venturi.cli.schedules import describe_retention, retention_in_force
from venturi.cli.support import (
    DURATION,
    JOB_ID,
    CliState,
    parse_json_value,
    pass_state,
    require_job,
)
from venturi.models import JobStatus, StatsSnapshot

_TERMINAL = [s.value for s in JobStatus if s.terminal]
# The keys of each fair kind `stats` lists: those with the most due jobs.
FAIR_KEYS_SHOWN = 5
_COUNTS = ("pending", "scheduled", "waiting", "claimed", "completed", "dead", "cancelled")


def _stats_json(snapshot: StatsSnapshot) -> dict[str, Any]:
    fields = (*_COUNTS, "oldest_pending_seconds")
    return {
        "taken_at": snapshot.taken_at.isoformat(),
        "kinds": {k.kind: {f: getattr(k, f) for f in (*fields, "paused")} for k in snapshot.kinds},
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def stats(state: CliState, as_json: bool) -> None:
    """Job counts per kind, and the oldest wait.

    pending: due now; scheduled: due later; claimed: running; oldest pending: how long
    the longest-waiting due job has waited. A paused kind is marked "(paused)". For each
    fair kind, the keys with the most due jobs and their running jobs. Then the
    retention the workers prune by.
    """
    queue = state.queue()
    snapshot = queue.stats()
    retention = retention_in_force(queue)
    fair = queue.fair_keys(limit=FAIR_KEYS_SHOWN)
    if as_json:
        kept = None if retention is None else retention.kept()
        shares = {
            kind: [{"key": share.key, "due": share.due, "running": share.running} for share in top]
            for kind, top in fair.items()
        }
        echo_json({**_stats_json(snapshot), "fair_keys": shares, "retention": kept})
        return
    if not snapshot.kinds:
        click.echo(f"no jobs under prefix {queue.prefix!r}")
        click.echo(describe_retention(retention))
        return
    grid = table("kind", *_COUNTS, "oldest pending", footer=True)
    grid.columns[0].footer = "total"
    for column, field in zip(grid.columns[1:], _COUNTS, strict=False):
        column.justify = "right"
        column.footer = str(snapshot.total(field))
    grid.columns[-1].justify = "right"
    for k in snapshot.kinds:
        counts = [str(getattr(k, field)) for field in _COUNTS]
        name = f"{k.kind} (paused)" if k.paused else k.kind
        grid.add_row(name, *counts, show_age(k.oldest_pending_seconds))
    console().print(grid)
    for kind, top in fair.items():
        turns = table(f"{kind} (fair): key", "due", "running")
        for share in top:
            key = "(no key)" if share.key is None else share.key
            turns.add_row(key, str(share.due), str(share.running))
        console().print(turns)
    click.echo(describe_retention(retention))


@click.command()
@click.argument("job_id", type=JOB_ID, metavar="ID")
@click.argument("name")
@click.argument("payload", required=False, metavar="[JSON]")
@pass_state
def signal(state: CliState, job_id: str, name: str, payload: str | None) -> None:
    """Send signal NAME to job ID (a durable handler's ctx.wait_for(NAME) returns it).

    JSON is the signal's payload, any JSON value (`-` reads it from stdin; default null).
    A job waiting for NAME is made due now; a signal sent before the wait is kept. A
    finished or unknown job is refused and nothing is written.
    """
    value = parse_json_value(payload)
    woke = state.queue().signal(job_id, name, value)
    click.echo(f"signalled {job_id} {name}" + (" (woke it)" if woke else ""))


@click.command()
@click.argument("job_id", type=JOB_ID, metavar="ID")
@pass_state
def cancel(state: CliState, job_id: str) -> None:
    """Cancel a pending, waiting or running job.

    A running handler sees `ctx.stopping` set; whatever it returns later is fenced out.
    Its waiting children are cancelled too (unless they run after a failed parent).
    """
    queue = state.queue()
    if not queue.cancel(job_id):
        record = require_job(queue, job_id, primary=True)
        raise click.ClickException(
            f"job {job_id} is {record.status.value}; only pending, waiting or running jobs can be "
            "cancelled"
        )
    click.echo(f"cancelled {job_id}")


@click.command()
@click.argument("job_id", type=JOB_ID, metavar="[ID]", required=False)
@click.option("--all-dead", is_flag=True, help="Requeue every dead job (of --kind).")
@click.option("--kind", help="With --all-dead: only this kind.")
@click.option(
    "--with-children", is_flag=True, help="With ID: also the descendants its end cancelled."
)
@pass_state
def requeue(
    state: CliState, job_id: str | None, all_dead: bool, kind: str | None, with_children: bool
) -> None:
    """Put finished jobs back in line.

    Either job ID (dead, cancelled or completed), or with --all-dead every dead job (of
    --kind), with a fresh failure count. A job whose dedup key a pending job holds stays.
    --with-children also puts ID's cancelled descendants back to waiting for it.
    """
    if (job_id is None) == (not all_dead):
        raise click.UsageError("give either a job ID or --all-dead")
    if kind is not None and not all_dead:
        raise click.UsageError("--kind goes with --all-dead")
    if with_children and job_id is None:
        raise click.UsageError("--with-children goes with a job ID")
    queue = state.queue()
    if job_id is None:
        count = queue.requeue_dead(kind=kind)
        which = "dead jobs" if kind is None else f"dead {kind} jobs"
        click.echo(f"requeued {count} {which}")
        return
    children = queue.requeue_with_children(job_id) if with_children else 0
    if children is None or (not with_children and not queue.requeue(job_id)):
        record = require_job(queue, job_id, primary=True)
        raise click.ClickException(
            f"job {job_id} is {record.status.value}; only dead, cancelled or completed jobs "
            "can be requeued"
        )
    click.echo(f"requeued {job_id}" + (f" and {children} children" if with_children else ""))


@click.command()
@click.option(
    "--older-than",
    type=DURATION,
    required=True,
    help="Delete jobs that finished longer ago than this (7d, 12h, ...).",
)
@click.option("--kind", help="Only this kind.")
@click.option("--status", type=click.Choice(_TERMINAL), help="Only this terminal status.")
@pass_state
def cleanup(state: CliState, older_than: float, kind: str | None, status: str | None) -> None:
    """Delete finished jobs older than a duration.

    Completed, dead and cancelled jobs (and their journal) that finished longer ago than
    --older-than, in database time.
    """
    queue = state.queue()
    # Database time, like every other cut-off venturi computes, so client clock skew
    # cannot widen the deletion.
    try:
        cutoff = queue.now() - timedelta(seconds=older_than)
    except OverflowError:
        raise click.BadParameter("reaches before year 1", param_hint="'--older-than'") from None
    deleted = queue.cleanup(finished_before=cutoff, kind=kind, status=status)
    click.echo(f"deleted {deleted} jobs that finished before {show_time(cutoff)}")


def admin_commands() -> list[click.Command]:
    """The sub-commands that count, cancel, requeue, clean up and signal jobs."""
    return [stats, cancel, requeue, cleanup, signal]
