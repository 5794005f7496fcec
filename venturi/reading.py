"""Reading a `Queue`'s jobs: a job, its journal, history pages and stats, on the queue's
read store (``read_dsn``: a replica or a read-only role) when it has one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from venturi.errors import ConfigurationError
from venturi.models import (
    HistoryCursor,
    HistoryFilter,
    JobId,
    JobRecord,
    JobStatus,
    JournalRecord,
    StatsSnapshot,
)
from venturi.store.protocol import Store


class Reads:
    """`Queue`'s reads of what a dashboard shows (a mixin over its stores).

    They go to ``read_store`` when the queue has one (built from ``read_dsn``), so they
    may lag the primary by the replica's replay delay; everything that must see the
    queue's own writes (enqueue, waiting and results, claims, settlements, cancel and
    requeue) uses ``store``.
    """

    store: Store
    read_store: Store | None = None
    # `Queue._check_process`: raises `ForkedError` in a child of the queue's process.
    _check_process: Callable[[], None]

    @property
    def reads(self) -> Store:
        """The store reads go to: the ``read_dsn`` store if set, else the queue's own."""
        return self.store if self.read_store is None else self.read_store

    def get(self, job_id: JobId) -> JobRecord | None:
        """The job's record, or None for an id no job has (read on ``read_dsn`` if set)."""
        self._check_process()
        return self.reads.get(job_id)

    def journal(self, job_id: JobId) -> list[JournalRecord]:
        """The job's journal, oldest first (read on ``read_dsn`` if set)."""
        self._check_process()
        return self.reads.journal(job_id)

    def history(
        self,
        *,
        kind: str | None = None,
        status: JobStatus | str | None = None,
        finished_since: datetime | None = None,
        finished_until: datetime | None = None,
        before: JobRecord | HistoryCursor | JobId | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """One page of jobs, newest id first; pass the last record as ``before`` for the next.

        Ids are ULIDs, so this is enqueue time as the enqueuing hosts' clocks saw it (one
        process's jobs in the order it enqueued them). ``before`` may also be a job id (a
        ULID, its string form) or a `HistoryCursor` of one, even of a job deleted since;
        anything else raises `InvalidJob`.
        """
        self._check_process()
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"limit must be an int within [1, 10000], got {limit!r}")
        cursor = (
            before.cursor
            if isinstance(before, JobRecord)
            else before
            if before is None or isinstance(before, HistoryCursor)
            else HistoryCursor(before)  # a job id; anything else raises InvalidJob
        )
        return self.reads.history(
            HistoryFilter(kind, status, finished_since, finished_until),
            cursor,
            limit,
        )

    def stats(self) -> StatsSnapshot:
        """Counts of each kind's jobs by status (read on ``read_dsn`` if set)."""
        self._check_process()
        return self.reads.stats()
