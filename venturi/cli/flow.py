"""Sub-commands of flow control: pause and resume kinds, and list each kind's limits."""

from __future__ import annotations

from typing import Any

import click

from venturi.cli.render import console, echo_json, show_time, table
from venturi.cli.support import CliState, pass_state
from venturi.flow.limits import KindState


@click.command()
@click.argument("kinds", nargs=-1, required=True, metavar="KIND...")
@pass_state
def pause(state: CliState, kinds: tuple[str, ...]) -> None:
    """Pause kinds for every worker until resumed.

    Workers stop claiming them at once; running jobs finish, enqueues are still
    accepted, and the pause outlives worker restarts.
    """
    newly = state.queue().pause(*kinds)
    for kind in kinds:
        click.echo(f"paused {kind}" if kind in newly else f"{kind} was already paused")


@click.command()
@click.argument("kinds", nargs=-1, required=True, metavar="KIND...")
@pass_state
def resume(state: CliState, kinds: tuple[str, ...]) -> None:
    """Resume paused kinds; idle workers claim their jobs at once."""
    resumed = state.queue().resume(*kinds)
    for kind in kinds:
        click.echo(f"resumed {kind}" if kind in resumed else f"{kind} was not paused")


def _kind_json(kind: KindState) -> dict[str, Any]:
    limits = kind.limits
    return {
        "paused": kind.paused,
        "paused_at": None if kind.paused_at is None else kind.paused_at.isoformat(),
        "concurrency": limits.concurrency,
        "key_concurrency": limits.key_concurrency,
        "rate": None if limits.rate is None else str(limits.rate),
        "running": kind.running,
        "declared_by": kind.declared_by,
        "declared_at": None if kind.declared_at is None else kind.declared_at.isoformat(),
    }


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def kinds(state: CliState, as_json: bool) -> None:
    """Each kind's flow control: paused, its limits, its running jobs, and whose
    declaration the limits are (the latest declaration of a kind wins)."""
    queue = state.queue()
    found = queue.kinds()
    if as_json:
        echo_json({kind.kind: _kind_json(kind) for kind in found})
        return
    if not found:
        click.echo(f"no kind has declared limits or been paused under prefix {queue.prefix!r}")
        return
    grid = table("kind", "paused", "concurrency", "per key", "rate", "running", "declared by", "at")
    for kind in found:
        limits = kind.limits
        grid.add_row(
            kind.kind,
            "paused" if kind.paused else "",
            _shown(limits.concurrency),
            _shown(limits.key_concurrency),
            _shown(limits.rate),
            str(kind.running),
            _shown(kind.declared_by),
            show_time(kind.declared_at),
        )
    console().print(grid)


def flow_commands() -> list[click.Command]:
    return [pause, resume, kinds]
