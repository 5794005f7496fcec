"""Tasks: `Task` (what ``@app.task`` and ``@shared_task`` make), its options, retries and
calls, and `shared_task`.

A task's job payload is ``{"args": [...], "kwargs": {...}}``, so positional and keyword
arguments reach the function exactly as the caller passed them (as JSON). Canvas steps
add ``feed`` and ``parents``: the parent results to put before the arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, overload

from venturi.context import JobContext
from venturi.errors import ConfigurationError

from .config import check_queue
from .current import all_apps, current_app
from .exceptions import MaxRetriesExceededError, NotSupported, Retry
from .options import aware, call_options, rate_of, seconds
from .results import AsyncResult
from .running import Request, current_request, run_task

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
        self._take_retry_policy(opts)
        self._take_limits(opts)
        self.options = {k: opts.pop(k) for k in list(opts) if k in ACCEPTED_OPTIONS}
        if opts:
            raise TypeError(f"task {self.name}: unknown options {', '.join(sorted(opts))}")
        if self.queue is not None and app is not None:
            check_queue(app.configured(), self.queue, f"task {self.name}")

    def _take_retry_policy(self, opts: dict[str, Any]) -> None:
        """Celery's retry options, taken out of ``opts``, with Celery's defaults."""
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
            seconds(opts.pop("default_retry_delay", DEFAULT_RETRY_DELAY), "default_retry_delay")
            or 0.0
        )
        autoretry = opts.pop("autoretry_for", ())
        self.autoretry_for: tuple[type[BaseException], ...] = tuple(autoretry)
        self.dont_autoretry_for: tuple[type[BaseException], ...] = tuple(
            opts.pop("dont_autoretry_for", ())
        )
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
            seconds(opts.pop("retry_backoff_max", DEFAULT_BACKOFF_MAX), "retry_backoff_max") or 0.0
        )
        self.retry_jitter = bool(opts.pop("retry_jitter", True))

    def _take_limits(self, opts: dict[str, Any]) -> None:
        """The rate, time limits, priority and queue, taken out of ``opts``."""
        self.rate_limit = rate_of(opts.pop("rate_limit", None))
        self.time_limit = seconds(opts.pop("time_limit", None), "time_limit")
        self.soft_time_limit = seconds(opts.pop("soft_time_limit", None), "soft_time_limit")
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
        """The venturi handler of this task's kind (see `running.run_task`)."""
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
            return run_task(
                task,
                ctx,
                list(args),
                dict(kwargs or {}),
                feed=feed,
                parents=parents,
                expires=expires,
            )

        run.__name__ = self.__name__
        return run

    # -- running -------------------------------------------------------------------

    @property
    def request(self) -> Request:
        """The current run's request (``called_directly`` outside a worker run)."""
        current = current_request.get()
        return current if current is not None and current.task == self.name else Request()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now, as a plain function call."""
        if self.bind:
            return self.run(self, *args, **kwargs)
        return self.run(*args, **kwargs)

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
        payload, venturi_options = call_options(
            self.name, args, kwargs, options, self.app.configured()
        )
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
        for app in all_apps():
            app.register(task)
        return task

    if len(args) == 1 and callable(args[0]) and not options:
        return register(args[0])
    if args:
        raise TypeError("shared_task takes only keyword options")
    return register
