"""What every `venturi` sub-command shares: the queue it works on, parameter types,
error mapping (one line, no traceback) and the `--app` import."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, Final

import attrs
import click
import psycopg
from click.core import ParameterSource

from venturi.client import DEFAULT_PREFIX, Queue
from venturi.durations import text_seconds
from venturi.errors import ConfigurationError, InvalidJob, VenturiError, first_line
from venturi.models import JobRecord, to_uuid
from venturi.store.dsn import Dsn, scrub

QueueFactory = Callable[[], Queue]

# Seconds per unit; a duration is one or more number+unit parts such as `90s` or `1h30m`.
_CLI_POOL_SIZE: Final = 2


def parse_duration(text: str) -> float:
    """Seconds in ``30s``, ``5m``, ``2h``, ``7d``, ``1h30m`` or a bare number of seconds."""
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds >= 0 and seconds != float("inf"):
            return seconds
        raise ValueError(f"{text!r} is not a duration: it must be finite and not negative")
    from_text = text_seconds(value)
    if from_text is None:
        raise ValueError(f"{text!r} is not a duration; write e.g. 30s, 5m, 2h, 7d or 1h30m")
    return from_text


class DurationType(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2
    """A click parameter holding a duration in seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION: Final = DurationType()


class JobIdType(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2
    """A job id: a ULID (as printed by venturi) or the UUID it is stored as."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            to_uuid(str(value))
        except InvalidJob as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


JOB_ID = JobIdType()


def require_job(queue: Queue, job_id: str, *, primary: bool = False) -> JobRecord:
    """The job, or a one-line error naming the prefix; read where the queue reads (its
    ``read_dsn``), or on its own database with ``primary`` (after a refused write)."""
    record = queue.get(job_id, primary=primary)
    if record is None:
        raise click.ClickException(f"no job {job_id} under prefix {queue.prefix!r}")
    return record


def parse_target(text: str, option: str = "--dsn") -> Dsn:
    """The DSN of ``option`` parsed, or a one-line error saying how to write one."""
    try:
        return Dsn.parse(text, option.lstrip("-").replace("-", "_"))
    except ConfigurationError:
        label = "the DSN" if option == "--dsn" else option
        raise click.ClickException(
            f"{label} is not a valid connection string: write key=value pairs "
            "(host=... dbname=...) or a postgresql:// URI"
        ) from None


def check_reachable(target: Dsn, option: str = "--dsn") -> None:
    """Connect once, so an unreachable or refused DSN fails now with libpq's own reason
    instead of a pool's retries (and their log lines) and a timeout later. ``option``
    names the DSN in the message."""
    try:
        with psycopg.connect(target.text, **target.connect_kwargs()):
            return
    except psycopg.Error as exc:
        reason = target.scrub(first_line(exc))
        where = "" if option == "--dsn" else f"through {option} "
        raise click.ClickException(
            f"cannot connect to PostgreSQL {where}({target.redacted}): {reason}"
        ) from None


# The environment variable that keeps each DSN option off the command line.
DSN_ENVIRONMENT: Final = {
    "--dsn": "VENTURI_DSN",
    "--listen-dsn": "VENTURI_LISTEN_DSN",
    "--read-dsn": "VENTURI_READ_DSN",
}


def warn_if_password_shown(ctx: click.Context, name: str, option: str) -> None:
    """One line on stderr when the DSN parameter ``name`` came from the command line
    with a password in it: every local user can read a process's arguments (`ps`)."""
    value = ctx.params.get(name)
    if not value or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
        return
    try:
        password = Dsn.parse(str(value)).params.get("password")
    except ConfigurationError:
        return  # refused with its own message when the DSN is used
    if password:
        variable = DSN_ENVIRONMENT.get(option, "VENTURI_DSN")
        click.echo(
            f"warning: the password in {option} is visible to other users (ps); set "
            f"{variable} instead, or keep the password in a passfile (~/.pgpass) or a "
            "service file (service=NAME)",
            err=True,
        )


@attrs.define
class CliState:
    """The queue the sub-commands act on, made on first use and closed at exit if ours."""

    factory: QueueFactory | None
    dsn: str | None = None
    prefix: str = DEFAULT_PREFIX
    listen_dsn: str | None = None
    read_dsn: str | None = None
    # True when ``dsn`` came from the environment (VENTURI_DSN), not the command line.
    dsn_from_environment: bool = False
    _queue: Queue | None = None

    @property
    def embedded_in_app(self) -> bool:
        """True when a framework (Flask, Django) supplies the queue."""
        return self.factory is not None

    def target(self) -> Dsn:
        """``--dsn`` (or VENTURI_DSN, which the option reads) parsed; libpq's defaults
        when neither is given."""
        return parse_target(self.dsn or "")

    def queue(self) -> Queue:
        """The application's queue, or one built from ``--dsn``/``--prefix``."""
        if self._queue is None:
            if self.factory is not None:
                self._queue = self.factory()
            else:
                # Each DSN is parsed once, here, and the queue takes the parsed values.
                target = self.target()
                check_reachable(target)
                extras: dict[str, Dsn | None] = {}
                # The queue opens a pool on each; one that cannot connect would log
                # every retry before its timeout, so each is tried once here first.
                for name, text, option in (
                    ("listen_dsn", self.listen_dsn, "--listen-dsn"),
                    ("read_dsn", self.read_dsn, "--read-dsn"),
                ):
                    extra = parse_target(text, option) if text else None
                    if extra is not None:
                        check_reachable(extra, option)
                    extras[name] = extra
                self._queue = Queue(
                    target,
                    prefix=self.prefix,
                    pool_size=_CLI_POOL_SIZE,
                    listen_dsn=extras["listen_dsn"],
                    read_dsn=extras["read_dsn"],
                )
        return self._queue

    def close(self) -> None:
        """Close the queue if this built it (an application's queue stays open)."""
        if self._queue is not None and not self.embedded_in_app:
            self._queue.close()
        self._queue = None


pass_state = click.make_pass_decorator(CliState)


class UsageProblem(click.ClickException):
    """Bad usage reported as one line, with click's usage exit status."""

    exit_code = 2


class VenturiGroup(click.Group):
    """A group whose sub-commands report venturi and database errors as one line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            # One line instead of click's usage block; still exit status 2.
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            raise UsageProblem(f"{exc.format_message()} (see {where} --help)") from None
        except VenturiError as exc:
            raise click.ClickException(_scrubbed(ctx, first_line(exc))) from None
        except psycopg.Error as exc:
            hint = ""
            if isinstance(exc, psycopg.errors.UndefinedTable):
                hint = " (has `venturi migrate` run for this prefix?)"
            text = _scrubbed(ctx, first_line(exc))
            raise click.ClickException(f"database error: {text}{hint}") from None
        except OSError as exc:
            # The machine refused something: a port in use, a full disk under the
            # output (click handles a closed pipe itself).
            _settle_stdout()
            raise click.ClickException(_scrubbed(ctx, first_line(exc))) from None


def _settle_stdout() -> None:
    """Point stdout at the null device if it can no longer be written, so the flush
    at interpreter exit does not report the same failure again."""
    try:
        sys.stdout.flush()
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _scrubbed(ctx: click.Context, text: str) -> str:
    state = ctx.find_object(CliState)
    return text if state is None else scrub(text, state.dsn or "")


def import_queue(spec: str) -> Queue:
    """The `Queue` named by ``module:attribute`` (attribute defaults to ``queue``); the
    attribute may also be a function of no arguments that returns one, or an object whose
    ``venturi_queue()`` method returns one (a `venturi.contrib.celery.Celery` app)."""
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "queue"
    if not module_name:
        raise click.BadParameter(f"{spec!r} is not module:attribute", param_hint="'--app'")
    # Console scripts do not put the working directory on sys.path; `python -m` does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # a module may call sys.exit() at import
        raise click.ClickException(
            f"cannot import {module_name!r} for --app: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    target = getattr(module, attribute, None)
    if target is None:
        raise click.ClickException(f"module {module_name!r} has no attribute {attribute!r}")
    provider = getattr(target, "venturi_queue", None)
    if not isinstance(target, Queue) and callable(provider):
        # An app that provides its Queue (venturi.contrib.celery.Celery).
        target, attribute = provider, f"{attribute}.venturi_queue"
    if callable(target) and not isinstance(target, Queue):
        try:
            target = target()
        except VenturiError:
            raise  # reported as one line by the group, like any venturi error
        except (Exception, SystemExit) as exc:
            raise click.ClickException(
                f"--app {spec}: calling {attribute}() to get the queue raised "
                f"{type(exc).__name__}: {first_line(exc)}"
            ) from None
    if not isinstance(target, Queue):
        raise click.ClickException(
            f"--app {spec} is a {type(target).__name__}, not a venturi.Queue (nor a "
            "function of no arguments returning one)"
        )
    return target


def parse_json_value(text: str | None) -> Any:
    """A command's JSON argument as a value (``-`` reads stdin; None: null)."""
    if text is None:
        return None
    source = sys.stdin.read() if text == "-" else text
    try:
        return json.loads(source)
    except RecursionError:
        raise click.BadParameter("nests too deeply", param_hint="'JSON'") from None
    except ValueError as exc:
        raise click.BadParameter(
            f"not valid JSON: {first_line(exc)}", param_hint="'JSON'"
        ) from None
