"""`Celery`: the app object of the compatible API, backed by a `venturi.Queue`.

Configuration is Celery's (``app.conf``, ``config_from_object``, ``Celery(broker=...)``)
plus venturi's own ``venturi_*`` settings (`config.CelerySettings`); the DSN defaults to
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, overload

from ulid import ULID

from venturi.client import Queue
from venturi.contrib.lazy import LazyQueue, Registry
from venturi.errors import ConfigurationError
from venturi.workflows import Workflow

from . import beat
from .canvas import Signature
from .config import Settings, check_settings, queue_options, settings_from
from .control import Control, Signal
from .current import all_apps, make_current, remember
from .exceptions import NotSupported
from .options import psycopg_of
from .results import AsyncResult, GroupResult
from .tasks import Task, shared

logger = logging.getLogger("venturi.celery")

_Result = AsyncResult  # the class, where the method of that name hides it


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
        self.control = Control(self)
        self.on_after_configure = Signal()
        self.on_after_finalize = self.on_after_configure
        self._django = False
        self._pending: list[tuple[Any, str | None, bool]] = []
        self._autodiscover: list[Callable[[], Iterable[str]]] = []
        self._registry = Registry()
        self._lazy: LazyQueue | None = None
        self._started = False
        self._lock = threading.RLock()
        self._periodic: dict[str, dict[str, Any]] = {}
        remember(self, as_current=set_as_current)
        for task in shared.tasks:
            self.register(task)

    @property
    def uses_django(self) -> bool:
        """True once configured from ``"django.conf:settings"``: its tasks run on the
        Django project's venturi queue."""
        return self._django

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
            for key, value in settings_from(obj, namespace, silent).items():
                self.conf.setdefault(key, value)

    def configured(self) -> Settings:
        """``conf`` with the sources given to `config_from_object` read into it."""
        self._load_pending()
        return self.conf

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
        queue = Queue(**queue_options(self.conf))
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

    def enqueue(self, kind: str, payload: Mapping[str, Any] | None = None, **options: Any) -> ULID:
        """Enqueue one run of task ``kind`` with venturi's options (on ``conn``'s
        transaction if given; in an app configured from Django settings on Django's)."""
        conn = options.pop("conn", None)
        queue = self.venturi_queue()
        if conn is None and self._django:
            from venturi.contrib.django.queue import enqueue

            return enqueue(kind, payload, **options)
        return queue.enqueue(kind, payload, conn=psycopg_of(conn), **options)

    @contextmanager
    def workflow(self, conn: Any = None) -> Iterator[Workflow]:
        """A venturi workflow of this app's queue (on ``conn``; in a Django app on Django's
        connection, so it joins the current ``transaction.atomic()``)."""
        queue = self.venturi_queue()
        if conn is None and self._django:
            from venturi.contrib.django import django_connection

            conn = django_connection()
        with queue.workflow(psycopg_of(conn)) as wf:
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

    def set_current(self) -> None:
        """Make this the current app: the one shared tasks and ``AsyncResult(id)`` use."""
        make_current(self)

    def __repr__(self) -> str:
        return f"<Celery {self.main or '__main__'} on venturi>"


def start_django_apps() -> None:
    """Build every app of this process configured from Django's settings, so that its
    tasks (``include``, `Celery.autodiscover_tasks`, ``beat_schedule``) are registered on
    the project's queue: what ``manage.py venturi worker`` runs before it starts."""
    for app in all_apps():
        if app.uses_django:
            app.venturi_queue()
