"""The settings of a Celery app: ``app.conf``, how sources are read into it, and which
settings are honoured, accepted without effect, or refused with `NotSupported`."""

from __future__ import annotations

import importlib
import logging
import os
import types
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar, Final

import attrs

from venturi.client import DEFAULT_PREFIX
from venturi.contrib.settings import QueueSettings, optional_filled_str

from .exceptions import NotSupported

logger = logging.getLogger("venturi.celery")

DEFAULT_QUEUE: Final = "celery"
VENTURI: Final = "venturi_"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
# Settings read here; every other key is refused by name (see `check_settings`).
SUPPORTED_SETTINGS: Final = frozenset(
    {
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
        if key in SUPPORTED_SETTINGS or key in ACCEPTED_SETTINGS or key.startswith(VENTURI):
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


def settings_from(obj: Any, namespace: str | None, silent: bool) -> dict[str, Any]:
    """The settings in ``obj`` (a module, ``"module[:attribute]"`` text, a class or a
    mapping), as Celery reads them: with ``namespace``, only ``NAMESPACE_*`` names,
    lower-cased without the prefix; without, only lower-case names."""
    if isinstance(obj, str):
        module_name, _, attribute = obj.partition(":")
        try:
            source: Any = importlib.import_module(module_name)
        except ImportError:
            if silent:
                return {}
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
    found: dict[str, Any] = {}
    for key, value in list(items):
        if key.startswith("_") or not key.startswith(start) or not key[len(start) :]:
            continue
        name = key[len(start) :]
        if not name.isidentifier() or (not namespace and not name.islower()):
            continue  # a module's constants and the names pytest or Python add
        if isinstance(value, types.ModuleType | type) or callable(value):
            continue  # the settings module's imports, not settings
        found[name.lower()] = value
    return found


def check_queue(conf: Mapping[str, Any], name: str, where: str) -> None:
    """Refuse routing to a queue other than the default one."""
    default = conf.get("task_default_queue", DEFAULT_QUEUE)
    if name != default:
        raise NotSupported(
            f"routing {where} to queue {name!r}",
            f"every task is in one venturi queue ({default!r}); choose what a worker "
            "runs with -Q/--kinds",
        )


@attrs.frozen
class CelerySettings(QueueSettings):
    """The ``venturi_*`` settings of a plain app (not one configured from Django's), checked:
    the keys every integration shares (``venturi_prefix``, ``venturi_pool_size``,
    ``venturi_listen_dsn``, ``venturi_read_dsn``, ``venturi_strict``,
    ``venturi_max_payload_bytes``, ``venturi_retention``) and ``venturi_dsn``."""

    config_prefix: ClassVar[str] = VENTURI

    dsn: str | None = attrs.field(default=None, validator=optional_filled_str)

    @classmethod
    def key(cls, name: str) -> str:
        return cls.config_prefix + name  # lower-case, as a Celery app's settings are

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> CelerySettings:
        """The app's ``venturi_*`` settings; an unknown one raises `SettingsError`."""
        ours = {k.removeprefix(VENTURI): v for k, v in conf.items() if k.startswith(VENTURI)}
        known = [field.name for field in attrs.fields(cls)]
        unknown = sorted(VENTURI + name for name in set(ours) - set(known))
        if unknown:
            wanted = ", ".join(VENTURI + name for name in known if name != "testing")
            raise cls.error(f"unknown settings {', '.join(unknown)}; venturi reads {wanted}")
        if ours.get("testing") is not None:
            raise NotSupported("venturi_testing", "use venturi.testing.inline(app.venturi_queue())")
        return cls(**ours)


def queue_options(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The `venturi.Queue` keywords of a plain app's settings: its ``venturi_*`` settings,
    the DSN from a ``postgresql://`` broker URL (else env ``VENTURI_DSN``), the prefix
    from env ``VENTURI_PREFIX``, the retention of completed jobs from ``result_expires``."""
    given = dict(conf)
    broker = conf.get("broker_url")
    if "venturi_dsn" not in given and isinstance(broker, str):
        if broker.startswith(POSTGRES_SCHEMES):
            given["venturi_dsn"] = broker
        else:
            logger.info("broker_url %s is not PostgreSQL: jobs go to VENTURI_DSN", broker[:8])
    if "venturi_prefix" not in given:
        given["venturi_prefix"] = os.environ.get("VENTURI_PREFIX") or DEFAULT_PREFIX
    expires = conf.get("result_expires")
    if expires is not None and "venturi_retention" not in given:
        seconds = expires.total_seconds() if isinstance(expires, timedelta) else expires
        given["venturi_retention"] = {"completed": seconds}  # the others as by default
    settings = CelerySettings.from_conf(given)
    return {"dsn": settings.dsn, **settings.queue_options()}
