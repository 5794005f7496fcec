"""Flask integration: the `Venturi` extension.

```python
venturi = Venturi()                  # in extensions.py

@venturi.job("emails.send")          # in any module the app imports
def send(to: str) -> None: ...

def create_app() -> Flask:
    app = Flask(__name__)
    app.config["VENTURI_DSN"] = "postgresql://..."
    venturi.init_app(app)            # `flask venturi worker|migrate|stats|...`
    return app
```

Every job runs inside ``app.app_context()`` (an ``async def`` job's coroutine too). The
queue is built on first use in each process, so an app created before gunicorn forks is
safe. Configuration (``app.config``):
``VENTURI_DSN``, ``VENTURI_LISTEN_DSN`` (where workers LISTEN when ``VENTURI_DSN`` leads
to a transaction-pooling proxy), ``VENTURI_READ_DSN`` (where the queue's reads go: a
replica or a read-only role), ``VENTURI_PREFIX``, ``VENTURI_POOL_SIZE``, ``VENTURI_STRICT``,
``VENTURI_MAX_PAYLOAD_BYTES`` and, for the opt-in in-process worker, ``VENTURI_WORKER``
(True to start one per process on its first request), ``VENTURI_WORKER_CONCURRENCY``,
``VENTURI_WORKER_KINDS``, ``VENTURI_WORKER_POLL_INTERVAL`` and
``VENTURI_WORKER_STOP_TIMEOUT``.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, ParamSpec, TypeVar, Unpack

import attrs
import psycopg
from flask import Flask, current_app, has_app_context
from ulid import ULID

from venturi.client import DEFAULT_WAIT_SECONDS, Queue
from venturi.contrib.settings import (
    QueueSettings,
    flag,
    optional_names,
    optional_str,
    positive_duration,
    positive_int,
    to_names,
    to_positive_seconds,
)
from venturi.coroutines import finish
from venturi.durations import Duration
from venturi.models import NewJob
from venturi.registry import JobFunction, JobOptions
from venturi.schedules.schedule import split_options
from venturi.worker.runtime import Worker

from .lazy import Handler, LazyQueue, Registry

P = ParamSpec("P")
R = TypeVar("R")

EXTENSION_KEY = "venturi"


@attrs.frozen
class FlaskSettings(QueueSettings):
    """The ``VENTURI_*`` keys of an app's config, checked: the shared queue keys, the
    DSN, and the in-process worker's."""

    config_prefix: ClassVar[str] = "VENTURI_"

    dsn: str | None = attrs.field(default=None, validator=optional_str)
    worker: bool = attrs.field(default=False, validator=flag)
    worker_concurrency: int = attrs.field(default=4, validator=positive_int)
    worker_kinds: tuple[str, ...] | None = attrs.field(
        default=None, converter=to_names, validator=optional_names
    )
    worker_poll_interval: float = attrs.field(
        default=5.0, converter=to_positive_seconds, validator=positive_duration
    )
    worker_stop_timeout: float = attrs.field(
        default=30.0, converter=to_positive_seconds, validator=positive_duration
    )

    def worker_defaults(self) -> dict[str, Any]:
        """The worker settings as defaults of ``flask venturi worker``'s options."""
        defaults: dict[str, Any] = {
            "concurrency": self.worker_concurrency,
            "poll_interval": self.worker_poll_interval,
            "stop_timeout": self.worker_stop_timeout,
        }
        if self.worker_kinds is not None:
            defaults["kinds"] = ",".join(self.worker_kinds)
        return defaults

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FlaskSettings:
        """Read ``VENTURI_*`` keys; an unknown one raises `SettingsError` (a typo)."""
        ours = {k: v for k, v in config.items() if k.startswith(cls.config_prefix)}
        return cls.from_keys(ours, "config keys")


class _AppState:
    """One app's queue and in-process worker."""

    def __init__(self, app: Flask, settings: FlaskSettings, registry: Registry) -> None:
        self.settings = settings
        self.lazy = LazyQueue(functools.partial(_build_queue, settings), registry, _in_context(app))
        self.worker: Worker | None = None
        self.worker_pid = 0
        self.lock = threading.Lock()
        self.exit_hook = False

    def start_worker(self) -> Worker:
        with self.lock:
            running = self.running_worker()
            if running is not None:
                return running
            s = self.settings
            worker = self.lazy.get().worker(
                kinds=s.worker_kinds,
                concurrency=s.worker_concurrency,
                poll_interval=s.worker_poll_interval,
            )
            worker.start()
            self.worker, self.worker_pid = worker, os.getpid()
            if not self.exit_hook:
                # Handler threads are daemons: without this, exit would abandon running
                # jobs to their lease instead of releasing them at once. Once is enough:
                # a forked child inherits the hook, and it stops only its own worker.
                atexit.register(self.stop_worker)
                self.exit_hook = True
            return worker

    def stop_worker(self, timeout: float | None = None) -> None:
        with self.lock:
            worker, mine = self.worker, self.worker_pid == os.getpid()
            self.worker = None
        if worker is not None and mine:
            worker.stop(self.settings.worker_stop_timeout if timeout is None else timeout)

    def running_worker(self) -> Worker | None:
        worker = self.worker
        return worker if worker is not None and self.worker_pid == os.getpid() else None


def _build_queue(settings: FlaskSettings) -> Queue:
    queue = Queue(settings.dsn, **settings.queue_options())
    if settings.testing is not None:  # VENTURI_TESTING: tables made on first use
        from venturi.testing import set_mode

        queue.migrate()
        set_mode(queue, settings.testing)
    return queue


def _in_context(app: Flask) -> Callable[[Handler], Handler]:
    # A weak reference: the app's state is a value of a WeakKeyDictionary keyed by the
    # app, so a strong one here would keep every app (and its pool) alive for good.
    app_ref = weakref.ref(app)

    def wrap(func: Handler) -> Handler:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            app = app_ref()
            if app is None:
                raise RuntimeError("the Flask app of this queue no longer exists")
            with app.app_context():
                # An async handler's coroutine runs here, inside the app context.
                return finish(func(*args, **kwargs))

        return run

    return wrap


class Venturi:
    """The Flask extension: jobs registered on it run inside the app's context.

    ``Venturi(app)`` or ``Venturi()`` plus `init_app` for app factories; one extension
    may serve several apps (each gets its own queue from its own config). Outside an app
    context, `queue` resolves to the app given to the constructor or, failing that, the
    only app initialised.
    """

    def __init__(self, app: Flask | None = None) -> None:
        self.registry = Registry()
        self._states: weakref.WeakKeyDictionary[Flask, _AppState] = weakref.WeakKeyDictionary()
        self._default_app: weakref.ref[Flask] | None = None
        if app is not None:
            self._default_app = weakref.ref(app)
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read the app's ``VENTURI_*`` config, add ``flask venturi`` and the worker hook.

        Opens no connection: the queue is built on first use. Raises
        `venturi.contrib.settings.SettingsError` (a `ConfigurationError`) for bad config.
        """
        settings = FlaskSettings.from_config(app.config)
        state = _AppState(app, settings, self.registry)
        self._states[app] = state
        app.extensions[EXTENSION_KEY] = self
        from venturi.cli.main import build_cli

        group = build_cli(state.lazy.get)
        # `flask venturi worker` starts from the same worker settings as the in-process one.
        group.context_settings["default_map"] = {"worker": settings.worker_defaults()}
        app.cli.add_command(group, "venturi")
        if settings.worker:
            app.before_request(functools.partial(self._ensure_worker, state))

    @staticmethod
    def _ensure_worker(state: _AppState) -> None:
        if state.running_worker() is None:
            state.start_worker()

    def _state(self, app: Flask | None) -> _AppState:
        if app is None:
            if has_app_context():
                app = current_app._get_current_object()  # type: ignore[attr-defined]
            elif self._default_app is not None:
                app = self._default_app()
            elif len(self._states) == 1:
                app = next(iter(self._states.keys()))
        if app is None:
            raise RuntimeError(
                "no Flask app to use: call this inside an app context, pass app=, or "
                "create the extension as Venturi(app)"
            )
        try:
            return self._states[app]
        except KeyError:
            raise RuntimeError(f"venturi.init_app was never called for app {app.name!r}") from None

    # -- the queue --------------------------------------------------------------------

    def queue_for(self, app: Flask | None = None) -> Queue:
        """The app's queue (the current app's by default), built on first use here."""
        return self._state(app).lazy.get()

    @property
    def queue(self) -> Queue:
        """The current app's queue; see `queue_for`."""
        return self.queue_for()

    def job(
        self,
        kind: str,
        **options: Unpack[JobOptions],
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register a job like `Queue.job`, for every app; it runs in the app's context.

        May be used before `init_app` (module-level decorators in an app factory setup).
        """
        return self.registry.job(self, kind, **options)

    def periodic(self, kind: str, **options: Any) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register a handler and its schedule like `Queue.periodic`, for every app."""
        schedule, job_options = split_options(options)
        return self.registry.periodic(self, kind, schedule, **job_options)

    def schedule(self, kind: str, **options: Any) -> None:
        """Add a schedule for a registered kind like `Queue.schedule`, for every app."""
        self.registry.schedule(kind, **options)

    def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        conn: psycopg.Connection[Any] | None = None,
        **options: Any,
    ) -> ULID:
        """`Queue.enqueue` on the current app's queue.

        Pass ``conn`` (a psycopg 3 connection; for SQLAlchemy see
        `venturi.contrib.sqlalchemy.psycopg_connection`) to join its transaction.
        """
        return self.queue.enqueue(kind, payload, conn=conn, **options)

    def enqueue_many(
        self, jobs: list[NewJob], conn: psycopg.Connection[Any] | None = None
    ) -> list[ULID]:
        """`Queue.enqueue_many` on the current app's queue."""
        return self.queue.enqueue_many(jobs, conn=conn)

    def result(self, job_id: ULID, timeout: Duration = DEFAULT_WAIT_SECONDS) -> Any:
        """`Queue.result` on the current app's queue."""
        return self.queue.result(job_id, timeout)

    # -- the in-process worker ----------------------------------------------------------

    def start_worker(self, app: Flask | None = None) -> Worker:
        """Start this process's in-process worker for the app, once; returns it.

        Safe to call from every request, thread and forked child: each process gets one
        worker, stopped at interpreter exit. ``VENTURI_WORKER = True`` calls this on the
        first request of each process.
        """
        return self._state(app).start_worker()

    def stop_worker(self, app: Flask | None = None, timeout: float | None = None) -> None:
        """Stop this process's in-process worker gracefully (idempotent)."""
        self._state(app).stop_worker(timeout)

    def worker(self, app: Flask | None = None) -> Worker | None:
        """This process's running in-process worker for the app, if any."""
        return self._state(app).running_worker()

    def close(self, app: Flask | None = None) -> None:
        """Stop the app's in-process worker and close its queue's pool."""
        state = self._state(app)
        state.stop_worker()
        state.lazy.close()


def mount_dashboard(
    app: Flask,
    extension: Venturi,
    *,
    authorize: Callable[[], bool],
    url_prefix: str = "/venturi",
    read_only: bool = False,
    allowed_hosts: Iterable[str] = (),
) -> None:
    """Serve the dashboard (`venturi.dashboard`) of the app's queue under ``url_prefix``.

    ``authorize`` runs in each request's context (``flask_login.current_user`` and the
    session are there); False answers 403. The app's ``secret_key``, when set, signs the
    dashboard's CSRF tokens, so every process of the app accepts them. Host names: the
    app's ``TRUSTED_HOSTS`` when set (Flask answers any other with 400), else the local
    names plus ``allowed_hosts``. Its cookies are Secure over HTTPS, and always under
    ``SESSION_COOKIE_SECURE``. Needs ``venturi[dashboard]``.
    """
    from flask import Response, request

    from venturi.dashboard import Dashboard
    from venturi.dashboard.http import call_mounted

    dashboards: dict[str, Dashboard] = {}
    named = tuple(allowed_hosts)

    def build() -> Dashboard:
        # Flask 3.1 refuses a host outside TRUSTED_HOSTS before any view runs; the
        # dashboard checks the same list for Flask 3.0, which only stores it.
        trusted = app.config.get("TRUSTED_HOSTS")
        return Dashboard(
            extension.queue_for(app),
            read_only=read_only,
            secret=app.secret_key,
            authorize=lambda environ: authorize(),
            allowed_hosts=named if trusted is None else tuple(trusted),
            secure_cookies=bool(app.config.get("SESSION_COOKIE_SECURE")),
        )

    def view(rest: str = "") -> Response:
        if "app" not in dashboards:
            dashboards["app"] = build()
        mount = request.script_root + url_prefix
        status, headers, body = call_mounted(dashboards["app"], request.environ, mount, rest)
        return Response(body, status=status, headers=headers)

    methods = ["GET", "POST"]
    endpoint = "venturi_dashboard"
    app.add_url_rule(f"{url_prefix}/", endpoint, view, methods=methods)
    app.add_url_rule(f"{url_prefix}/<path:rest>", endpoint, view, methods=methods)
