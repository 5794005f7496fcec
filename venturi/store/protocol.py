"""The store protocol: every operation the queue and the worker need from a database."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from psycopg import Connection
from ulid import ULID

from venturi.errors import StoreError
from venturi.limits import KindLimits, KindState
from venturi.models import (
    CleanupCriteria,
    HistoryCursor,
    HistoryFilter,
    JobId,
    JobRecord,
    JournalRecord,
    NewJob,
    Outcome,
    StatsSnapshot,
)
from venturi.observations import DeadGroup, Overview, Throughput, WorkerInfo, WorkerPresence
from venturi.prefix import Prefix
from venturi.retention import Retention
from venturi.schedules import Firing, Schedule, ScheduleInfo, ScheduleState
from venturi.settlements import BatchOutcome, Busy, Claim, Settlement
from venturi.store.hooks import StoreHooks


class Notifier(Protocol):
    """A dedicated LISTEN connection on the prefix's channel."""

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True if a notification arrived (or the
        connection was re-established, since one may have been missed)."""
        ...

    @property
    def connected(self) -> bool: ...

    @property
    def polling(self) -> bool:
        """True once it stopped listening for good (a transaction-pooling proxy)."""
        ...

    def connect(self) -> None: ...

    def stop_listening(self) -> None:
        """UNLISTEN and close; `wait` then only sleeps (or is woken)."""
        ...

    def borrowed(self) -> AbstractContextManager[Connection[Any] | None]:
        """Its connection for statements of the thread that waits, or None (use a
        pooled one): a connection straight to the server that answered just now."""
        ...

    def wake(self) -> None: ...

    def close(self) -> None: ...


class Store(Protocol):
    """What venturi needs from a database. `PostgresStore` is the implementation.

    The only door to the database: the queue, the worker, the CLI, the demo, the
    benchmark and the framework integrations use these operations and nothing else."""

    @property
    def prefix(self) -> Prefix: ...

    @property
    def hooks(self) -> StoreHooks:
        """The layers every write of new jobs and every settlement passes through."""
        ...

    def migrate(self) -> list[str]: ...

    def check_schema(self) -> None: ...

    def schema_script(self, after: int = 0, made_by: str = "venturi") -> str:
        """The DDL of the migrations after ``after``, as one script to apply by hand."""
        ...

    def drop_prefix(self) -> None:
        """Drop every object of the prefix: its tables (jobs, journal, migration history, ...),
        its function and its domains."""
        ...

    def ping(self) -> str:
        """One round trip to the database; returns the server's version."""
        ...

    def enqueue(self, job: NewJob, conn: Connection[Any] | None = None) -> ULID: ...

    def enqueue_many(
        self, jobs: Sequence[NewJob], conn: Connection[Any] | None = None
    ) -> list[ULID]: ...

    def enqueue_graph(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[ULID],
        workflow_id: ULID | None = None,
        conn: Connection[Any] | None = None,
    ) -> list[ULID]:
        """Jobs with parents (parents first) in one transaction; see `PostgresStore`."""
        ...

    def await_job(self, job_id: ULID) -> JobRecord | None:
        """Mark the job awaited (its finishing transaction notifies the channel of
        finished jobs) and read it afterwards; None if no job has this id."""
        ...

    def finished_jobs(self, job_ids: Sequence[ULID]) -> list[JobRecord]: ...

    def requeue_with_children(self, job_id: JobId, note: str | None = None) -> int | None:
        """Requeue a finished job and its cancelled descendants; None if not finished."""
        ...

    def results(self, job_ids: Sequence[JobId]) -> dict[ULID, Any]:
        """Each completed job's return value (its latest completion's attachment)."""
        ...

    def parent_results(self, job_id: JobId) -> dict[ULID, Any]: ...

    def workflow_jobs(
        self, workflow_id: JobId, conn: Connection[Any] | None = None
    ) -> list[tuple[JobRecord, list[ULID]]]: ...

    def claim(
        self,
        worker: str,
        leases: dict[str, float],
        limit: int,
        priority_floor: int | None = None,
        *,
        limited: Collection[str] = (),
        conn: Connection[Any] | None = None,
    ) -> list[JobRecord]:
        """Claim up to ``limit`` due jobs of the kinds in ``leases``; those in ``limited``
        within their declared limits, the rest by the plain claim (which leaves out any
        kind the database holds paused or limited), on ``conn`` if given (a connection
        straight to the server, such as `Notifier.borrowed`'s) as a prepared statement."""
        ...

    def declare_kinds(self, limits: Sequence[KindLimits], declared_by: str) -> None:
        """Record these kinds' limits as ``declared_by``'s: the latest declaration wins."""
        ...

    def pause_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Pause ``kinds`` for every worker; returns those that were not paused yet."""
        ...

    def resume_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Resume ``kinds``, waking idle workers; returns those that were paused."""
        ...

    def kinds(self) -> list[KindState]:
        """Every kind with a row of flow control: pause, declared limits, running jobs."""
        ...

    def seconds_until_rate_room(self, kinds: Sequence[str]) -> float | None:
        """Seconds until one of ``kinds`` whose rate is used up may start a run again (0:
        one may now); None when none of them has a rate."""
        ...

    def settle(self, claim: Claim, settlement: Settlement) -> Outcome | None:
        """Apply ``settlement`` if ``claim`` still holds its job: the journal outcome the
        database recorded (a retry of the last allowed attempt is ``dead``), or None when
        the run had lost its claim and nothing changed. A settlement whose values the
        database refuses (`retrying.refusal`) is written as its `Settlement.fallback`,
        the same outcome without what was refused."""

    def settle_many(
        self, items: Sequence[tuple[Claim, Settlement]]
    ) -> list[Outcome | Busy | StoreError | None]:
        """Write many settlements other than completions in one transaction (one commit):
        what each did, in order, as `settle` says, or `BUSY` when another session held its
        row locked (nothing changed for it; try again later), or the `StoreError` of a
        statement the database refused for that run alone (after its
        `Settlement.fallback` was refused too). A passing error raises, having changed
        nothing."""
        ...

    def complete_many(self, items: Sequence[tuple[Claim, Settlement]]) -> BatchOutcome:
        """Complete many runs in one statement: which applied, which were skipped while
        another session held their rows locked. When the database refuses a value of the
        batch, each run is completed alone and the refused one as its
        `Settlement.fallback` (completed, without what was refused)."""
        ...

    def complete_in(self, conn: Connection[Any], claim: Claim, settlement: Settlement) -> bool:
        """Write ``claim``'s completion inside ``conn``'s open transaction: True if it
        applied (it commits with that transaction), False if the run lost its claim or
        its lease lapsed (the caller rolls back). Waits out a row locked by another
        session; never commits."""
        ...

    def transaction(self) -> AbstractContextManager[Connection[Any]]:
        """A pooled connection in an open transaction: commits when the block ends,
        rolls back if it raises."""

    def complete_and_claim(
        self,
        claim: Claim,
        settlement: Settlement,
        kind: str,
        lease: float,
        priority_floor: int | None = None,
    ) -> tuple[BatchOutcome, list[JobRecord]]:
        """Complete one run of a kind with limits and, only if that applied, claim the
        kind's next job for the same worker, within its limits, in one transaction."""
        ...

    def extend_lease(self, leases: Sequence[tuple[Claim, float]]) -> BatchOutcome: ...

    def find_stale(self, limit: int = 100) -> list[JobRecord]: ...

    def recover(self, job: JobRecord, delay: float = 0.0) -> Outcome | None:
        """Take back ``job``'s expired claim: ``recovered`` (pending after ``delay``) or
        ``dead`` (out of attempts); None when fenced out or its row is locked meanwhile."""

    def next_visible_at(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> datetime | None: ...

    def seconds_until_visible(
        self, kinds: Sequence[str], priority_floor: int | None = None
    ) -> float | None: ...

    def sibling(self, pool_size: int = 1) -> Store: ...

    def with_prefix(self, prefix: Prefix) -> Store:
        """A store on the same connections under another prefix; closing it leaves them."""
        ...

    def now(self) -> datetime: ...

    def notifier(self) -> Notifier: ...

    def finished_notifier(self) -> Notifier:
        """A listener on the channel of finished jobs (notified by a transaction that
        finishes an awaited job, once)."""
        ...

    def notify(self, payload: str) -> None: ...

    def get(self, job_id: JobId, conn: Connection[Any] | None = None) -> JobRecord | None:
        """The job, or None; with ``conn``, read inside that connection's transaction."""
        ...

    def journal(self, job_id: JobId, conn: Connection[Any] | None = None) -> list[JournalRecord]:
        """The job's runs, oldest first; with ``conn``, as `get`."""
        ...

    def last_notes(self, job_ids: Sequence[JobId]) -> dict[ULID, str]:
        """Each job's latest non-empty journal note (jobs without one are left out)."""
        ...

    def history(
        self, filter: HistoryFilter, before: HistoryCursor | None = None, limit: int = 50
    ) -> list[JobRecord]: ...

    def cleanup(self, criteria: CleanupCriteria, batch: int = 1000) -> int: ...

    def stats(self) -> StatsSnapshot: ...

    def cancel(self, job_id: JobId, note: str | None = None) -> bool: ...

    def requeue(self, job_id: JobId, note: str | None = None) -> bool: ...

    def requeue_dead(
        self, kind: str | None = None, note: str | None = None, batch: int = 1000
    ) -> int: ...

    def pending_jobs(
        self, kind: str | None = None, conn: Connection[Any] | None = None
    ) -> list[JobRecord]:
        """The jobs waiting to run (due or scheduled), oldest first (on ``conn`` if given)."""
        ...

    def advance_clock(self, seconds: float, conn: Connection[Any] | None = None) -> None:
        """Move unfinished jobs ``seconds`` into the past (tests: `venturi.testing.advance`)."""
        ...

    def sync_schedules(self, schedules: Sequence[Schedule]) -> dict[str, str]:
        """Make the schedule rows match ``schedules`` (others are marked inactive)."""
        ...

    def schedule_states(self, names: Sequence[str]) -> tuple[dict[str, ScheduleState], datetime]:
        """The named schedules' rows and the database's clock."""
        ...

    def fire_schedule(self, schedule: Schedule, expected: datetime, firing: Firing) -> int | None:
        """Enqueue a firing's slots and advance the row in one transaction, fenced on
        ``expected``; the jobs inserted, or None when another worker fired first."""
        ...

    def schedules(self) -> list[ScheduleInfo]: ...

    def trigger_schedule(self, name: str, concurrency_key: str | None = None) -> ULID | None:
        """Enqueue one run of a schedule now, outside its bookkeeping, keyed
        ``concurrency_key``; None if unknown. A kind with a key limit needs the key."""
        ...

    def prune(self, retention: Retention, stopping: threading.Event) -> dict[str, int] | None:
        """Delete finished jobs past ``retention`` in short batches; None when another
        session is pruning."""
        ...

    def beat_worker(self, presence: WorkerPresence, running: int) -> None:
        """Write a worker's heartbeat into the registry (dropping dead workers' rows)."""
        ...

    def leave_worker(self, name: str) -> None: ...

    def workers(self) -> list[WorkerInfo]:
        """The registry's live workers, by name."""
        ...

    def overview(self, exact_below: int = ...) -> Overview:
        """Each kind's jobs by status; estimated in part on a large table."""
        ...

    def throughput(self, minutes: int = 60, bucket: int = 5) -> Throughput: ...

    def dead_groups(self, sample: int = 500) -> list[DeadGroup]: ...

    def jobs_by_dedup_key(
        self, dedup_key: str, kind: str | None = None, limit: int = 50
    ) -> list[JobRecord]: ...

    def retry_now(self, job_id: JobId, note: str | None = None) -> bool:
        """Make a pending job that waits for a later time due now; False if not one."""
        ...

    def close(self) -> None: ...
