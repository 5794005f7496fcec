"""Sub-commands that set up and run a queue: migrate, sql, worker, healthcheck."""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Final

import attrs
import click
import psycopg

from venturi import __version__, upkeep
from venturi.cli.support import DURATION, CliState, pass_state
from venturi.cli.worker import worker_command
from venturi.client import Queue
from venturi.errors import ListenerPolling, VenturiError, first_line
from venturi.prefix import Prefix
from venturi.store import migrations


@click.command()
@pass_state
def migrate(state: CliState) -> None:
    """Create or upgrade the queue's tables.

    Safe to run repeatedly and concurrently (an advisory lock per prefix serialises it).
    """
    queue = state.queue()
    applied = queue.migrate()
    if applied:
        click.echo(f"prefix {queue.prefix!r}: applied {', '.join(applied)}")
    else:
        click.echo(f"prefix {queue.prefix!r} is up to date")


@click.command("sql")
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=0,
    help="Only migrations after this schema version (to upgrade a prefix).",
)
@pass_state
def sql_command(state: CliState, after: int) -> None:
    """Print the schema SQL for the prefix.

    For teams that apply DDL themselves: one transaction that takes the same lock and
    records the same history as `venturi migrate`.
    """
    made_by = f"venturi {__version__}"
    if state.embedded_in_app:  # the application's store knows its prefix and lock timeout
        script = state.queue().schema_script(after, made_by=made_by)
    else:  # no database needed: the script only depends on the prefix
        script = migrations.schema_script(Prefix(state.prefix), after, made_by=made_by)
    click.echo(script, nl=False)


Check = Callable[[], str]


def _check_reachable(queue: Queue) -> str:
    started = time.monotonic()
    version = queue.ping()
    return f"PostgreSQL {version} answered in {(time.monotonic() - started) * 1000:.0f} ms"


def _check_primary(queue: Queue) -> str:
    server = queue.server()
    if not server.writable:
        raise VenturiError(
            f"{server.describe()}: nothing can be claimed, settled or enqueued there; "
            "list every host of the cluster in the DSN with target_session_attrs=read-write"
        )
    return server.describe()


def _check_schema(queue: Queue) -> str:
    queue.check_schema()
    return f"prefix {queue.prefix!r} is at schema version {migrations.latest_version()}"


class Polling(Exception):
    """A check found workers would poll instead of waking by NOTIFY: a warning."""


_POLLING_HINT = (
    "workers poll every --poll-interval instead of waking at once; set --listen-dsn "
    "(VENTURI_LISTEN_DSN) to the server itself"
)


def _check_notify(queue: Queue, timeout: float) -> str:
    try:
        seconds = queue.probe_listener(timeout)
    except ListenerPolling as exc:
        raise Polling(f"{exc}; {_POLLING_HINT}") from None
    return f"LISTEN/NOTIFY round trip in {seconds * 1000:.0f} ms"


class HeldBack(Exception):
    """A check found VACUUM held back (a warning, unless ``--strict``): one cause a line."""


def _check_vacuum(queue: Queue, held_after: float, dead_rows: int) -> str:
    health = queue.vacuum_health()
    warnings = health.warnings(held_after, dead_rows)
    if warnings:
        raise HeldBack("\n".join(warnings))
    table = "no jobs table statistics yet"
    if health.dead is not None:
        table = f"{health.dead:,} dead / {health.live or 0:,} live row versions in the jobs table"
    oldest = health.oldest
    holder = "nothing holds the xmin horizon" if oldest is None else f"oldest: {oldest.cause()}"
    return f"{table}; {holder}"


@attrs.frozen
class MetricsUrl:
    """A worker's metrics endpoint: the URL fetched, the one printed (no credentials)
    and the Basic credentials its userinfo held."""

    fetched: str
    shown: str
    authorization: str | None

    @classmethod
    def parse(cls, text: str) -> MetricsUrl:
        """An http(s) URL; ValueError for anything else (file://, ftp://, no host)."""
        try:
            parts = urllib.parse.urlsplit(text)
            port = parts.port  # refuses a port that is not a number
        except ValueError:
            raise ValueError(f"{_without_userinfo(text)!r} is not a URL") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            shown = _without_userinfo(text)
            raise ValueError(f"{shown!r} is not an http:// or https:// URL with a host")
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc = host if port is None else f"{host}:{port}"
        fetched = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        authorization = None
        if parts.username is not None or parts.password is not None:
            pair = f"{urllib.parse.unquote(parts.username or '')}:"
            pair += urllib.parse.unquote(parts.password or "")
            authorization = "Basic " + base64.b64encode(pair.encode()).decode()
        return cls(fetched, fetched, authorization)


def _without_userinfo(text: str) -> str:
    """``text`` with anything between ``//`` and ``@`` hidden, parseable or not."""
    return re.sub(r"//[^/?#]*@", "//***@", text)


def _metrics_urls(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[MetricsUrl]:
    try:
        return [MetricsUrl.parse(value) for value in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another http(s) URL (urllib would go to ftp://)."""

    def redirect_request(  # noqa: PLR0917 (urllib's signature)
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise urllib.error.HTTPError(
                _without_userinfo(newurl),
                code,
                "redirect to a URL that is not http(s)",
                headers,
                fp,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


# Only the handlers an http(s) fetch needs: no file://, ftp:// or data: handler.
_OPENER: Final = urllib.request.OpenerDirector()
for _handler in (
    urllib.request.ProxyHandler(),
    urllib.request.HTTPHandler(),
    urllib.request.HTTPSHandler(),
    urllib.request.HTTPDefaultErrorHandler(),
    _HttpOnlyRedirects(),
    urllib.request.HTTPErrorProcessor(),
):
    _OPENER.add_handler(_handler)


def _check_worker(url: MetricsUrl, timeout: float) -> str:
    """A worker's metrics endpoint answers and says it has not stopped itself."""
    request = urllib.request.Request(url.fetched)
    if url.authorization is not None:
        request.add_unredirected_header("Authorization", url.authorization)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            text = response.read().decode("utf-8", errors="replace")
    except (OSError, ValueError) as exc:
        raise VenturiError(f"no answer from {url.shown}: {first_line(exc)}") from None
    failed, server = None, None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "venturi_worker_failed":
            failed = float(value) != 0
        elif name.startswith("venturi_database_read_write{"):
            server = _server_sample(name, value)
    if failed is None:
        raise VenturiError(
            f"{url.shown} has no venturi_worker_failed metric (a worker's --metrics-port?)"
        )
    if failed:
        raise VenturiError(
            f"{url.shown}: the worker stopped itself (a fatal database error or a "
            "thread that kept failing; see its log)"
        )
    if server is None:
        return f"{url.shown}: running"
    where, writable = server
    if not writable:
        raise VenturiError(f"{url.shown}: running, but its connections are on {where}")
    return f"{url.shown}: running, on {where}"


_LABEL: Final = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _server_sample(name: str, value: str) -> tuple[str, bool]:
    """(``host:port (read-write|read-only)``, writable) from a venturi_database_read_write
    sample."""
    labels = dict(_LABEL.findall(name))
    writable = float(value) == 1
    role = "read-write" if writable else "read-only"
    return f"{labels.get('host', '?')}:{labels.get('port', '?')} ({role})", writable


@click.command()
@click.option("--timeout", type=DURATION, default="5s", show_default=True, help="Per check.")
@click.option(
    "--worker-metrics",
    "worker_urls",
    metavar="URL",
    multiple=True,
    callback=_metrics_urls,
    help="Also check a worker's metrics endpoint (e.g. http://127.0.0.1:9100/metrics of "
    "'venturi worker --metrics-port 9100'; http or https, user:password@ for Basic "
    "auth, never printed): FAIL if it does not answer or the worker stopped itself. "
    "Repeatable.",
)
@click.option(
    "--horizon-after",
    "held_after",
    type=DURATION,
    default="5m",
    show_default=True,
    help="WARN when a session or prepared transaction has held back the xmin horizon "
    "this long (an inactive replication slot holding it always warns).",
)
@click.option(
    "--dead-rows",
    type=click.IntRange(min=0),
    default=upkeep.DEAD_ROWS,
    show_default=True,
    help="WARN when this many dead row versions (and a fifth of the live rows) wait for "
    "a vacuum in the jobs table.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="A held-back horizon or piled-up dead rows FAIL (exit 1) instead of a WARN.",
)
@pass_state
@click.pass_context
def healthcheck(  # noqa: PLR0917 (one parameter per option)
    ctx: click.Context,
    state: CliState,
    timeout: float,
    worker_urls: list[MetricsUrl],
    held_after: float,
    dead_rows: int,
    strict: bool,
) -> None:
    """Check database, schema and NOTIFY (and workers, and vacuum); exit 0 or 1.

    The database answers on a server that takes writes (the primary: it names the host
    and port), the prefix's schema is current, and a NOTIFY comes back on a LISTEN
    connection. For container health probes. When no NOTIFY comes back (a
    transaction-pooling proxy) workers poll: a WARN line, still exit 0. With
    --worker-metrics, each worker's endpoint must answer and report it has not stopped
    itself, and that its connections are on a server that takes writes (it names which).

    Then whether VACUUM can clean the jobs table: a WARN line names each session, slot
    or prepared transaction that held back the xmin horizon past --horizon-after, and
    dead row versions piling up past --dead-rows, each with its fix. Still exit 0: the
    cause lies outside the queue, and restarting workers would not remove it; --strict
    makes it a FAIL (exit 1) for a check that should page.
    """
    try:
        queue = state.queue()
    except (click.ClickException, VenturiError) as exc:
        click.echo(f"FAIL database reachable: {exc}")
        ctx.exit(1)
    checks: list[tuple[str, Check]] = [
        ("database reachable", lambda: _check_reachable(queue)),
        ("read-write server", lambda: _check_primary(queue)),
        ("schema current", lambda: _check_schema(queue)),
        ("listen/notify", lambda: _check_notify(queue, timeout)),
        ("vacuum", lambda: _check_vacuum(queue, held_after, dead_rows)),
    ]
    checks += [
        ("worker", lambda url=url: _check_worker(url, timeout))  # type: ignore[misc]
        for url in worker_urls
    ]
    for label, check in checks:
        try:
            detail = check()
        except Polling as exc:
            click.echo(f"WARN {label}: polling: {exc}")
            continue
        except HeldBack as exc:
            for line in str(exc).splitlines():
                click.echo(f"{'FAIL' if strict else 'WARN'} {label}: {line}")
            if strict:
                ctx.exit(1)
            continue
        except (VenturiError, psycopg.Error) as exc:
            click.echo(f"FAIL {label}: {first_line(exc)}")
            ctx.exit(1)
        click.echo(f"ok   {label}: {detail}")


def operation_commands(embedded: bool) -> list[click.Command]:
    """The sub-commands that set up and run the queue."""
    return [migrate, sql_command, worker_command(embedded), healthcheck]
