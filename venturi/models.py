"""Values that cross the store boundary: new-job specs, records, filters, snapshots."""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final, Literal

import attrs
from ulid import ULID

from venturi.durations import (
    Duration,
    delay_seconds,
    require_aware,
    require_storable,
)
from venturi.errors import InvalidJob
from venturi.payload import encode_payload

SMALLINT_MIN: Final = -32768
SMALLINT_MAX: Final = 32767
MAX_KIND_LENGTH: Final = 128
MAX_DEDUP_KEY_LENGTH: Final = 512
MAX_CONCURRENCY_KEY_LENGTH: Final = 255
INT4_MAX: Final = 2**31 - 1
MAX_PARENTS: Final = 10_000
_KIND_PATTERN: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*", re.ASCII)

MergeFn = Callable[[dict[str, Any], dict[str, Any]], Mapping[str, Any]]
OnDuplicate = Literal["keep", "replace"] | MergeFn
OnParentFailure = Literal["cancel", "run"]
JobId = ULID | str | uuid.UUID


class JobStatus(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    WAITING = "waiting"  # for unfinished parents; outside the claim index

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES: Final = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})


class Outcome(enum.StrEnum):
    """What a journal row records."""

    COMPLETED = "completed"
    RETRIED = "retried"
    PAUSED = "paused"
    DEAD = "dead"
    RELEASED = "released"
    RECOVERED = "recovered"
    MERGED = "merged"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"
    SIGNALLED = "signalled"


def to_uuid(job_id: JobId) -> uuid.UUID:
    """The uuid a job id is stored as; accepts a ULID, its string form, or a uuid."""
    if isinstance(job_id, ULID):
        return job_id.to_uuid()
    if isinstance(job_id, uuid.UUID):
        return job_id
    if isinstance(job_id, str):
        try:
            return ULID.from_str(job_id).to_uuid()
        except ValueError:
            try:
                return uuid.UUID(job_id)
            except ValueError:
                raise InvalidJob(f"job id {job_id!r} is neither a ULID nor a UUID") from None
    raise InvalidJob(f"job id must be a ULID or its string form, got {type(job_id).__name__}")


# Kinds found valid, each checked once: a process uses a handful, and a batch of jobs
# repeats them thousands of times. Bounded, for a process that makes kinds without end.
_VALID_KINDS: Final[set[str]] = set()
_VALID_KINDS_KEPT: Final = 1024


def validate_kind(kind: object) -> str:
    """Return ``kind`` if it is a usable job kind; raise `InvalidJob` naming the rule."""
    if type(kind) is str and kind in _VALID_KINDS:
        return kind
    if not isinstance(kind, str):
        raise InvalidJob(f"kind must be a str, got {type(kind).__name__}")
    if not kind:
        raise InvalidJob("kind must not be empty")
    if len(kind) > MAX_KIND_LENGTH:
        raise InvalidJob(f"kind is {len(kind)} characters; at most {MAX_KIND_LENGTH} are allowed")
    if not _KIND_PATTERN.fullmatch(kind):
        raise InvalidJob(
            f"kind {kind!r} must be ASCII letters, digits and _ . : / - "
            "(starting with a letter, digit or _)"
        )
    if type(kind) is str and len(_VALID_KINDS) < _VALID_KINDS_KEPT:
        _VALID_KINDS.add(kind)
    return kind


def validate_priority(priority: object, field: str = "priority") -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidJob(f"{field} must be an int, got {type(priority).__name__}")
    if not SMALLINT_MIN <= priority <= SMALLINT_MAX:
        raise InvalidJob(
            f"{field} {priority} is outside smallint range [{SMALLINT_MIN}, {SMALLINT_MAX}]"
        )
    return priority


def validate_max_attempts(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"max_attempts must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidJob(f"max_attempts must be at least 1, got {value}")
    if value > INT4_MAX:  # the column is an int4: refused here, not by the server
        raise InvalidJob(f"max_attempts must be at most {INT4_MAX}, got {value}")
    return value


def _validate_key(value: object, field: str, longest: int) -> str | None:
    """Return ``value`` if it is None or a usable key (1 to ``longest`` characters of
    valid Unicode without NUL); raise `InvalidJob` naming ``field`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidJob(f"{field} must be a str or None, got {type(value).__name__}")
    if not value or len(value) > longest or "\x00" in value:
        raise InvalidJob(
            f"{field} must be 1 to {longest} characters without NUL, got {len(value)} characters"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob(f"{field} is not valid Unicode (a lone surrogate?)") from None
    return value


def _validate_dedup_key(value: object) -> str | None:
    return _validate_key(value, "dedup_key", MAX_DEDUP_KEY_LENGTH)


def validate_concurrency_key(value: object) -> str | None:
    """Return ``value`` if it is None or a usable concurrency key; raise `InvalidJob`."""
    return _validate_key(value, "concurrency_key", MAX_CONCURRENCY_KEY_LENGTH)


def _validate_on_duplicate(value: object) -> OnDuplicate:
    if value in ("keep", "replace") or callable(value):
        return value
    raise InvalidJob(f"on_duplicate must be 'keep', 'replace' or a merge function, got {value!r}")


def _depends_on(value: object) -> tuple[ULID, ...]:
    """The parent ids of ``depends_on=`` as ULIDs (a single id is refused: pass a list)."""
    if value is None or (type(value) is tuple and not value):  # the default: no parents
        return ()
    if isinstance(value, (str, bytes, ULID, uuid.UUID)) or not isinstance(value, Iterable):
        raise InvalidJob(f"depends_on must be a list of job ids, got {type(value).__name__}")
    parents = tuple(dict.fromkeys(_cursor_id(v) for v in value))
    if len(parents) > MAX_PARENTS:
        raise InvalidJob(
            f"depends_on names {len(parents)} parents; at most {MAX_PARENTS} are allowed"
        )
    return parents


def _on_parent_failure(value: object) -> OnParentFailure:
    if value in ("cancel", "run"):
        return value
    raise InvalidJob(f"on_parent_failure must be 'cancel' or 'run', got {value!r}")


# `NewJob`'s payload when none is given: each job then gets an empty dict of its own.
_NO_PAYLOAD: Any = object()


def _payload_json(job: NewJob) -> str:
    # Size is checked at enqueue, against the queue's own max_payload_bytes.
    return encode_payload(job.payload, max_bytes=None)


def _delay_seconds(job: NewJob) -> float | None:
    """The job's ``delay`` in seconds, after checking it against ``at``."""
    if job.delay is not None and job.at is not None:
        raise InvalidJob("give either delay or at, not both")
    if job.at is not None:
        require_storable(job.at, "at")
    return None if job.delay is None else delay_seconds(job.delay, "delay")


# Built by the thousand in a batch, so `__init__` is written out: attrs' would call each
# field's converter, defaults included (nine calls for a job that sets only its kind and
# payload, a third of building it). Without slots the frozen fields are set through the
# instance dict, not through object.__setattr__ once per field.
@attrs.frozen(slots=False, init=False)
class NewJob:
    """A job to enqueue. Every rule of the contract is checked here, before any SQL."""

    kind: str
    payload: Mapping[str, Any]
    priority: int
    delay: Duration | None
    at: datetime | None
    dedup_key: str | None
    on_duplicate: OnDuplicate
    max_attempts: int
    concurrency_key: str | None
    # W3C trace context of the enqueuing request (`venturi.contrib.otel` fills it in).
    trace_context: Mapping[str, str] | None
    # Parents: the job waits until every one has completed (`on_parent_failure` says what
    # a dead or cancelled parent does to it).
    depends_on: tuple[ULID, ...]
    on_parent_failure: OnParentFailure
    payload_json: str = attrs.field(init=False)
    delay_seconds: float | None = attrs.field(init=False)

    def __init__(  # noqa: PLR0917 (attrs' positional order, kept for callers)
        self,
        kind: object,
        payload: Mapping[str, Any] = _NO_PAYLOAD,
        priority: object = 0,
        delay: Duration | None = None,
        at: datetime | None = None,
        dedup_key: object = None,
        on_duplicate: object = "keep",
        max_attempts: object = 5,
        concurrency_key: object = None,
        trace_context: Mapping[str, str] | None = None,
        depends_on: object = (),
        on_parent_failure: object = "cancel",
    ) -> None:
        fields = self.__dict__
        # A kind seen before, an int in range and each default cost a test; anything
        # else goes through its full check, which raises `InvalidJob` naming the rule.
        known = kind.__class__ is str and kind in _VALID_KINDS
        fields["kind"] = kind if known else validate_kind(kind)
        fields["payload"] = {} if payload is _NO_PAYLOAD else payload
        in_range = priority.__class__ is int and SMALLINT_MIN <= priority <= SMALLINT_MAX
        fields["priority"] = priority if in_range else validate_priority(priority)
        fields["delay"] = delay
        fields["at"] = at
        fields["dedup_key"] = None if dedup_key is None else _validate_dedup_key(dedup_key)
        fields["on_duplicate"] = (
            "keep" if on_duplicate == "keep" else _validate_on_duplicate(on_duplicate)
        )
        in_range = max_attempts.__class__ is int and 1 <= max_attempts <= INT4_MAX
        fields["max_attempts"] = max_attempts if in_range else validate_max_attempts(max_attempts)
        fields["concurrency_key"] = (
            None if concurrency_key is None else validate_concurrency_key(concurrency_key)
        )
        fields["trace_context"] = trace_context
        fields["depends_on"] = _depends_on(depends_on)
        fields["on_parent_failure"] = (
            "cancel" if on_parent_failure == "cancel" else _on_parent_failure(on_parent_failure)
        )
        fields["payload_json"] = _payload_json(self)
        fields["delay_seconds"] = None if delay is None and at is None else _delay_seconds(self)
        if self.dedup_key is None and self.on_duplicate != "keep":
            raise InvalidJob("on_duplicate needs a dedup_key")
        if self.depends_on and self.dedup_key is not None:
            raise InvalidJob("a job with parents (depends_on=) cannot take a dedup_key")

    @property
    def trace_context_json(self) -> str | None:
        return None if self.trace_context is None else json.dumps(dict(self.trace_context))


def _optional_ulid(value: object) -> ULID | None:
    return value if value is None or isinstance(value, ULID) else ULID.from_uuid(value)  # type: ignore[arg-type]


@attrs.frozen
class StepRecord:
    """One recorded step of a durable job: its name, its place in the order the handler
    reached its steps, the run that recorded it, its result and that result's size."""

    name: str
    seq: int
    run_no: int
    result: Any
    recorded_at: datetime
    size: int

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StepRecord:
        return cls(row[0], row[1], row[2], row[3], row[4], int(row[5] or 0))


@attrs.frozen
class WaitRecord:
    """What a pending job waits for: ``what`` is ``sleep``, ``signal`` or ``job`` (the
    step, the signal's name or the job's id in ``name``), until ``until``."""

    what: str
    name: str
    until: datetime | None
    since: datetime


@attrs.frozen
class SignalRecord:
    """One signal sent to a job."""

    name: str
    payload: Any
    sent_at: datetime


@attrs.frozen
class DurableState:
    """What a job's durable runs left: its steps, the signals sent to it, and what it
    waits for now (None unless it is pending in a wait)."""

    steps: tuple[StepRecord, ...] = ()
    signals: tuple[SignalRecord, ...] = ()
    waiting: WaitRecord | None = None


# Built for every claimed job: without slots the frozen fields are set through the instance
# dict (see NewJob), half the time of a slotted class's nineteen object.__setattr__ calls.
@attrs.frozen(slots=False)
class JobRecord:
    """One row of the jobs table, as it was when read."""

    id: ULID
    kind: str
    payload: dict[str, Any]
    priority: int
    status: JobStatus
    created_at: datetime
    visible_at: datetime
    run_count: int
    failure_count: int
    max_attempts: int
    carry: Any
    dedup_key: str | None
    claimed_by: str | None
    claim_expires_at: datetime | None
    finished_at: datetime | None
    concurrency_key: str | None = None
    trace_context: dict[str, str] | None = None
    parents_left: int = 0
    workflow_id: ULID | None = attrs.field(default=None, converter=_optional_ulid)
    # What its durable runs left (steps, signals, its wait): read by `Queue.get` only.
    durable: DurableState | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> JobRecord:
        """Build from a row selected as ``{job_columns}`` (sql/fragments/job_columns.sql)."""
        return cls(
            ULID.from_uuid(row[0]),
            row[1],
            row[2],
            row[3],
            JobStatus(row[4]),
            *row[5:],
        )

    @property
    def cursor(self) -> HistoryCursor:
        """The keyset position of this record in `history` order."""
        return HistoryCursor(self.id)


@attrs.frozen
class JournalRecord:
    """One append-only journal row: a transition that applied."""

    id: int
    job_id: ULID
    kind: str
    run_no: int
    recorded_at: datetime
    outcome: Outcome
    note: str | None
    attachment: Any
    #: What code reads about the run, as data, or None: ``worker`` on every settlement,
    #: ``error`` (``type``, ``message``) on a failure from an exception, ``lost`` on the
    #: reaper's rows, an integration's own keys (`venturi.contrib.django`: ``django_task``).
    facts: Mapping[str, Any] | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> JournalRecord:
        job_id, outcome = ULID.from_uuid(row[1]), Outcome(row[5])
        return cls(row[0], job_id, row[2], row[3], row[4], outcome, row[6], row[7], row[8])


def _cursor_id(value: JobId) -> ULID:
    return value if isinstance(value, ULID) else ULID.from_uuid(to_uuid(value))


@attrs.frozen
class HistoryCursor:
    """A keyset position in history order: id descending. History lists the jobs
    before it; the job itself need not exist any more."""

    id: ULID = attrs.field(converter=_cursor_id)


def _optional_status(value: object) -> JobStatus | None:
    if value is None:
        return None
    try:
        return JobStatus(str(value))
    except ValueError:
        choices = ", ".join(s.value for s in JobStatus)
        raise InvalidJob(f"status must be one of {choices}, got {value!r}") from None


def _finished_since(value: datetime | None) -> datetime | None:
    return None if value is None else require_aware(value, "finished_since")


def _finished_until(value: datetime | None) -> datetime | None:
    return None if value is None else require_aware(value, "finished_until")


def _finished_before(value: datetime) -> datetime:
    return require_aware(value, "finished_before")


@attrs.frozen
class HistoryFilter:
    """Which jobs `history` lists."""

    kind: str | None = None
    status: JobStatus | None = attrs.field(default=None, converter=_optional_status)
    finished_since: datetime | None = attrs.field(default=None, converter=_finished_since)
    finished_until: datetime | None = attrs.field(default=None, converter=_finished_until)


def _terminal_status(value: object) -> JobStatus | None:
    status = _optional_status(value)
    if status is not None and not status.terminal:
        raise InvalidJob(f"cleanup removes only terminal jobs; status {status.value!r} is not one")
    return status


@attrs.frozen
class CleanupCriteria:
    """Which terminal jobs `cleanup` deletes (with their journal)."""

    finished_before: datetime = attrs.field(converter=_finished_before)
    kind: str | None = None
    status: JobStatus | None = attrs.field(default=None, converter=_terminal_status)


@attrs.frozen
class KindStats:
    """Counts for one kind at one moment."""

    kind: str
    pending: int
    scheduled: int
    claimed: int
    completed: int
    dead: int
    cancelled: int
    oldest_pending_seconds: float | None
    paused: bool = False
    waiting: int = 0  # for unfinished parents


@attrs.frozen
class StatsSnapshot:
    """Per-kind counts, read in one statement."""

    kinds: tuple[KindStats, ...]
    taken_at: datetime

    def total(self, field: str) -> int:
        return sum(int(getattr(k, field)) for k in self.kinds)
