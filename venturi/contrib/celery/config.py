"""The settings of a Celery app: ``app.conf``, how sources are read into it, and which
settings are honoured, accepted without effect, or refused with `NotSupported`."""

from __future__ import annotations

import importlib
import logging
import os
import types
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from venturi.client import DEFAULT_PREFIX

from .exceptions import NotSupported

logger = logging.getLogger("venturi.celery")

DEFAULT_QUEUE: Final = "celery"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
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


def queue_options(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The `venturi.Queue` keywords of a plain app's settings (see the `app` module)."""
    dsn = conf.get("venturi_dsn")
    broker = conf.get("broker_url")
    if dsn is None and isinstance(broker, str) and broker.startswith(POSTGRES_SCHEMES):
        dsn = broker
    elif isinstance(broker, str) and dsn is None:
        logger.info("broker_url %s is not PostgreSQL: jobs go to VENTURI_DSN", broker.split(":")[0])
    options: dict[str, Any] = {
        "dsn": dsn,
        "prefix": conf.get("venturi_prefix") or os.environ.get("VENTURI_PREFIX") or DEFAULT_PREFIX,
        "pool_size": conf.get("venturi_pool_size"),
    }
    expires = conf.get("result_expires")
    if expires is not None:
        seconds = expires.total_seconds() if isinstance(expires, timedelta) else expires
        options["retention"] = {"completed": seconds}
    return options
