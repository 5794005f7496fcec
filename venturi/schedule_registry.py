"""Registering schedules on a `Queue`: ``periodic`` (a handler and its schedule) and
``schedule`` (another schedule for a registered kind)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, Unpack, cast

from ulid import ULID

from venturi.durations import Duration
from venturi.errors import ConfigurationError, InvalidJob, UnknownKind
from venturi.models import validate_concurrency_key
from venturi.reading import Reads
from venturi.registry import EnqueueTarget, JobDefinition, JobFunction, JobOptions
from venturi.retention import RETENTION_SCHEDULE
from venturi.schedules import (
    DEFAULT_MAX_CATCH_UP,
    SLOT_PARAMETER,
    CatchUp,
    Schedule,
    ScheduleInfo,
    timing_of,
)
from venturi.store.protocol import Store

P = ParamSpec("P")
R = TypeVar("R")


def schedule_for(
    definition: JobDefinition,
    *,
    cron: str | None = None,
    every: Duration | str | None = None,
    tz: str | None = None,
    name: str | None = None,
    payload: Mapping[str, Any] | None = None,
    catch_up: CatchUp = "latest",
    max_catch_up: int = DEFAULT_MAX_CATCH_UP,
    concurrency_key: str | None = None,
) -> Schedule:
    """A checked schedule of ``definition``'s kind; raises `ConfigurationError` (or
    `InvalidJob` for a payload that does not fit the handler, or a bad concurrency key)
    before anything is written. A kind with ``key_concurrency`` needs ``concurrency_key``
    (every job it fires gets that key); any other kind refuses one."""
    timing = timing_of(cron, every, tz)
    key = validate_concurrency_key(concurrency_key)
    try:
        definition.check_concurrency_key(key)
    except InvalidJob as exc:
        label = definition.kind if name is None else name
        raise ConfigurationError(
            f"schedule {label!r}: {exc}"
            + ("; give the schedule concurrency_key=" if key is None else "")
        ) from None
    if payload is not None and not isinstance(payload, Mapping):
        raise InvalidJob(f"schedule payload must be a dict, got {type(payload).__name__}")
    fixed = dict(payload or {})
    takes_slot = SLOT_PARAMETER in definition.signature.parameters
    if SLOT_PARAMETER in fixed:
        raise InvalidJob(
            f"schedule payload must not set {SLOT_PARAMETER!r}: each slot's time fills it"
        )
    # The slot's time stands in for the real one while the payload is checked.
    definition.check_payload({**fixed, SLOT_PARAMETER: ""} if takes_slot else fixed)
    return Schedule(
        definition.kind if name is None else name,
        definition.kind,
        timing,
        payload=fixed,
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        with_slot=takes_slot,
        priority=definition.priority,
        max_attempts=definition.max_attempts,
        concurrency_key=key,
    )


SCHEDULE_OPTIONS = frozenset(
    ("cron", "every", "tz", "name", "payload", "catch_up", "max_catch_up", "concurrency_key")
)


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``periodic``'s keywords as (the schedule's, the job's)."""
    schedule = {k: v for k, v in options.items() if k in SCHEDULE_OPTIONS}
    return schedule, {k: v for k, v in options.items() if k not in SCHEDULE_OPTIONS}


class ScheduleRegistry(Reads):
    """`Queue`'s schedules: registering them (a mixin over its job registry), reading
    their rows and triggering one."""

    definitions: dict[str, JobDefinition]
    schedules: dict[str, Schedule]
    _lock: threading.Lock
    store: Store
    # `Queue(max_result_bytes=)`: the limit of each kind registered without one of its own.
    max_result_bytes: int
    # `Queue._check_process`: raises `ForkedError` in a child of the queue's process.
    _check_process: Callable[[], None]

    def _define(self, kind: str, func: Callable[..., Any], options: JobOptions) -> JobDefinition:
        """The definition of ``kind`` as registered here, the queue's result limit its
        default."""
        merged: JobOptions = {"max_result_bytes": self.max_result_bytes, **options}
        return JobDefinition(kind, func, **merged)

    def schedule_rows(self) -> list[ScheduleInfo]:
        """Every schedule row of this prefix (inactive ones too), as `venturi schedules`."""
        self._check_process()
        return self.reads.schedules()

    def trigger(self, name: str) -> ULID:
        """Enqueue one run of schedule ``name`` now, outside its slot bookkeeping (keyed
        as the schedule registered on this queue keys its jobs)."""
        self._check_process()
        if name == RETENTION_SCHEDULE:
            raise ConfigurationError(
                f"{name!r} prunes inside the workers and enqueues no job; run `venturi cleanup` "
                "for a one-off prune"
            )
        known = self.schedules.get(name)
        job_id = self.store.trigger_schedule(name, None if known is None else known.concurrency_key)
        if job_id is None:
            raise ConfigurationError(
                f"no schedule named {name!r} in prefix {self.store.prefix.name!r}"
            )
        return job_id

    def periodic(
        self,
        kind: str,
        *,
        cron: str | None = None,
        every: Duration | str | None = None,
        tz: str | None = None,
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        catch_up: CatchUp = "latest",
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
        concurrency_key: str | None = None,
        **options: Unpack[JobOptions],
    ) -> Callable[[Callable[P, R]], JobFunction[P, R]]:
        """Register the decorated function as ``kind``'s handler (any `Queue.job` option)
        and a schedule for it, named ``name`` (default ``kind``); see `schedule`."""

        timing: dict[str, Any] = {
            "cron": cron,
            "every": every,
            "tz": tz,
            "name": name,
            "payload": payload,
            "catch_up": catch_up,
            "max_catch_up": max_catch_up,
            "concurrency_key": concurrency_key,
        }

        def register(func: Callable[P, R]) -> JobFunction[P, R]:
            definition = self._define(kind, func, options)
            self._add(definition, timing, register_kind=True)
            return JobFunction(cast(EnqueueTarget, self), definition, func)

        return register

    def schedule(
        self,
        kind: str,
        *,
        cron: str | None = None,
        every: Duration | str | None = None,
        tz: str | None = None,
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        catch_up: CatchUp = "latest",
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
        concurrency_key: str | None = None,
    ) -> Schedule:
        """Add a schedule for the registered ``kind``: a job with ``payload`` at every slot.

        ``cron``: a 5-field expression (or ``@hourly``, ``@daily``, ...) in ``tz`` (a
        zoneinfo name, default UTC); ``every``: a fixed interval of at least 1 s (seconds,
        a timedelta or text like ``"30s"``). Exactly one of them. A handler with a
        ``scheduled_at`` parameter receives the slot's time (aware, UTC). After downtime,
        ``catch_up`` enqueues the ``"latest"`` missed slot, ``"all"`` of them (at most
        ``max_catch_up``, the most recent) or ``"none"``. ``concurrency_key``: the key of
        every job fired, required for a kind with ``key_concurrency`` and refused for any
        other. Workers started later fire it, each slot exactly once. Raises
        `UnknownKind`, `ConfigurationError` or `InvalidJob` (a payload that does not fit
        the handler).
        """
        definition = self.definitions.get(kind)
        if definition is None:
            raise UnknownKind(f"schedule for kind {kind!r}: no handler is registered for it")
        timing: dict[str, Any] = {
            "cron": cron,
            "every": every,
            "tz": tz,
            "name": name,
            "payload": payload,
            "catch_up": catch_up,
            "max_catch_up": max_catch_up,
            "concurrency_key": concurrency_key,
        }
        return self._add(definition, timing, register_kind=False)

    def _add(
        self, definition: JobDefinition, timing: dict[str, Any], *, register_kind: bool
    ) -> Schedule:
        """Check ``timing`` against ``definition`` and record the schedule (and, for
        `periodic`, the kind's handler) under the lock, or raise and record nothing."""
        schedule = schedule_for(definition, **timing)
        with self._lock:
            if schedule.name in self.schedules:
                raise ConfigurationError(
                    f"schedule {schedule.name!r} already exists; give the new one its own name="
                )
            if register_kind:
                if definition.kind in self.definitions:
                    raise ConfigurationError(f"kind {definition.kind!r} is already registered")
                self.definitions[definition.kind] = definition
            self.schedules[schedule.name] = schedule
        return schedule
