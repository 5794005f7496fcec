"""The worker's options checked, its kinds resolved to their leases, its heartbeat
interval derived from them, and its default name."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Final

from venturi.errors import ConfigurationError
from venturi.models import SMALLINT_MAX, SMALLINT_MIN
from venturi.registry import JobDefinition

# The longest worker name: it is stamped on every claim (``claimed_by``, an indexed
# column) and keys the worker registry, whose index rows hold at most about 2,700 bytes.
# 512 characters (2,048 bytes of UTF-8 at most) fit, and so does any host's default name.
MAX_WORKER_NAME_LENGTH: Final = 512


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def worker_name(name: object) -> str:
    """``name``, or the default name for None; raises `ConfigurationError` for a name
    the database cannot keep: not a str, empty, longer than `MAX_WORKER_NAME_LENGTH`,
    holding a NUL or a lone surrogate."""
    if name is None:
        return default_name()
    if not isinstance(name, str):
        raise ConfigurationError(f"worker name must be a str, got {type(name).__name__}")
    if not name:
        raise ConfigurationError("worker name must not be empty (None picks a default)")
    if len(name) > MAX_WORKER_NAME_LENGTH:
        raise ConfigurationError(
            f"worker name is {len(name)} characters; at most {MAX_WORKER_NAME_LENGTH} are allowed"
        )
    if "\x00" in name:
        raise ConfigurationError("worker name must not hold a NUL character")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError("worker name is not valid Unicode (a lone surrogate?)") from None
    return name


def check_options(
    *,
    concurrency: int,
    priority_floor: int | None,
    poll_interval: float,
    reaper_interval: float,
    heartbeat_interval: float | None,
    prefetch: int | None,
) -> None:
    """Raise `ConfigurationError` for an option `Worker` cannot run with."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if priority_floor is not None and not SMALLINT_MIN <= priority_floor <= SMALLINT_MAX:
        raise ConfigurationError(f"priority_floor {priority_floor} is outside smallint range")
    if not poll_interval > 0 or not reaper_interval > 0:
        raise ConfigurationError("poll_interval and reaper_interval must be positive")
    if heartbeat_interval is not None and not heartbeat_interval > 0:
        raise ConfigurationError(f"heartbeat_interval must be positive, got {heartbeat_interval}")
    if prefetch is not None and prefetch < 0:
        raise ConfigurationError(f"prefetch must be >= 0, got {prefetch}")


def resolve_kinds(
    requested: Sequence[str] | None, definitions: Mapping[str, JobDefinition]
) -> dict[str, float]:
    """Each kind the worker runs (``requested``, or every registered one) and its lease."""
    kinds = list(requested or definitions)
    unknown = [k for k in kinds if k not in definitions]
    if unknown:
        raise ConfigurationError(f"no handler registered for kinds: {', '.join(unknown)}")
    if not kinds:
        raise ConfigurationError("the worker has no kinds to run: register a job first")
    return {k: definitions[k].lease for k in kinds}


def heartbeat_every_for(leases: dict[str, float], heartbeat_interval: float | None) -> float:
    """At most a third of the shortest lease, so two beats can miss before it lapses."""
    shortest = min(leases.values())
    if heartbeat_interval is None:
        return shortest / 3
    if heartbeat_interval > shortest / 3:
        raise ConfigurationError(
            f"heartbeat_interval {heartbeat_interval}s must be at most a third of "
            f"the shortest lease ({shortest}s)"
        )
    return heartbeat_interval
