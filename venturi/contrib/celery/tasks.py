"""Tasks: `Task` (what ``@app.task`` and ``@shared_task`` make), its ``request``, retries,
and the handler that runs a task's arguments from a venturi payload.

A task's job payload is ``{"args": [...], "kwargs": {...}}``, so positional and keyword
arguments reach the function exactly as the caller passed them (as JSON). Canvas steps
add ``feed`` and ``parents``: the parent results to put before the arguments.
"""

from __future__ import annotations

import contextvars
import json
import random
import traceback
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, overload

import attrs
from ulid import ULID

from venturi.context import JobContext
from venturi.errors import ConfigurationError
from venturi.limits import Rate
from venturi.outcomes import Fail, Pause
from venturi.outcomes import Retry as VenturiRetry

from .exceptions import MaxRetriesExceededError, NotSupported, Retry, TaskRevokedError
from .results import AsyncResult, error_line

if TYPE_CHECKING:
    from .app import Celery
    from .canvas import Signature

# Celery's defaults for a task's retry policy.
DEFAULT_MAX_RETRIES: Final = 3
DEFAULT_RETRY_DELAY: Final = 180.0
DEFAULT_BACKOFF_MAX: Final = 600.0
# A task with max_retries=None may retry this often before venturi ends it: a bound, so
# that a job that kills its worker each time cannot run for ever.
UNBOUNDED_ATTEMPTS: Final = 10_000

# Task options that change nothing on venturi (each is what venturi always does, or
# concerns a broker it does not have).
ACCEPTED_OPTIONS: Final = frozenset(
    {
        "acks_late",
        "acks_on_failure_or_timeout",
        "reject_on_worker_lost",
        "ignore_result",
        "store_errors_even_if_ignored",
        "track_started",
        "typing",
        "trail",
        "throws",
        "shared",
        "lazy",
        "send_events",
        "resultrepr_maxsize",
    }
)


@attrs.frozen
class Request:
    """What ``self.request`` tells a bound task about its run."""

    id: str | None = None
    retries: int = 0
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    task: str | None = None
    hostname: str | None = None
    called_directly: bool = True
    is_eager: bool = False
    delivery_info: Mapping[str, Any] = attrs.field(factory=dict)
    eta: str | None = None
    expires: str | None = None


_request: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "venturi_celery_request", default=None
)


def _seconds(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigurationError(f"{field} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def rate_of(value: Any, field: str = "rate_limit") -> str | None:
    """Celery's ``rate_limit`` ("10/s", "10/m", "10/h" or a number per second) as
    venturi's cluster-wide ``rate``."""
    if value is None:
        return None
    text = f"{value}/s" if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(text, str) and text.strip().isdigit():
        text = f"{text.strip()}/s"
    try:
        return str(Rate.parse(text))
    except ConfigurationError as exc:
        raise ConfigurationError(f"{field}: {exc}") from None


def aware(moment: datetime, field: str) -> datetime:
    """``moment`` as an aware datetime: a naive one is UTC, as Celery reads it."""
    if not isinstance(moment, datetime):
        raise TypeError(f"{field} must be a datetime, got {type(moment).__name__}")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class Task:
    """A task: call it to run it here, ``delay``/``apply_async`` to run it on a worker.

    Made by ``@app.task`` and ``@shared_task``; its job kind is its ``name``.
    """

    def __init__(
        self, app: Celery | None, func: Callable[..., Any], options: Mapping[str, Any]
    ) -> None:
        opts = dict(options)
        self._app = app
        self.run = func
        self.bind = bool(opts.pop("bind", False))
        self.__name__ = getattr(func, "__name__", "task")
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self.__module__ = getattr(func, "__module__", __name__)
        self.name: str = opts.pop("name", None) or self._default_name(app)
        base = opts.pop("base", None)
        if base is not None and base is not Task:
            raise NotSupported(
                f"base={getattr(base, '__name__', base)!r} (a custom Task class)",
                "write the shared behaviour into the task functions",
            )
        serializer = opts.pop("serializer", "json")
        if serializer != "json":
            raise NotSupported(
                f"the {serializer!r} serializer (task {self.name})",
                "arguments and results are JSON",
            )
        self.max_retries: int | None = opts.pop("max_retries", DEFAULT_MAX_RETRIES)
        if self.max_retries is not None and (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise ConfigurationError(
                f"max_retries must be an int >= 0 or None, got {self.max_retries!r}"
            )
        self.default_retry_delay = (
            _seconds(opts.pop("default_retry_delay", DEFAULT_RETRY_DELAY), "default_retry_delay")
            or 0.0
        )
        autoretry = opts.pop("autoretry_for", ())
        self.autoretry_for: tuple[type[BaseException], ...] = tuple(autoretry)
        self.retry_kwargs: dict[str, Any] = dict(opts.pop("retry_kwargs", {}) or {})
        unknown_retry = set(self.retry_kwargs) - {"max_retries", "countdown"}
        if unknown_retry:
            raise ConfigurationError(
                f"retry_kwargs of {self.name}: only max_retries and countdown, "
                f"got {sorted(unknown_retry)}"
            )
        backoff = opts.pop("retry_backoff", False)
        self.retry_backoff = float(backoff) if backoff is not True else 1.0
        if backoff is False:
            self.retry_backoff = 0.0
        self.retry_backoff_max = (
            _seconds(opts.pop("retry_backoff_max", DEFAULT_BACKOFF_MAX), "retry_backoff_max") or 0.0
        )
        self.retry_jitter = bool(opts.pop("retry_jitter", True))
        self.rate_limit = rate_of(opts.pop("rate_limit", None))
        self.time_limit = _seconds(opts.pop("time_limit", None), "time_limit")
        self.soft_time_limit = _seconds(opts.pop("soft_time_limit", None), "soft_time_limit")
        self.priority: int | None = opts.pop("priority", None)
        self.queue: str | None = opts.pop("queue", None)
        for name in (
            "expires",
            "countdown",
            "eta",
            "link",
            "link_error",
            "routing_key",
            "exchange",
        ):
            if name in opts:
                raise NotSupported(f"the task option {name}=", "pass it to apply_async")
        self.options = {k: opts.pop(k) for k in list(opts) if k in ACCEPTED_OPTIONS}
        if opts:
            raise TypeError(f"task {self.name}: unknown options {', '.join(sorted(opts))}")
        if self.queue is not None and app is not None:
            app.check_queue(self.queue, f"task {self.name}")

    def _default_name(self, app: Celery | None) -> str:
        module = self.__module__
        if module == "__main__" and app is not None and app.main:
            module = app.main
        return f"{module}.{self.__name__}"

    # -- binding -------------------------------------------------------------------

    @property
    def app(self) -> Celery:
        """The app this task belongs to: its own, or for a shared task the current app."""
        if self._app is not None:
            return self._app
        from .app import current_app

        return current_app()

    def job_options(self) -> dict[str, Any]:
        """The options venturi registers the task's kind with."""
        options: dict[str, Any] = {
            "context": True,
            "max_attempts": UNBOUNDED_ATTEMPTS
            if self.max_retries is None
            else self.max_retries + 1,
        }
        if self.rate_limit is not None:
            options["rate"] = self.rate_limit
        limits = [t for t in (self.time_limit, self.soft_time_limit) if t]
        if limits:
            options["timeout"] = min(limits)
        if self.priority is not None:
            options["priority"] = self.priority
        return options

    def handler(self) -> Callable[..., Any]:
        """The venturi handler of this task's kind (see `run_from_payload`)."""
        task = self

        def run(
            ctx: JobContext,
            *,
            args: Sequence[Any] = (),
            kwargs: Mapping[str, Any] | None = None,
            feed: str | None = None,
            parents: Sequence[str] = (),
            expires: str | None = None,
            scheduled_at: str | None = None,
        ) -> Any:
            return task.run_from_payload(
                ctx, list(args), dict(kwargs or {}), feed=feed, parents=parents, expires=expires
            )

        run.__name__ = self.__name__
        return run

    # -- running -------------------------------------------------------------------

    @property
    def request(self) -> Request:
        """The current run's request (``called_directly`` outside a worker run)."""
        current = _request.get()
        return current if current is not None and current.task == self.name else Request()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now, as a plain function call."""
        if self.bind:
            return self.run(self, *args, **kwargs)
        return self.run(*args, **kwargs)

    def run_from_payload(
        self,
        ctx: JobContext,
        args: list[Any],
        kwargs: dict[str, Any],
        *,
        feed: str | None,
        parents: Sequence[str],
        expires: str | None,
    ) -> Any:
        """One worker run: the parents' results first (a canvas step), then the
        function; its outcome mapped onto venturi's (see the module docstring)."""
        if expires is not None and datetime.now(UTC) >= datetime.fromisoformat(expires):
            raise Fail(error_line(TaskRevokedError(f"task expired at {expires}")))
        if feed == "one":
            args.insert(0, ctx.parents.get(ULID.from_str(parents[0])))
        elif feed == "list":
            args.insert(0, [ctx.parents.get(ULID.from_str(p)) for p in parents])
        request = Request(
            id=str(ctx.job.id),
            retries=ctx.failures,
            args=tuple(args),
            kwargs=kwargs,
            task=self.name,
            hostname=ctx.job.claimed_by,
            called_directly=False,
            expires=expires,
        )
        token = _request.set(request)
        try:
            return _json_result(self(*args, **kwargs))
        except Retry as exc:
            raise VenturiRetry(after=exc.when, note=str(exc)) from exc
        except (VenturiRetry, Pause, Fail):
            raise
        except Exception as exc:
            if self.autoretry_for and isinstance(exc, self.autoretry_for):
                try:
                    self.retry(
                        exc=exc,
                        countdown=self._autoretry_countdown(request.retries),
                        max_retries=self.retry_kwargs.get("max_retries"),
                    )
                except Retry as retry:
                    raise VenturiRetry(after=retry.when, note=_failure_note(exc)) from exc
                except Exception as final:
                    raise Fail(_failure_note(final)) from final
            raise Fail(_failure_note(exc)) from exc
        finally:
            _request.reset(token)

    def _autoretry_countdown(self, retries: int) -> float:
        if not self.retry_backoff:
            countdown = self.retry_kwargs.get("countdown")
            return self.default_retry_delay if countdown is None else float(countdown)
        countdown = min(self.retry_backoff_max, self.retry_backoff * 2.0**retries)
        return random.uniform(0, countdown) if self.retry_jitter else countdown

    def retry(  # noqa: PLR0917  # Celery's signature, positional parameters included
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: datetime | None = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Retry:
        """End this run and run the task again after ``countdown`` seconds (or at ``eta``,
        else ``default_retry_delay``). Past ``max_retries`` retries it raises ``exc`` (or
        `MaxRetriesExceededError`) instead, and the task fails. Use as ``raise
        self.retry(...)``; with ``throw=False`` the `Retry` is returned."""
        if args is not None or kwargs is not None:
            raise NotSupported("self.retry(args=, kwargs=)", "a retry runs with the same arguments")
        if options:
            raise NotSupported(
                f"self.retry({', '.join(sorted(options))}=)", "give countdown= or eta="
            )
        request = self.request
        if request.called_directly:
            if exc is not None:
                raise exc
            raise RuntimeError(f"self.retry() of {self.name} outside a worker run")
        budget = UNBOUNDED_ATTEMPTS - 1 if self.max_retries is None else self.max_retries
        limit = self.max_retries if max_retries is None else max_retries
        if limit is not None and limit > budget:
            raise NotSupported(
                f"self.retry(max_retries={limit}) above the task's max_retries={budget}",
                "raise the task's own max_retries",
            )
        if limit is not None and request.retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(
                f"can't retry {self.name}[{request.id}] args:{request.args} "
                f"kwargs:{dict(request.kwargs)}"
            )
        if eta is not None:
            when = max(0.0, (aware(eta, "eta") - datetime.now(UTC)).total_seconds())
        elif countdown is not None:
            when = float(countdown)
        else:
            when = self.default_retry_delay
        error = Retry(f"Retry in {when:g}s" + (f": {exc!r}" if exc is not None else ""), exc, when)
        if throw:
            raise error
        return error

    # -- calling -------------------------------------------------------------------

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult:
        """Run the task on a worker with these arguments; see `apply_async`."""
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Enqueue a run: ``countdown`` (seconds) or ``eta`` (a datetime; naive is UTC),
        ``expires`` (seconds or a datetime: a run that starts later fails with
        `TaskRevokedError`), ``priority`` (higher runs first), ``queue`` (the default
        queue only), ``link`` (a signature run with the result, as a chain), and
        ``conn`` (venturi: a psycopg connection or SQLAlchemy session whose transaction
        the enqueue joins). In an app configured from Django settings the enqueue joins
        Django's current ``transaction.atomic()`` block."""
        link = options.pop("link", None)
        if link is not None:
            from .canvas import chain, signature_of

            links = link if isinstance(link, list | tuple) else [link]
            return chain(
                self.signature(args, kwargs, **options), *map(signature_of, links)
            ).apply_async()
        conn = options.pop("conn", None)
        payload, venturi_options = self.app.prepare(self, args, kwargs, options)
        job_id = self.app.enqueue(self.name, payload, conn=conn, **venturi_options)
        return AsyncResult(job_id, self.app)

    def signature(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Signature:
        """A signature of this task with these arguments (``immutable=True``: the result
        of a previous canvas step is not passed to it)."""
        from .canvas import Signature

        immutable = bool(options.pop("immutable", False))
        return Signature(self, tuple(args or ()), dict(kwargs or {}), options, immutable)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """``signature(args, kwargs)``."""
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: a previous step's result is not passed to it."""
        return self.signature(args, kwargs, immutable=True)

    def AsyncResult(self, task_id: str) -> AsyncResult:  # Celery's name
        return AsyncResult(task_id, self.app)

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        raise NotSupported(
            "Task.apply() (eager runs)", "call the task, or use venturi.testing.inline"
        )

    def map(self, *args: Any, **kwargs: Any) -> Any:
        raise NotSupported("Task.map()", "use group(task.s(x) for x in items)")

    def starmap(self, *args: Any, **kwargs: Any) -> Any:
        raise NotSupported("Task.starmap()", "use group(task.s(*x) for x in items)")

    def chunks(self, *args: Any, **kwargs: Any) -> Any:
        raise NotSupported("Task.chunks()", "use group() over slices of the items")

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"


def _json_result(value: Any) -> Any:
    """``value`` if JSON can hold it; else the run fails (venturi would drop the value
    with a note, where Celery's JSON result backend refuses it)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the task's return value is not JSON-serialisable: {exc}") from None
    return value


def _failure_note(exc: BaseException) -> str:
    return error_line(exc) + "\n" + "".join(traceback.format_exception(exc))


class _SharedTasks:
    """The tasks made by `shared_task`: every app registers them (present and future)."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def add(self, task: Task) -> None:
        self.tasks.append(task)


shared = _SharedTasks()


@overload
def shared_task(func: Callable[..., Any], /) -> Task: ...


@overload
def shared_task(**options: Any) -> Callable[[Callable[..., Any]], Task]: ...


def shared_task(*args: Any, **options: Any) -> Any:
    """``@shared_task`` or ``@shared_task(**options)``: a task of every app, called
    through the current app (the one made last, as in Celery)."""

    def register(func: Callable[..., Any]) -> Task:
        task = Task(None, func, options)
        shared.add(task)
        from .app import all_apps

        for app in all_apps():
            app.register(task)
        return task

    if len(args) == 1 and callable(args[0]) and not options:
        return register(args[0])
    if args:
        raise TypeError("shared_task takes only keyword options")
    return register
