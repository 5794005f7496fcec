"""`Celery`: the app object of the compatible API, backed by a `venturi.Queue`.

Configuration is Celery's (``app.conf``, ``config_from_object``, ``Celery(broker=...)``)
plus ``venturi_dsn``, ``venturi_prefix`` and ``venturi_pool_size``; the DSN defaults to
env ``VENTURI_DSN`` (a ``postgresql://`` broker URL also serves), the prefix to env
``VENTURI_PREFIX``, else ``venturi``. An app configured from Django's settings
(``config_from_object("django.conf:settings", namespace="CELERY")``) uses the project's
queue of `venturi.contrib.django`: its enqueues join Django's transaction.

Nothing connects at import: the queue is built (and its tables migrated) on first use.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Final, overload

import psycopg
from ulid import ULID

from venturi.client import DEFAULT_PREFIX, Queue
from venturi.contrib.lazy import LazyQueue, Registry
from venturi.errors import ConfigurationError
from venturi.workflows import Workflow

from . import beat
from .canvas import Signature
from .exceptions import NotSupported
from .results import AsyncResult, GroupResult
from .tasks import Task, aware, shared

logger = logging.getLogger("venturi.celery")

_Result = AsyncResult  # the class, where the method of that name hides it

DEFAULT_QUEUE: Final = "celery"
_POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
# Settings read here; every other key is refused by name (see `check_settings`).
SUPPORTED_SETTINGS: Final = frozenset(
    {
        "venturi_dsn",
        "venturi_prefix",
        "venturi_pool_size",
        "broker_url",
        "result_backend",
        "include",
        "imports",
        "timezone",
        "enable_utc",
        "beat_schedule",
        "task_default_queue",
        "task_serializer",
        "result_serializer",
        "accept_content",
        "result_accept_content",
        "task_default_rate_limit",
        "task_time_limit",
        "task_soft_time_limit",
        "task_default_retry_delay",
        "result_expires",
        "task_routes",
        "task_always_eager",
        "task_annotations",
        "beat_scheduler",
    }
)
# Settings that change nothing on venturi: what it always does, or a broker's tuning.
ACCEPTED_SETTINGS: Final = frozenset(
    {
        "task_acks_late",
        "task_acks_on_failure_or_timeout",
        "task_reject_on_worker_lost",
        "task_ignore_result",
        "task_store_errors_even_if_ignored",
        "task_track_started",
        "result_extended",
        "result_persistent",
        "task_send_sent_event",
        "worker_send_task_events",
        "broker_connection_retry",
        "broker_connection_retry_on_startup",
        "broker_connection_max_retries",
        "broker_connection_timeout",
        "broker_transport_options",
        "broker_pool_limit",
        "broker_heartbeat",
        "worker_hijack_root_logger",
        "worker_redirect_stdouts",
        "worker_redirect_stdouts_level",
        "worker_log_format",
        "worker_task_log_format",
        "task_create_missing_queues",
        "beat_max_loop_interval",
        "task_eager_propagates",
    }
)
# Worker settings that venturi's worker takes on its command line instead.
WORKER_FLAGS: Final = {
    "worker_concurrency": "--concurrency (-c)",
    "worker_prefetch_multiplier": "nothing: a worker claims up to its free slots",
    "worker_max_tasks_per_child": "--max-jobs-per-child",
    "worker_max_memory_per_child": "--max-memory-per-child",
    "worker_pool": "--processes N (each with --concurrency threads)",
}

_apps: list[weakref.ref[Celery]] = []
_current: list[weakref.ref[Celery]] = []
_apps_lock = threading.Lock()


def all_apps() -> list[Celery]:
    """Every live app of this process."""
    with _apps_lock:
        return [app for ref in _apps if (app := ref()) is not None]


def current_app() -> Celery:
    """The app made last (or set as current): shared tasks and ``AsyncResult(id)`` use it."""
    with _apps_lock:
        app = _current[-1]() if _current else None
    if app is None:
        raise ConfigurationError("no Celery app exists: create one with Celery('proj')")
    return app


class Settings(dict[str, Any]):
    """``app.conf``: a dict whose keys are also attributes (``app.conf.timezone = ...``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def check_settings(conf: Mapping[str, Any]) -> None:
    """Refuse every setting that would behave differently here, naming it."""
    for key in conf:
        if key in SUPPORTED_SETTINGS or key in ACCEPTED_SETTINGS:
            continue
        if key in WORKER_FLAGS:
            raise NotSupported(f"the setting {key}", f"venturi worker takes {WORKER_FLAGS[key]}")
        raise NotSupported(
            f"the setting {key}", "see the settings table of the guide 'Coming from Celery'"
        )
    for key in ("task_serializer", "result_serializer"):
        if conf.get(key, "json") != "json":
            raise NotSupported(
                f"the {conf[key]!r} serializer ({key})", "arguments and results are JSON"
            )
    for key in ("accept_content", "result_accept_content"):
        extra = set(conf.get(key) or ()) - {"json", "application/json"}
        if extra:
            raise NotSupported(
                f"accepting {', '.join(sorted(extra))} ({key})", "arguments and results are JSON"
            )
    if conf.get("task_routes"):
        raise NotSupported(
            "custom routers (task_routes)", "run workers for chosen task names with -Q/--kinds"
        )
    if conf.get("task_annotations"):
        raise NotSupported("task_annotations", "give the options in each @app.task")
    if conf.get("task_always_eager"):
        raise NotSupported("task_always_eager", "use venturi.testing.inline(app.venturi_queue())")
    if conf.get("beat_scheduler") not in (None, "celery.beat:PersistentScheduler"):
        raise NotSupported(
            f"beat_scheduler={conf['beat_scheduler']!r}", "schedules live in the queue's tables"
        )
    if conf.get("enable_utc", True) is False and not conf.get("timezone"):
        raise NotSupported("enable_utc=False without a timezone", "set timezone")


class _Signal:
    """``app.on_after_configure.connect``: called with ``sender=app`` before the app's
    schedules are read (where Celery apps call ``add_periodic_task``)."""

    def __init__(self) -> None:
        self.receivers: list[Callable[..., Any]] = []

    def connect(self, receiver: Callable[..., Any] | None = None, **_: Any) -> Any:
        if receiver is None:
            return self.connect
        self.receivers.append(receiver)
        return receiver

    def send(self, sender: Celery) -> None:
        for receiver in self.receivers:
            receiver(sender=sender)


class _Control:
    """``app.control``: ``revoke`` only (venturi's cancel)."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def revoke(self, task_id: str | Sequence[str], terminate: bool = False, **_: Any) -> None:
        ids = [task_id] if isinstance(task_id, str) else list(task_id)
        for one in ids:
            self._app.venturi_queue().cancel(one)

    def __getattr__(self, name: str) -> Any:
        raise NotSupported(
            f"app.control.{name}", "use venturi stats, venturi workers or the dashboard"
        )


class Celery:
    """A Celery-compatible app whose tasks are venturi jobs (see the module docstring).

    `venturi_queue` returns its `venturi.Queue`; ``venturi worker --app proj.celery:app``
    calls it to find the tasks to run.
    """

    def __init__(
        self,
        main: str | None = None,
        broker: str | None = None,
        backend: str | None = None,
        include: Sequence[str] | None = None,
        set_as_current: bool = True,
        **options: Any,
    ) -> None:
        for name in (
            "loader",
            "amqp",
            "events",
            "log",
            "control",
            "fixups",
            "task_cls",
            "config_source",
        ):
            if options.get(name) is not None:
                raise NotSupported(f"Celery({name}=...)", "see the guide 'Coming from Celery'")
        options.pop("autofinalize", None)
        options.pop("strict_typing", None)
        self.main = main
        self.conf = Settings()
        if broker is not None:
            self.conf["broker_url"] = broker
        if backend is not None:
            self.conf["result_backend"] = backend
        if include:
            self.conf["include"] = list(include)
        self.conf.update(options)
        self.tasks: dict[str, Task] = {}
        self.control = _Control(self)
        self.on_after_configure = _Signal()
        self.on_after_finalize = self.on_after_configure
        self._django = False
        self._pending: list[tuple[Any, str | None, bool]] = []
        self._autodiscover: list[Callable[[], Iterable[str]]] = []
        self._registry = Registry()
        self._lazy: LazyQueue | None = None
        self._started = False
        self._lock = threading.RLock()
        self._periodic: dict[str, dict[str, Any]] = {}
        with _apps_lock:
            _apps.append(weakref.ref(self))
            if set_as_current:
                _current.append(weakref.ref(self))
        for task in shared.tasks:
            self.register(task)

    # -- configuration -------------------------------------------------------------

    def config_from_object(
        self, obj: Any, namespace: str | None = None, force: bool = False, silent: bool = False
    ) -> None:
        """Take settings from a module, ``"module"`` / ``"module:attribute"`` text, a class
        or a mapping, read (as Celery reads them) when the app is first used; with
        ``namespace="CELERY"`` only its ``CELERY_*`` names, lower-cased without the prefix.
        Settings given to the app itself win. ``"django.conf:settings"`` also makes the
        app use the Django project's venturi queue (`venturi.contrib.django`)."""
        if self._started:
            raise ConfigurationError("config_from_object after the app's queue was built")
        if isinstance(obj, str) and obj in ("django.conf:settings", "django.conf.settings"):
            self._django = True
        self._pending.append((obj, namespace, silent))

    def _load_pending(self) -> None:
        """Read the sources given to `config_from_object` into ``conf``."""
        with self._lock:
            pending, self._pending = self._pending, []
        for obj, namespace, silent in pending:
            self._read_source(obj, namespace, silent)

    def _read_source(self, obj: Any, namespace: str | None, silent: bool) -> None:
        if isinstance(obj, str):
            module_name, _, attribute = obj.partition(":")
            try:
                source: Any = importlib.import_module(module_name)
            except ImportError:
                if silent:
                    return
                raise
            if attribute:
                source = getattr(source, attribute)
        else:
            source = obj
        items = (
            source.items()
            if isinstance(source, Mapping)
            else ((k, getattr(source, k)) for k in dir(source))
        )
        start = f"{namespace}_" if namespace else ""
        for key, value in list(items):
            if key.startswith("_") or not key.startswith(start) or not key[len(start) :]:
                continue
            name = key[len(start) :]
            if not name.isidentifier() or (not namespace and not name.islower()):
                continue  # a module's constants and the names pytest or Python add
            if isinstance(value, types.ModuleType | type) or callable(value):
                continue  # the settings module's imports, not settings
            self.conf.setdefault(name.lower(), value)

    def config_from_envvar(
        self, variable_name: str, silent: bool = False, force: bool = False
    ) -> None:
        """`config_from_object` of the module named by an environment variable."""
        module = os.environ.get(variable_name)
        if not module:
            if silent:
                return
            raise ConfigurationError(f"environment variable {variable_name} is not set")
        self.config_from_object(module)

    def autodiscover_tasks(
        self,
        packages: Iterable[str] | Callable[[], Iterable[str]] | None = None,
        related_name: str = "tasks",
        force: bool = False,
    ) -> None:
        """Import ``<package>.tasks`` of each package (default: Django's installed apps)
        when the queue is built, as Celery imports them when the worker starts."""

        def names() -> Iterable[str]:
            if packages is None:
                from django.apps import apps

                # venturi's own app holds no Celery tasks (its tasks module is the backend
                # of Django's Tasks framework).
                chosen: Iterable[str] = [
                    config.name
                    for config in apps.get_app_configs()
                    if not config.name.startswith("venturi.")
                ]
            else:
                chosen = packages() if callable(packages) else packages
            return [f"{package}.{related_name}" for package in chosen]

        self._autodiscover.append(names)

    def check_queue(self, name: str, where: str) -> None:
        """Refuse routing to a queue other than the default one."""
        default = self.conf.get("task_default_queue", DEFAULT_QUEUE)
        if name != default:
            raise NotSupported(
                f"routing {where} to queue {name!r}",
                f"every task is in one venturi queue ({default!r}); choose what a worker "
                "runs with -Q/--kinds",
            )

    # -- tasks ---------------------------------------------------------------------

    @overload
    def task(self, func: Callable[..., Any], /) -> Task: ...

    @overload
    def task(self, **options: Any) -> Callable[[Callable[..., Any]], Task]: ...

    def task(self, *args: Any, **options: Any) -> Any:
        """``@app.task`` or ``@app.task(name=..., bind=True, max_retries=..., ...)``."""

        def make(func: Callable[..., Any]) -> Task:
            self._load_pending()
            defaults = {
                "default_retry_delay": self.conf.get("task_default_retry_delay"),
                "rate_limit": self.conf.get("task_default_rate_limit"),
                "time_limit": self.conf.get("task_time_limit"),
                "soft_time_limit": self.conf.get("task_soft_time_limit"),
            }
            given = {k: v for k, v in defaults.items() if v is not None} | options
            task = Task(self, func, given)
            self.register(task)
            return task

        if len(args) == 1 and callable(args[0]) and not options:
            return make(args[0])
        if args:
            raise TypeError("app.task takes only keyword options")
        return make

    def register(self, task: Task) -> None:
        """Add ``task`` to this app (and its queue, once built)."""
        with self._lock:
            if task.name in self.tasks:
                if self.tasks[task.name] is task:
                    return
                raise ConfigurationError(f"task {task.name!r} is already registered")
            self.tasks[task.name] = task
            if self._lazy is not None or self._django:
                self._bind(task)

    def _bind(self, task: Task) -> None:
        options = task.job_options()
        if self._django:
            from venturi.contrib.django import job

            job(task.name, **options)(task.handler())
        else:
            self._registry.job(self, task.name, **options)(task.handler())

    # -- the queue -----------------------------------------------------------------

    def venturi_queue(self) -> Queue:
        """The `venturi.Queue` this app's tasks run on, built on first use: the tasks of
        ``include``/``imports``/`autodiscover_tasks` imported, the settings checked, the
        tables migrated, ``beat_schedule`` registered. The method ``venturi worker --app``
        looks for."""
        with self._lock:
            if not self._started:
                self._start()
        if self._django:
            from venturi.contrib.django import get_queue

            return get_queue()
        assert self._lazy is not None
        return self._lazy.get()

    def _start(self) -> None:
        if self._django:
            import django
            from django.apps import apps

            if not apps.ready:  # a worker process: set Django up, as Celery's fixup does
                django.setup()
        self._load_pending()
        check_settings(self.conf)
        if self._django:
            given = sorted(k for k in self.conf if k.startswith("venturi_"))
            if given:
                raise ConfigurationError(
                    f"{', '.join(given)}: an app configured from Django settings uses the "
                    "project's venturi queue; set VENTURI['PREFIX'] and DATABASES instead"
                )
        self._started = True
        try:
            if not self._django:
                self._lazy = LazyQueue(self._build, self._registry)
            for task in list(self.tasks.values()):
                if not self._django:
                    self._bind(task)
            modules = list(self.conf.get("include") or ()) + list(self.conf.get("imports") or ())
            for names in self._autodiscover:
                modules.extend(names())
            for module in modules:
                try:
                    importlib.import_module(module)
                except ModuleNotFoundError as exc:
                    if exc.name != module:  # a package without tasks module is fine
                        raise
            self.on_after_configure.send(self)
            self._schedule_beat()
            if self._django:
                from venturi.contrib.django import get_queue

                get_queue().migrate()
        except BaseException:
            # Nothing of a refused start is kept: the next use starts again from scratch.
            self._started, self._lazy, self._registry = False, None, Registry()
            raise

    def _build(self) -> Queue:
        dsn = self.conf.get("venturi_dsn")
        broker = self.conf.get("broker_url")
        if dsn is None and isinstance(broker, str) and broker.startswith(_POSTGRES_SCHEMES):
            dsn = broker
        elif broker is not None and dsn is None:
            logger.info(
                "broker_url %s is not PostgreSQL: jobs go to VENTURI_DSN", broker.split(":", 1)[0]
            )
        prefix = (
            self.conf.get("venturi_prefix") or os.environ.get("VENTURI_PREFIX") or DEFAULT_PREFIX
        )
        options: dict[str, Any] = {
            "prefix": prefix,
            "pool_size": self.conf.get("venturi_pool_size"),
        }
        expires = self.conf.get("result_expires")
        if expires is not None:
            seconds = expires.total_seconds() if isinstance(expires, timedelta) else expires
            options["retention"] = {"completed": seconds}
        queue = Queue(dsn, **options)
        queue.migrate()
        return queue

    def _schedule_beat(self) -> None:
        entries = dict(self.conf.get("beat_schedule") or {}) | self._periodic
        zone = self.conf.get("timezone") or "UTC"
        for name, entry in entries.items():
            task_name, options = beat.schedule_options(name, entry, zone)
            if task_name not in self.tasks:
                raise ConfigurationError(f"beat_schedule[{name!r}]: no task named {task_name!r}")
            if self._django:
                from venturi.contrib.django import schedule

                schedule(task_name, **options)
            else:
                self._registry.schedule(task_name, **options)

    def add_periodic_task(
        self,
        schedule: Any,
        sig: Signature,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        """Add a ``beat_schedule`` entry for a signature (call it before the queue is built,
        e.g. in an ``on_after_configure`` receiver)."""
        if options:
            raise NotSupported(
                f"add_periodic_task({', '.join(sorted(options))}=)", "set them on the task"
            )
        if sig.options:
            raise NotSupported("a periodic signature's options", "set them on the task")
        key = name or repr(sig)
        self._periodic[key] = {
            "task": sig.name,
            "schedule": schedule,
            "args": tuple(sig.args) + tuple(args),
            "kwargs": {**sig.kwargs, **(kwargs or {})},
        }

    # -- calling -------------------------------------------------------------------

    def prepare(
        self,
        task: Task,
        args: Sequence[Any] | None,
        kwargs: Mapping[str, Any] | None,
        options: dict[str, Any],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A run's payload and venturi enqueue options from Celery's call options."""
        if isinstance(args, str | bytes) or (args is not None and not isinstance(args, Sequence)):
            raise TypeError(
                f"args of {task.name} must be a list or tuple, got {type(args).__name__}"
            )
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise TypeError(f"kwargs of {task.name} must be a dict, got {type(kwargs).__name__}")
        payload: dict[str, Any] = {"args": list(args or ()), "kwargs": dict(kwargs or {})}
        venturi: dict[str, Any] = {}
        countdown, eta, expires = (
            options.pop("countdown", None),
            options.pop("eta", None),
            options.pop("expires", None),
        )
        if countdown is not None and eta is not None:
            raise ValueError("apply_async takes countdown= or eta=, not both")
        if countdown is not None:
            venturi["delay"] = max(0.0, float(countdown))
        if eta is not None:
            venturi["at"] = aware(eta, "eta")
        if expires is not None:
            moment = (
                (datetime.now(UTC) + timedelta(seconds=float(expires)))
                if isinstance(expires, int | float)
                else aware(expires, "expires")
            )
            payload["expires"] = moment.isoformat()
        priority = options.pop("priority", None)
        if priority is not None:
            venturi["priority"] = priority
        queue = options.pop("queue", None)
        if queue is not None:
            self.check_queue(queue if isinstance(queue, str) else str(queue), f"task {task.name}")
        for name in ("serializer",):
            if options.get(name, "json") != "json":
                raise NotSupported(
                    f"the {options[name]!r} serializer", "arguments and results are JSON"
                )
            options.pop(name, None)
        for name in (
            "link_error",
            "task_id",
            "routing_key",
            "exchange",
            "compression",
            "chord",
            "group_id",
        ):
            if options.get(name) is not None:
                raise NotSupported(
                    f"apply_async({name}=)", "see the guide's table of Celery features"
                )
        for name in (
            "retry",
            "retry_policy",
            "headers",
            "shadow",
            "ignore_result",
            "add_to_parent",
            "time_limit",
            "soft_time_limit",
        ):
            options.pop(name, None)
        if "conn" in options:
            venturi["conn"] = options.pop("conn")
        if options:
            raise TypeError(
                f"apply_async of {task.name}: unknown options {', '.join(sorted(options))}"
            )
        return payload, venturi

    def enqueue(self, kind: str, payload: Mapping[str, Any] | None = None, **options: Any) -> ULID:
        """Enqueue one run of task ``kind`` with venturi's options (on ``conn``'s
        transaction if given; in an app configured from Django settings on Django's)."""
        conn = options.pop("conn", None)
        queue = self.venturi_queue()
        if conn is None and self._django:
            from venturi.contrib.django.queue import enqueue

            return enqueue(kind, payload, **options)
        return queue.enqueue(kind, payload, conn=_psycopg(conn), **options)

    @contextmanager
    def workflow(self, conn: Any = None) -> Iterator[Workflow]:
        """A venturi workflow of this app's queue (on ``conn``; in a Django app on Django's
        connection, so it joins the current ``transaction.atomic()``)."""
        queue = self.venturi_queue()
        if conn is None and self._django:
            from venturi.contrib.django import django_connection

            conn = django_connection()
        with queue.workflow(_psycopg(conn)) as wf:
            yield wf

    def signature(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Signature:
        """A signature of the task called ``name`` (registered on this app)."""
        self.venturi_queue()
        task = self.tasks.get(name)
        if task is None:
            raise NotSupported(
                f"a signature of the unregistered task {name!r}",
                "import its module in this process",
            )
        return task.signature(args, kwargs, **options)

    def send_task(
        self,
        name: str,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncResult:
        """Enqueue the task called ``name`` (registered on this app)."""
        return self.signature(name).apply_async(args, kwargs, **options)

    def AsyncResult(self, task_id: str, **_: Any) -> AsyncResult:  # Celery's name
        return AsyncResult(task_id, self)

    def GroupResult(self, group_id: str, results: Iterable[_Result]) -> GroupResult:
        return GroupResult(group_id, results)

    def close(self) -> None:
        """Close the queue this app built (a Django app's queue is Django's to close); the
        next use builds it again, from the settings and environment of then."""
        with self._lock:
            if self._django:  # its tasks and schedules stay in the project's registry
                return
            lazy, self._lazy, self._started = self._lazy, None, False
            self._registry = Registry()
        if lazy is not None:
            lazy.close()

    def __repr__(self) -> str:
        return f"<Celery {self.main or '__main__'} on venturi>"


def _psycopg(conn: Any) -> psycopg.Connection[Any] | None:
    if conn is None or isinstance(conn, psycopg.Connection):
        return conn
    from venturi.contrib.sqlalchemy import psycopg_connection

    return psycopg_connection(conn)
