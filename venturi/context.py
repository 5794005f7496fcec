"""Per-run context handed to handlers that ask for it, and `current_job()`."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.durable import DurableRun
from venturi.durations import Duration
from venturi.errors import ConfigurationError
from venturi.models import JobRecord
from venturi.settlements import Claim
from venturi.stopping import StopEvent

_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "venturi_current_job", default=None
)


@attrs.define(eq=False)
class JobContext:
    """What a handler may know and do about its own run.

    ``conn`` is the run's transaction, for a kind registered with ``transactional=True``.

    ``stopping`` is set when the worker is stopping, the job was cancelled, its lease was
    lost or its timeout passed: a long handler checks it and returns, or raises `Pause`
    with a ``carry`` checkpoint.

    ``facts`` (JSON-serialisable values by key) are written with this run's journal row,
    as data code reads back (`JournalRecord.facts`), where ``notes`` are for people: an
    integration keeps its own under one key of its name.
    """

    job: JobRecord
    stopping: threading.Event = attrs.field(factory=StopEvent)
    notes: list[str] = attrs.field(factory=list)
    facts: dict[str, Any] = attrs.field(factory=dict)
    attachment: Any = None
    _extend: Callable[[], bool] | None = attrs.field(default=None, alias="extend")
    _conn: psycopg.Connection[Any] | None = attrs.field(default=None, init=False)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The psycopg connection of this run's open transaction (``transactional=True``).

        Write on it and return: the job's fenced completion is written in the same
        transaction, which then commits; if the run lost its claim meanwhile, or raised,
        everything written here rolls back. Never commit or roll back on it yourself
        (nested ``with ctx.conn.transaction():`` blocks are savepoints and are fine).
        Raises `ConfigurationError` outside a transactional run.
        """
        if self._conn is None:
            raise ConfigurationError(
                f"ctx.conn: job {self.job.id} ({self.job.kind}) has no transaction; register "
                "its kind with transactional=True, and use ctx.conn only while it runs"
            )
        return self._conn

    def bind(self, conn: psycopg.Connection[Any] | None) -> None:
        """Hand the run its transaction's connection (the worker does; None takes it back)."""
        self._conn = conn

    _load_parents: Callable[[], dict[ULID, Any]] | None = attrs.field(default=None, alias="parents")
    _parents: dict[ULID, Any] | None = attrs.field(default=None, init=False)

    @property
    def attempt(self) -> int:
        """The run number: 1 on the first run, counting every claim."""
        return self.job.run_count

    @property
    def failures(self) -> int:
        """Failures counted before this run."""
        return self.job.failure_count

    @property
    def carry(self) -> Any:
        """What the previous run left in ``carry`` (None at first)."""
        return self.job.carry

    @property
    def parents(self) -> dict[ULID, Any]:
        """Each parent's id (``depends_on=``) and its return value (None for a parent that did
        not complete: one ended dead or cancelled with ``on_parent_failure='run'``), read
        on first use. Empty for a job without parents."""
        if self._parents is None:
            self._parents = {} if self._load_parents is None else self._load_parents()
        return self._parents

    def note(self, text: str) -> None:
        """Add a line to this run's journal note."""
        self.notes.append(str(text))

    def attach(self, value: Any) -> None:
        """Keep a JSON-serialisable value as this run's journal attachment."""
        self.attachment = value

    def extend_lease(self) -> bool:
        """Renew the lease now (the heartbeat also does); False if the lease is lost."""
        return True if self._extend is None else self._extend()

    # Builds this run's durable side from its claim, on first use (`DurableRuns`).
    _durable_runs: Callable[[Claim], DurableRun] | None = attrs.field(default=None, alias="durable")
    _durable: DurableRun | None = attrs.field(default=None, init=False)

    def _durable_run(self, what: str) -> DurableRun:
        if self._durable_runs is None:
            raise ConfigurationError(f"ctx.{what}: this run has no durable store")
        if self._conn is not None:
            raise ConfigurationError(
                f"ctx.{what}: job {self.job.id} ({self.job.kind}) runs in a transaction "
                "(transactional=True); durable steps and waits need a kind without one "
                "(use step(..., transactional=True) for a step's writes)"
            )
        if self._durable is None:
            self._durable = self._durable_runs(Claim.of(self.job))
        return self._durable

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Call ``fn(*args, **kwargs)`` once for this job: its JSON result is recorded
        under ``name`` before it is returned, and every later run of the job (a retry, a
        recovery, a resume) returns the recorded result without calling ``fn``.

        With ``transactional=True``, ``fn`` takes a psycopg connection first; its writes
        and the step's record commit together. A step that raised is not recorded.
        Raises `DuplicateStep` for a name reached twice, `StepOrderChanged` when a replay
        reaches recorded steps in another order (both end the job dead), `StepFenced`
        when the run lost its claim, `InvalidPayload` for a result that is not JSON.
        """
        return self._durable_run("step").step(name, fn, args, kwargs, transactional=transactional)

    def sleep(self, duration: Duration | None = None, *, until: datetime | None = None) -> None:
        """Sleep durably: the wake time is recorded as a step and the run ends (raising
        `Pause`; do not catch it) without holding a slot; the job runs again at the wake
        time, replays its recorded steps, and this call then returns at once."""
        self._durable_run("sleep").sleep(duration, until, self.facts)

    def wait_for(
        self, name: str, timeout: Duration | None = None, *, raise_on_timeout: bool = False
    ) -> Any:
        """The payload of the first signal ``name`` sent to this job (`Queue.signal`).

        If none arrived yet, the run ends (raising `Pause`; do not catch it) without
        holding a slot; the signal, or the timeout, makes the job due again. Past the
        timeout it returns None, or raises `TimedOut` with ``raise_on_timeout=True``.
        A signal name is waited for once per job.
        """
        return self._durable_run("wait_for").wait_for(name, timeout, raise_on_timeout, self.facts)

    def spawn(self, name: str, job: str | Any, payload: Mapping[str, Any] | None = None) -> ULID:
        """Enqueue a child job (a kind, or a job function) exactly once for step ``name``:
        the enqueue and the step's record commit together, and a replay returns the same
        id."""
        kind = job if isinstance(job, str) else getattr(job, "kind", None)
        if not isinstance(kind, str):
            raise TypeError(f"spawn takes a kind or a job function, got {type(job).__name__}")
        return self._durable_run("spawn").spawn(name, kind, payload)

    def wait_for_job(
        self, job_id: ULID | str, timeout: Duration | None = None, *, raise_on_timeout: bool = False
    ) -> Any:
        """The return value of job ``job_id`` once it completed (raises `JobFailed` or
        `JobCancelled` if it ended otherwise). Until then the run ends (raising `Pause`)
        without holding a slot and looks again after a delay that grows with the wait.
        Past the timeout it returns None, or raises `TimedOut`."""
        child = job_id if isinstance(job_id, ULID) else ULID.from_str(str(job_id))
        return self._durable_run("wait_for_job").wait_for_job(
            child, timeout, raise_on_timeout, self.facts
        )


def current_job() -> JobContext | None:
    """The context of the job running in this thread, or None outside a job."""
    return _current.get()


def activate(ctx: JobContext) -> contextvars.Token[JobContext | None]:
    return _current.set(ctx)


def deactivate(token: contextvars.Token[JobContext | None]) -> None:
    _current.reset(token)
