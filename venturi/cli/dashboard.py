"""Sub-commands for watching a queue: `venturi dashboard` serves the web dashboard and
`venturi workers` prints the worker registry."""

from __future__ import annotations

import os
import socketserver
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import click

from venturi.cli.render import console, echo_json, show_age, show_time, table
from venturi.cli.support import CliState, pass_state
from venturi.observations import WorkerInfo

PASSWORD_ENV: Final = "VENTURI_DASHBOARD_PASSWORD"


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """Serves each request in a thread, so a slow page never holds up the next one."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        click.echo(f"{self.address_string()} {format % args}", err=True)


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; the default answers this machine only.",
)
@click.option("--read-only", is_flag=True, help="Show every page, refuse every action.")
@pass_state
def dashboard(state: CliState, port: int, bind: str, read_only: bool) -> None:
    """Serve the web dashboard (needs venturi[dashboard]).

    With env VENTURI_DASHBOARD_PASSWORD set, every request must carry that password as
    HTTP Basic credentials (any user name); use TLS in front of it beyond localhost.
    """
    try:
        from venturi.dashboard import Dashboard
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs Jinja2: pip install 'venturi[dashboard]' ({exc})"
        ) from None
    password = os.environ.get(PASSWORD_ENV) or None
    if bind not in ("127.0.0.1", "localhost", "::1") and password is None:
        click.echo(f"warning: serving on {bind} without a password (set {PASSWORD_ENV})", err=True)
    app = Dashboard(state.queue(), read_only=read_only, password=password)
    with make_server(bind, port, app, _ThreadingServer, _QuietHandler) as server:
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
