"""Per-run context handed to handlers that ask for it, and `current_job()`."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

import attrs
import psycopg
from ulid import ULID

from venturi.errors import ConfigurationError
from venturi.models import JobRecord
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


def current_job() -> JobContext | None:
    """The context of the job running in this thread, or None outside a job."""
    return _current.get()


def activate(ctx: JobContext) -> contextvars.Token[JobContext | None]:
    return _current.set(ctx)


def deactivate(token: contextvars.Token[JobContext | None]) -> None:
    _current.reset(token)
