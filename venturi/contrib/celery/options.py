"""Celery's task and call options as venturi's: durations, rates, aware datetimes, and a
call's payload and enqueue options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg

from venturi.errors import ConfigurationError
from venturi.flow.limits import Rate

from .config import check_queue
from .exceptions import NotSupported


def seconds(value: Any, field: str) -> float | None:
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


# Call options venturi has nothing for: each raises `NotSupported` by name.
REFUSED_CALL_OPTIONS: Final = (
    "link_error",
    "task_id",
    "routing_key",
    "exchange",
    "compression",
    "chord",
    "group_id",
    "headers",
    "shadow",
    "time_limit",
    "soft_time_limit",
)
# Call options that change nothing: publishing retries (an enqueue commits or raises),
# results (always kept), and the parent bookkeeping of Celery's result backend.
IGNORED_CALL_OPTIONS: Final = ("retry", "retry_policy", "ignore_result", "add_to_parent")


def call_options(
    name: str,
    args: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    options: dict[str, Any],
    conf: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run's payload and venturi enqueue options from Celery's call options (taken
    out of ``options``; any left over is unknown and raises `TypeError`)."""
    if isinstance(args, str | bytes) or (args is not None and not isinstance(args, Sequence)):
        raise TypeError(f"args of {name} must be a list or tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs of {name} must be a dict, got {type(kwargs).__name__}")
    for option in REFUSED_CALL_OPTIONS:
        if options.get(option) is not None:
            raise NotSupported(
                f"apply_async({option}=)", "see the guide's table of Celery features"
            )
    serializer = options.pop("serializer", "json")
    if serializer != "json":
        raise NotSupported(f"the {serializer!r} serializer", "arguments and results are JSON")
    queue = options.pop("queue", None)
    if queue is not None:
        check_queue(conf, str(queue), f"task {name}")
    payload: dict[str, Any] = {"args": list(args or ()), "kwargs": dict(kwargs or {})}
    venturi = _timing(options, payload)
    priority = options.pop("priority", None)
    if priority is not None:
        venturi["priority"] = priority
    if "conn" in options:
        venturi["conn"] = options.pop("conn")
    for option in (*IGNORED_CALL_OPTIONS, *REFUSED_CALL_OPTIONS):
        options.pop(option, None)
    if options:
        raise TypeError(f"apply_async of {name}: unknown options {', '.join(sorted(options))}")
    return payload, venturi


def _timing(options: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """``countdown``/``eta`` as venturi's ``delay``/``at``; ``expires`` into the payload."""
    countdown, eta = options.pop("countdown", None), options.pop("eta", None)
    expires = options.pop("expires", None)
    if countdown is not None and eta is not None:
        raise ValueError("apply_async takes countdown= or eta=, not both")
    venturi: dict[str, Any] = {}
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
    return venturi


def psycopg_of(conn: Any) -> psycopg.Connection[Any] | None:
    """The psycopg connection of ``conn=``: itself, or a SQLAlchemy session's."""
    if conn is None or isinstance(conn, psycopg.Connection):
        return conn
    from venturi.contrib.sqlalchemy import psycopg_connection

    return psycopg_connection(conn)
