"""Sub-commands for watching a queue: `venturi dashboard` serves the web dashboard and
`venturi workers` prints the worker registry."""

from __future__ import annotations

import os
from typing import Any, Final

import click

from venturi.cli.render import console, echo_json, show_age, show_time, table
from venturi.cli.support import CliState, pass_state
from venturi.observations import WorkerInfo

PASSWORD_ENV: Final = "VENTURI_DASHBOARD_PASSWORD"


LOOPBACK: Final = ("127.0.0.1", "localhost", "::1", "[::1]")


def _is_loopback(bind: str) -> bool:
    return bind in LOOPBACK or bind.startswith("127.")


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; the default answers this machine only. Any other needs "
    "a password (VENTURI_DASHBOARD_PASSWORD) or --insecure-no-auth.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name browsers may reach the dashboard by (any port; .example.com "
    "takes its subdomains), besides localhost, 127.0.0.1, [::1] and --bind. "
    "Repeatable. Requests for any other name answer 400.",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve a non-loopback --bind without a password: anyone who reaches it reads "
    "every job and acts on them.",
)
@click.option(
    "--trust-forwarded-proto",
    is_flag=True,
    help="Behind a TLS proxy: take X-Forwarded-Proto: https as HTTPS (Secure cookies).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    help="Connections served at once (default 64); more are answered 503.",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client has to send its request before it is dropped (default 10).",
)
@click.option("--read-only", is_flag=True, help="Show every page, refuse every action.")
@pass_state
def dashboard(
    state: CliState,
    /,
    *,
    port: int,
    bind: str,
    allowed_hosts: tuple[str, ...],
    insecure_no_auth: bool,
    trust_forwarded_proto: bool,
    max_connections: int | None,
    read_timeout: float | None,
    read_only: bool,
) -> None:
    """Serve the web dashboard (needs venturi[dashboard]).

    With env VENTURI_DASHBOARD_PASSWORD set, every request must carry that password as
    HTTP Basic credentials (any user name; wrong guesses are slowed); use TLS in front
    of it beyond localhost.
    """
    try:
        from venturi.dashboard import Dashboard
        from venturi.dashboard.server import DashboardServer
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs Jinja2: pip install 'venturi[dashboard]' ({exc})"
        ) from None
    password = os.environ.get(PASSWORD_ENV) or None
    if not _is_loopback(bind) and password is None:
        if not insecure_no_auth:
            raise click.ClickException(
                f"--bind {bind} answers other machines, and no password is set: set "
                f"{PASSWORD_ENV}, or pass --insecure-no-auth to serve it to anyone who "
                "reaches it"
            )
        click.echo(f"warning: serving on {bind} without a password (--insecure-no-auth)", err=True)
    app = Dashboard(
        state.queue(),
        read_only=read_only,
        password=password,
        allowed_hosts=(bind, *allowed_hosts),
        trust_forwarded_proto=trust_forwarded_proto,
        allow_anonymous=True,  # refused above beyond loopback unless asked for
    )
    # The server's own defaults (`venturi.dashboard.server`) for the options not given.
    limits: dict[str, Any] = {"max_connections": max_connections, "read_timeout": read_timeout}
    server = DashboardServer(
        app,
        bind,
        port,
        log=lambda line: click.echo(line, err=True),
        **{name: value for name, value in limits.items() if value is not None},
    )
    with server:
        mode = " (read-only)" if read_only else ""
        click.echo(f"venturi dashboard{mode} on http://{bind}:{server.server_port}/", err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped", err=True)


def _worker_json(worker: WorkerInfo) -> dict[str, Any]:
    return {
        "name": worker.name,
        "host": worker.host,
        "pid": worker.pid,
        "kinds": list(worker.kinds),
        "concurrency": worker.concurrency,
        "running": worker.running,
        "started_at": worker.started_at.isoformat(),
        "last_seen": worker.last_seen.isoformat(),
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def workers(state: CliState, as_json: bool) -> None:
    """The running workers: name, host, pid, kinds, concurrency, running jobs, when each
    started and was last seen (each heartbeat refreshes its row; a killed worker's row
    is left out once three beats are missed)."""
    queue = state.queue()
    found = queue.workers()
    if as_json:
        echo_json([_worker_json(w) for w in found])
        return
    if not found:
        click.echo(f"no worker is running under prefix {queue.prefix!r}")
        return
    grid = table("name", "host", "pid", "kinds", "concurrency", "running", "started", "seen")
    for w in found:
        grid.add_row(
            w.name,
            w.host,
            str(w.pid),
            ", ".join(w.kinds),
            str(w.concurrency),
            str(w.running),
            show_time(w.started_at),
            f"{show_age(w.seen_seconds_ago)} ago",
        )
    console().print(grid)


def dashboard_commands() -> list[click.Command]:
    return [dashboard, workers]
