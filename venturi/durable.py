"""Durable handlers: steps a job's runs record once, and sleeps and waits that end a run
without holding a worker's slot.

A `DurableRun` belongs to one claimed run. Its steps are recorded per job (fenced like a
settlement: only while the run still holds its claim) and replayed on every later run of
the job, in the order they were first reached. A sleep or a wait that cannot return yet
records what it waits for and raises `Pause` until its time: the job is pending again with
a later ``visible_at``, so it costs claiming nothing while it waits.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import attrs
import psycopg
from ulid import ULID

from venturi.durations import MAX_DELAY_SECONDS, Duration, delay_seconds, require_storable
from venturi.errors import InvalidJob, JobCancelled, JobFailed, VenturiError
from venturi.models import JobStatus, NewJob, StepRecord
from venturi.outcomes import Fail, Pause
from venturi.payload import encode_json
from venturi.settlements import Claim

# The longest step or signal name, in characters.
MAX_NAME_CHARS: Final = 200
# A wait for another job looks again after a delay that grows with how long it has
# waited (a quarter of it), within these bounds, in seconds.
JOB_POLL_MIN: Final = 1.0
JOB_POLL_MAX: Final = 60.0
# The facts key of a suspended run's journal row, naming what it waits for.
WAITING_FACT: Final = "waiting"


class DuplicateStep(VenturiError, Fail):
    """A run reached a step name it already reached: names are unique within a job.
    The job is dead (the same handler would do the same again)."""

    def __init__(self, note: str) -> None:
        Fail.__init__(self, note)


class StepOrderChanged(VenturiError, Fail):
    """A replay reached the job's recorded steps in another order than the run that
    recorded them (the handler changed): the job is dead rather than mixing results."""

    def __init__(self, note: str) -> None:
        Fail.__init__(self, note)


class StepFenced(VenturiError):
    """The run lost its claim (its lease was taken over): it may record nothing more,
    and its end is discarded like any fenced run's."""


class TimedOut(VenturiError):
    """A wait (``raise_on_timeout=True``) passed its timeout without what it waited for."""


class SignalRefused(VenturiError):
    """A signal to a job that has finished: nothing was written."""


class DurableStore(Protocol):
    """The store operations a durable run uses (`PostgresStore` has them)."""

    def now(self) -> datetime: ...

    def steps_of(self, job_id: ULID) -> list[StepRecord]: ...

    def record_step(
        self,
        claim: Claim,
        name: str,
        seq: int,
        result: str,
        conn: psycopg.Connection[Any] | None = None,
    ) -> bool: ...

    def transaction(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]: ...

    def record_wait(self, claim: Claim, what: str, name: str, until: datetime) -> bool: ...

    def first_signal(self, job_id: ULID, name: str) -> tuple[bool, Any]: ...

    def job_outcome(self, job_id: ULID) -> tuple[JobStatus, Any] | None: ...

    def enqueue(self, job: NewJob, conn: psycopg.Connection[Any] | None = None) -> ULID: ...


def check_name(name: object, what: str) -> str:
    """``name`` if it is a storable name (a non-empty str of at most `MAX_NAME_CHARS`
    characters, no NUL), else raises `InvalidJob`."""
    if not isinstance(name, str):
        raise InvalidJob(f"{what} name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidJob(f"{what} name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidJob(f"{what} name is {len(name)} characters; at most {MAX_NAME_CHARS}")
    if "\x00" in name or any("\ud800" <= c <= "\udfff" for c in name):
        raise InvalidJob(f"{what} name {name!r} holds a NUL or a lone surrogate")
    return name


def _timeout(timeout: Duration | None, what: str) -> float | None:
    return None if timeout is None else delay_seconds(timeout, what)


@attrs.define(eq=False)
class DurableRun:
    """The durable side of one claimed run: records and replays its steps, and suspends
    it in sleeps and waits. Used from the run's own thread only."""

    store: DurableStore
    claim: Claim
    new_job: Callable[[str, Mapping[str, Any]], NewJob]
    _recorded: dict[str, StepRecord] | None = attrs.field(default=None, init=False)
    _by_seq: dict[int, str] = attrs.field(factory=dict, init=False)
    _reached: set[str] = attrs.field(factory=set, init=False)
    _seq: int = attrs.field(default=0, init=False)

    # -- steps ------------------------------------------------------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        transactional: bool = False,
    ) -> Any:
        """The recorded result of step ``name``, or ``fn``'s (recorded first)."""
        seq, recorded = self._next(name, "step")
        if recorded is not None:
            return recorded.result
        if not transactional:
            value = fn(*args, **kwargs)
            return self._write(name, seq, value, None)
        with self.store.transaction() as conn:
            value = fn(conn, *args, **kwargs)
            return self._write(name, seq, value, conn)

    def _next(self, name: str, what: str) -> tuple[int, StepRecord | None]:
        """Take the next place in the run's order for ``name``: its record if the job
        has one there; raises when the name was reached before or the order changed."""
        check_name(name, what)
        if name in self._reached:
            raise DuplicateStep(
                f"step {name!r} reached twice in one run of job {self.claim.job_id}; "
                "step names must be unique within a job"
            )
        self._reached.add(name)
        self._seq += 1
        seq = self._seq
        recorded = self._load().get(name)
        if recorded is not None and recorded.seq != seq:
            raise StepOrderChanged(
                f"step {name!r} was recorded as step {recorded.seq} of job "
                f"{self.claim.job_id} but is now reached as step {seq}: the handler's steps "
                "changed order; the job is dead rather than mixing results"
            )
        other = self._by_seq.get(seq)
        if recorded is None and other is not None:
            raise StepOrderChanged(
                f"step {seq} of job {self.claim.job_id} was recorded as {other!r} but is now "
                f"{name!r}: the handler's steps changed; the job is dead rather than mixing "
                "results"
            )
        return seq, recorded

    def _load(self) -> dict[str, StepRecord]:
        if self._recorded is None:
            steps = self.store.steps_of(self.claim.job_id)
            self._recorded = {s.name: s for s in steps}
            self._by_seq = {s.seq: s.name for s in steps}
        return self._recorded

    def _write(self, name: str, seq: int, value: Any, conn: psycopg.Connection[Any] | None) -> Any:
        text = encode_json(value, f"step {name!r} result")
        if not self.store.record_step(self.claim, name, seq, text, conn):
            raise StepFenced(
                f"job {self.claim.job_id} run {self.claim.run_count} lost its claim; "
                f"step {name!r} not recorded"
            )
        return json.loads(text)

    # -- sleeping and waiting ----------------------------------------------------------

    def sleep(
        self, duration: Duration | None, until: datetime | None, facts: dict[str, Any]
    ) -> None:
        """Return once the recorded wake time has passed; until then suspend the run."""
        if (duration is None) == (until is None):
            raise InvalidJob("sleep takes either a duration or until=, exactly one")
        seconds = None if duration is None else delay_seconds(duration, "sleep(duration)")
        at = None if until is None else require_storable(until, "sleep(until)")
        name = f"sleep#{self._seq + 1}"

        def wake_time() -> str:
            wake = at if at is not None else self.store.now() + timedelta(seconds=seconds or 0)
            return wake.isoformat()

        wake = datetime.fromisoformat(self.step(name, wake_time, (), {}))
        if wake > self.store.now():
            self._suspend("sleep", name, wake, wake, facts)

    def wait_for(
        self, name: str, timeout: Duration | None, raise_on_timeout: bool, facts: dict[str, Any]
    ) -> Any:
        """The payload of the job's first signal ``name``; None (or `TimedOut`) once the
        timeout passed; until then suspend the run."""
        check_name(name, "signal")
        seconds = _timeout(timeout, "wait_for(timeout)")
        deadline = self._deadline(f"wait_for:{name}", seconds)
        seq, recorded = self._next(f"wait_for:{name}:result", "step")
        if recorded is None:
            found, payload = self.store.first_signal(self.claim.job_id, name)
            if found:
                recorded_value = self._write(recorded_name(name), seq, {"payload": payload}, None)
                return recorded_value["payload"]
            if deadline is None or deadline > self.store.now():
                self._suspend("signal", name, deadline, deadline, facts)
            self._write(recorded_name(name), seq, {"timed_out": True}, None)
            result: Mapping[str, Any] = {"timed_out": True}
        else:
            result = recorded.result
        if result.get("timed_out"):
            if raise_on_timeout:
                raise TimedOut(f"job {self.claim.job_id}: no signal {name!r} before its timeout")
            return None
        return result.get("payload")

    def wait_for_job(
        self,
        job_id: ULID,
        timeout: Duration | None,
        raise_on_timeout: bool,
        facts: dict[str, Any],
    ) -> Any:
        """The return value of job ``job_id`` once it completed; raises `JobFailed` or
        `JobCancelled` if it ended otherwise; None (or `TimedOut`) past the timeout.
        Until then the run is suspended and looks again after a growing delay."""
        seconds = _timeout(timeout, "wait_for_job(timeout)")
        key = f"wait_for_job:{job_id}"
        deadline = self._deadline(key, seconds)
        seq, recorded = self._next(f"{key}:result", "step")
        if recorded is None:
            seen = self.store.job_outcome(job_id)
            if seen is None:
                raise InvalidJob(f"wait_for_job: no job has id {job_id}")
            status, value = seen
            if status in (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED):
                result: Mapping[str, Any] = self._write(
                    f"{key}:result", seq, {"status": status.value, "result": value}, None
                )
            else:
                now = self.store.now()
                if deadline is None or deadline > now:
                    since = self._load()[key].recorded_at if key in self._load() else now
                    poll = min(JOB_POLL_MAX, max(JOB_POLL_MIN, (now - since).total_seconds() / 4))
                    look = now + timedelta(seconds=poll)
                    wake = look if deadline is None else min(look, deadline)
                    self._suspend("job", str(job_id), deadline, wake, facts)
                result = self._write(f"{key}:result", seq, {"timed_out": True}, None)
        else:
            result = recorded.result
        return _job_result(job_id, result, raise_on_timeout)

    def spawn(self, name: str, kind: str, payload: Mapping[str, Any] | None) -> ULID:
        """Enqueue a child job once for step ``name``; a replay returns the same id."""
        job = self.new_job(kind, {} if payload is None else payload)

        def enqueue(conn: psycopg.Connection[Any]) -> str:
            return str(self.store.enqueue(job, conn=conn))

        return ULID.from_str(self.step(f"spawn:{name}", enqueue, (), {}, transactional=True))

    def _deadline(self, name: str, seconds: float | None) -> datetime | None:
        """The wait's deadline, recorded as a step on first reach (None: no timeout)."""

        def deadline() -> str | None:
            return (
                None
                if seconds is None
                else (self.store.now() + timedelta(seconds=seconds)).isoformat()
            )

        text = self.step(name, deadline, (), {})
        return None if text is None else datetime.fromisoformat(text)

    def _suspend(
        self,
        what: str,
        name: str,
        until: datetime | None,
        wake: datetime | None,
        facts: dict[str, Any],
    ) -> None:
        """Record what the run waits for, and end it: pending again at ``wake`` (a
        wait without a timeout: as late as a delay may be)."""
        if wake is None:
            wake = self.store.now() + timedelta(seconds=MAX_DELAY_SECONDS)
        if not self.store.record_wait(self.claim, what, name, until or wake):
            raise StepFenced(
                f"job {self.claim.job_id} run {self.claim.run_count} lost its claim; "
                f"its wait for {what} {name!r} not recorded"
            )
        facts[WAITING_FACT] = {
            "what": what,
            "name": name,
            "until": None if until is None else until.isoformat(),
        }
        label = "sleeping" if what == "sleep" else f"waiting for {what} {name}"
        raise Pause(until=wake, note=f"{label} until {(until or wake).isoformat()}")


@attrs.frozen
class DurableRuns:
    """Makes the `DurableRun` of a claimed job, on first use only (a run that never
    records a step builds nothing). A child a run spawns takes its kind's registered
    priority and attempts (``definitions``: kind -> an object with both)."""

    store: DurableStore
    definitions: Mapping[str, Any] = attrs.field(factory=dict)

    def __call__(self, claim: Claim) -> DurableRun:
        return DurableRun(self.store, claim, self.new_job)

    def new_job(self, kind: str, payload: Mapping[str, Any]) -> NewJob:
        definition = self.definitions.get(kind)
        if definition is None:
            return NewJob(kind, payload)
        definition.check_payload(payload)
        return NewJob(
            kind,
            payload,
            priority=definition.priority,
            max_attempts=definition.max_attempts,
        )


def recorded_name(signal: str) -> str:
    return f"wait_for:{signal}:result"


def _job_result(job_id: ULID, result: Mapping[str, Any], raise_on_timeout: bool) -> Any:
    if result.get("timed_out"):
        if raise_on_timeout:
            raise TimedOut(f"job {job_id} did not finish before the wait's timeout")
        return None
    status = result.get("status")
    if status == JobStatus.DEAD.value:
        raise JobFailed(job_id, None)
    if status == JobStatus.CANCELLED.value:
        raise JobCancelled(job_id, None)
    return result.get("result")


def waits_for_signal(facts: Mapping[str, Any] | None) -> bool:
    """A settlement's facts say its run suspended waiting for a signal."""
    waiting = None if not facts else facts.get(WAITING_FACT)
    return isinstance(waiting, Mapping) and waiting.get("what") == "signal"
