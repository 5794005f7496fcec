"""The `venturi` command: a click group that Flask and Django mount with their own queue."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from venturi import __version__
from venturi.cli.admin import admin_commands
from venturi.cli.dashboard import dashboard_commands
from venturi.cli.demo_command import demo_command
from venturi.cli.flow import flow_commands
from venturi.cli.jobs import job_commands
from venturi.cli.ops import operation_commands
from venturi.cli.schedules import schedule_commands
from venturi.cli.support import CliState, QueueFactory, VenturiGroup, warn_if_password_shown
from venturi.client import DEFAULT_PREFIX

HELP = """Operate a venturi job queue: migrate, run workers, enqueue and inspect jobs.

The queue is the table prefix --prefix in the database --dsn (libpq keywords or a
postgresql:// URI; libpq's PG* variables and defaults fill in the rest). Durations are
written 30s, 5m, 2h, 7d (or 1h30m). Exit status: 0 ok, 1 error, 2 bad usage.
"""

EMBEDDED_HELP = """Operate this application's venturi job queue: migrate, run workers,
enqueue and inspect jobs. Durations are written 30s, 5m, 2h, 7d (or 1h30m).
"""


class _Group(VenturiGroup):
    """The group; ``bench`` is loaded when it is asked for, so the benchmark stays out
    of every other command (and of the library)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), "bench"})

    def get_command(self, ctx: click.Context, cmd_name: str) -> Any:
        if cmd_name == "bench":
            from venturi.bench.command import bench_command

            return bench_command
        return super().get_command(ctx, cmd_name)


def _connection_options() -> list[click.Parameter]:
    return [
        click.Option(
            ["--dsn"],
            envvar="VENTURI_DSN",
            metavar="DSN",
            help="Database to use [env VENTURI_DSN; default: libpq defaults].",
        ),
        click.Option(
            ["--listen-dsn"],
            envvar="VENTURI_LISTEN_DSN",
            metavar="DSN",
            help="Where workers LISTEN, when --dsn leads to a transaction-pooling proxy "
            "such as PgBouncer: the server itself [env VENTURI_LISTEN_DSN; default: --dsn].",
        ),
        click.Option(
            ["--read-dsn"],
            envvar="VENTURI_READ_DSN",
            metavar="DSN",
            help="Where job, history, stats, kinds and schedules read: a replica or a "
            "read-only role [env VENTURI_READ_DSN; default: --dsn].",
        ),
        click.Option(
            ["--prefix"],
            envvar="VENTURI_PREFIX",
            default=DEFAULT_PREFIX,
            show_default=True,
            metavar="PREFIX",
            help="Table-name prefix of the queue [env VENTURI_PREFIX].",
        ),
    ]


def build_cli(queue_factory: QueueFactory | None = None) -> click.Group:
    """The `venturi` command group.

    With ``queue_factory`` (a function returning the application's `Queue`, its jobs
    registered), every sub-command acts on that queue and ``--dsn``, ``--listen-dsn``,
    ``--read-dsn``, ``--prefix`` and ``worker --app`` do not exist. Without it,
    ``--dsn``/``--prefix`` (env ``VENTURI_DSN``/``VENTURI_PREFIX``) name the queue,
    ``--listen-dsn`` (env ``VENTURI_LISTEN_DSN``) where its LISTEN goes, ``--read-dsn``
    (env ``VENTURI_READ_DSN``) where its reads go, and ``worker --app module:queue``
    imports the queue whose jobs the worker runs.
    """
    embedded = queue_factory is not None

    @click.pass_context
    def root(
        ctx: click.Context,
        dsn: str | None = None,
        listen_dsn: str | None = None,
        read_dsn: str | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        for name, option in (
            ("dsn", "--dsn"),
            ("listen_dsn", "--listen-dsn"),
            ("read_dsn", "--read-dsn"),
        ):
            warn_if_password_shown(ctx, name, option)
        from_environment = ctx.get_parameter_source("dsn") is ParameterSource.ENVIRONMENT
        state = CliState(
            queue_factory,
            dsn,
            prefix,
            listen_dsn=listen_dsn,
            read_dsn=read_dsn,
            dsn_from_environment=from_environment,
        )
        ctx.obj = state
        ctx.call_on_close(state.close)

    group = _Group(
        "venturi",
        callback=root,
        params=[] if embedded else _connection_options(),
        help=EMBEDDED_HELP if embedded else HELP,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    click.version_option(__version__, "--version", prog_name="venturi")(group)
    for command in [
        *operation_commands(embedded),
        *job_commands(),
        *admin_commands(),
        *flow_commands(),
        *schedule_commands(),
        *dashboard_commands(),
        demo_command(),
    ]:
        group.add_command(command)
    return group


def main() -> None:
    """Entry point of the `venturi` console script."""
    build_cli()(prog_name="venturi")
