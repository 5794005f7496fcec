"""Sub-commands of flow control: pause and resume kinds, list each kind's limits, and
set the weights of a fair kind's keys."""

from __future__ import annotations

from typing import Any

import click

from venturi.cli.render import console, echo_json, show_time, table
from venturi.cli.support import CliState, pass_state
from venturi.errors import ConfigurationError, UnknownKind
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
        "fair": limits.fair,
        "running": kind.running,
        "declared_by": kind.declared_by,
        "declared_at": None if kind.declared_at is None else kind.declared_at.isoformat(),
    }


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--weights", "show_weights", is_flag=True, help="List the fair kinds' weights.")
@pass_state
def kinds(state: CliState, as_json: bool, show_weights: bool) -> None:
    """Each kind's flow control: paused, its limits, whether it is fair, its running
    jobs, and whose declaration the limits are (the latest declaration of a kind wins).

    With --weights: the weight of each key of a fair kind that has one (other keys
    weigh 1).
    """
    queue = state.queue()
    if show_weights:
        _show_weights(queue.weights(), as_json)
        return
    found = queue.kinds()
    if as_json:
        echo_json({kind.kind: _kind_json(kind) for kind in found})
        return
    if not found:
        click.echo(f"no kind has declared limits or been paused under prefix {queue.prefix!r}")
        return
    grid = table(
        "kind", "paused", "concurrency", "per key", "rate", "fair", "running", "declared by", "at"
    )
    for kind in found:
        limits = kind.limits
        grid.add_row(
            kind.kind,
            "paused" if kind.paused else "",
            _shown(limits.concurrency),
            _shown(limits.key_concurrency),
            _shown(limits.rate),
            "fair" if limits.fair else "",
            str(kind.running),
            _shown(kind.declared_by),
            show_time(kind.declared_at),
        )
    console().print(grid)


def _show_weights(weights: dict[str, dict[str, float]], as_json: bool) -> None:
    if as_json:
        echo_json(weights)
        return
    if not weights:
        click.echo("no key of a fair kind has a weight (every key weighs 1)")
        return
    grid = table("kind", "key", "weight")
    for kind, keys in weights.items():
        for key, weight in keys.items():
            grid.add_row(kind, key, f"{weight:g}")
    console().print(grid)


def _weight(text: str) -> tuple[str, float | None]:
    key, sep, value = text.rpartition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} must read KEY=WEIGHT (or KEY=default)")
    if value == "default":
        return key, None
    try:
        return key, float(value)
    except ValueError:
        raise click.BadParameter(f"the weight of {key!r} must be a number, got {value!r}") from None


@click.command("set-weights")
@click.argument("kind")
@click.argument("weights", nargs=-1, required=True, metavar="KEY=WEIGHT...")
@pass_state
def set_weights(state: CliState, kind: str, weights: tuple[str, ...]) -> None:
    """Set the weights of keys of a fair kind: over a busy period, keys with due jobs
    are claimed in proportion to their weights. KEY=default sets a key back to 1.
    Every worker follows them at once; nothing is written if one is bad."""
    parsed = dict(_weight(text) for text in weights)
    try:
        state.queue().set_weights(kind, parsed)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc)) from None
    except UnknownKind as exc:
        raise click.ClickException(str(exc)) from None
    for key, weight in parsed.items():
        click.echo(f"{kind} {key}: {'1 (default)' if weight is None else f'{weight:g}'}")


def flow_commands() -> list[click.Command]:
    return [pause, resume, kinds, set_weights]
