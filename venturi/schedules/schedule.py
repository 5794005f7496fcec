"""Schedules: a kind enqueued at each slot of a timing, and what to do about missed slots.

A schedule's row in ``<prefix>_schedules`` keeps its next slot. Whichever worker sees that
slot come due by the database clock advances the row and inserts the slot's jobs in one
statement, fenced on the row's next slot as it read it: racing workers find the row moved
and insert nothing, so each slot is enqueued once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, get_args

import attrs

from venturi.durations import Duration, text_or_seconds
from venturi.errors import ConfigurationError, InvalidJob
from venturi.models import (
    validate_concurrency_key,
    validate_kind,
    validate_max_attempts,
    validate_priority,
)
from venturi.payload import encode_payload
from venturi.registry import JobDefinition
from venturi.schedules.cron import Cron, Every

CatchUp = Literal["latest", "all", "none"]
CATCH_UP_POLICIES: Final = get_args(CatchUp)
DEFAULT_MAX_CATCH_UP: Final = 100
# A slot fired this long after its time was missed (no worker ran then): the "none"
# policy skips it. Running workers fire within a second, so only downtime gets here.
MISSED_AFTER: Final = timedelta(seconds=30)
# The handler parameter that receives the slot's time.
SLOT_PARAMETER: Final = "scheduled_at"


def timing_of(cron: str | None, every: Duration | str | None, tz: str | None) -> Cron | Every:
    """The `Cron` or `Every` timing from exactly one of ``cron`` and ``every``."""
    if (cron is None) == (every is None):
        raise ConfigurationError("a schedule takes exactly one of cron= and every=")
    if cron is not None:
        return Cron(cron, "UTC" if tz is None else tz)
    if tz is not None:
        raise ConfigurationError("tz= applies to cron= schedules; every= counts real seconds")
    assert every is not None
    try:
        return Every(text_or_seconds(every, "every", allow_zero=False))
    except InvalidJob as exc:
        raise ConfigurationError(str(exc)) from None


def _check_name(value: object) -> str:
    try:
        return validate_kind(value)
    except InvalidJob as exc:
        raise ConfigurationError(str(exc).replace("kind", "schedule name", 1)) from None


def _check_catch_up(value: object) -> CatchUp:
    if value not in CATCH_UP_POLICIES:
        raise ConfigurationError(
            f"catch_up must be one of {', '.join(map(repr, CATCH_UP_POLICIES))}, got {value!r}"
        )
    return value  # type: ignore[return-value]


def _check_max_catch_up(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_catch_up must be a positive int, got {value!r}")
    return value


def _payload_text(schedule: Schedule) -> str:
    try:
        return encode_payload(schedule.payload)
    except InvalidJob as exc:
        raise ConfigurationError(f"schedule {schedule.name!r}: {exc}") from None


@attrs.frozen
class Firing:
    """What a due schedule does now: enqueue ``slots`` (oldest first), then wait for
    ``next_slot``."""

    slots: list[datetime]
    next_slot: datetime


@attrs.frozen
class Schedule:
    """One schedule: ``kind`` enqueued with ``payload`` at every slot of ``timing``.

    ``with_slot``: the handler declares ``scheduled_at`` and receives each slot's time.
    ``priority`` and ``max_attempts`` are the kind's, for the jobs fired, and
    ``concurrency_key`` their key (a kind with ``key_concurrency`` needs one). A ``builtin``
    schedule (the retention's) enqueues nothing: its slots start work in the workers.
    """

    name: str = attrs.field(converter=_check_name)
    kind: str = attrs.field(converter=validate_kind)
    timing: Cron | Every
    payload: Mapping[str, Any] = attrs.field(factory=dict)
    catch_up: CatchUp = attrs.field(default="latest", converter=_check_catch_up)
    max_catch_up: int = attrs.field(default=DEFAULT_MAX_CATCH_UP, converter=_check_max_catch_up)
    with_slot: bool = False
    priority: int = attrs.field(default=0, converter=validate_priority)
    max_attempts: int = attrs.field(default=5, converter=validate_max_attempts)
    builtin: bool = False
    concurrency_key: str | None = attrs.field(default=None, converter=validate_concurrency_key)
    payload_json: str = attrs.field(
        init=False, default=attrs.Factory(_payload_text, takes_self=True)
    )

    @property
    def fingerprint(self) -> str:
        """A digest of everything firing depends on: a worker fires a slot only while
        the row's fingerprint is its own, so after a deploy older code stops firing."""
        parts = [
            self.kind,
            self.timing.expression,
            self.timing.zone,
            self.payload_json,
            self.catch_up,
            self.max_catch_up,
            self.with_slot,
            self.priority,
            self.max_attempts,
            self.builtin,
        ]
        if self.concurrency_key is not None:  # keyless schedules keep their fingerprints
            parts.append(self.concurrency_key)
        text = json.dumps(parts, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    def plan(self, next_slot: datetime, now: datetime) -> Firing:
        """The slots to enqueue when ``next_slot`` came due and it is ``now`` (database
        time), by the catch-up policy, and the slot to wait for afterwards.

        Every slot from ``next_slot`` to ``now`` is due. ``latest`` enqueues the most
        recent; ``all`` the most recent ``max_catch_up``; ``none`` the most recent only
        if it is no older than `MISSED_AFTER` (a slot missed during downtime is skipped).
        """
        limit = self.max_catch_up if self.catch_up == "all" else 1
        due: list[datetime] = []
        for slot in self.timing.back_from(now):
            if slot < next_slot or len(due) == limit:
                break
            due.append(slot)
        if self.catch_up == "none":
            due = [slot for slot in due if now - slot <= MISSED_AFTER]
        due.reverse()
        return Firing(due, self.timing.after(now))

    def job_payload_json(self, slot: datetime) -> str:
        """The payload of the job fired for ``slot`` (with ``scheduled_at`` if wanted)."""
        if not self.with_slot:
            return self.payload_json
        return encode_payload({**self.payload, SLOT_PARAMETER: slot.isoformat()})


def with_slot_time(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """``payload`` with its ``scheduled_at`` ISO text as an aware UTC datetime (other
    values, and text that is no ISO time, are left as they are)."""
    value = payload.get(SLOT_PARAMETER)
    if not isinstance(value, str):
        return payload
    try:
        slot = datetime.fromisoformat(value)
    except ValueError:
        return payload
    if slot.tzinfo is None:
        return payload
    return {**payload, SLOT_PARAMETER: slot.astimezone(UTC)}


@attrs.frozen
class ScheduleState:
    """What firing needs from a schedule's row: whose it is, and its next slot."""

    name: str
    fingerprint: str
    active: bool
    next_slot: datetime


@attrs.frozen
class ScheduleInfo:
    """A schedule's row as `venturi schedules` shows it."""

    name: str
    kind: str
    expression: str
    zone: str
    payload: Mapping[str, Any]
    with_slot: bool
    priority: int
    max_attempts: int
    catch_up: str
    max_catch_up: int
    active: bool
    last_slot: datetime | None
    next_slot: datetime
    fired_at: datetime | None
    taken_at: datetime

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> ScheduleInfo:
        return cls(*row)


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
