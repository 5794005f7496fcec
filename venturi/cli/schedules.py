"""Sub-commands for schedules: list them, trigger one run; and the retention in force."""

from __future__ import annotations

from typing import Any

import click

from venturi.cli.render import console, echo_json, show_time, table
from venturi.cli.support import CliState, pass_state
from venturi.client import Queue
from venturi.schedules.retention import RETENTION_SCHEDULE, STATUSES, Retention
from venturi.schedules.schedule import ScheduleInfo


def retention_in_force(queue: Queue) -> Retention | None:
    """The retention the workers prune by (recorded in their built-in schedule's row), or
    None when no running code prunes."""
    for row in queue.schedule_rows():
        if row.name == RETENTION_SCHEDULE and row.active:
            return Retention.of({status: row.payload.get(status) for status in STATUSES})
    return None


def describe_retention(retention: Retention | None) -> str:
    if retention is None:
        return (
            "retention: none in force (no worker prunes; finished jobs stay until "
            "`venturi cleanup`)"
        )
    return f"retention (finished jobs kept): {retention.describe()}"


def _row_json(row: ScheduleInfo) -> dict[str, Any]:
    times = ("last_slot", "next_slot", "fired_at")
    return {
        "name": row.name,
        "kind": row.kind,
        "expression": row.expression,
        "zone": row.zone,
        "payload": row.payload,
        "catch_up": row.catch_up,
        "max_catch_up": row.max_catch_up,
        "active": row.active,
        **{t: None if getattr(row, t) is None else getattr(row, t).isoformat() for t in times},
    }


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
@click.pass_context
def schedules(ctx: click.Context, state: CliState, as_json: bool) -> None:
    """List the schedules: name, kind, expression and zone, last and next slot, active.

    Workers write a schedule's row when they start with it in their code; a schedule no
    longer in the code of the last worker started is inactive and fires no more.
    """
    if ctx.invoked_subcommand is not None:
        return
    rows = state.queue().schedule_rows()
    if as_json:
        echo_json([_row_json(row) for row in rows])
        return
    if not rows:
        click.echo(f"no schedules under prefix {state.queue().prefix!r}")
        return
    grid = table("name", "kind", "expression", "zone", "last slot", "next slot", "active")
    for row in rows:
        grid.add_row(
            row.name,
            row.kind,
            row.expression,
            row.zone,
            show_time(row.last_slot),
            show_time(row.next_slot) if row.active else "",
            "yes" if row.active else "no",
        )
    console().print(grid)


@schedules.command()
@click.argument("name")
@pass_state
def trigger(state: CliState, name: str) -> None:
    """Enqueue one run of schedule NAME now, outside its slots (they stay as they are)."""
    job_id = state.queue().trigger(name)
    click.echo(str(job_id))


def schedule_commands() -> list[click.Command]:
    return [schedules]
