"""`ReadStore`: the store's reads, on connections of their own or on the writing store's.

A queue's reads of what a dashboard shows (a job, its journal, history pages, stats, the
kinds' flow control, schedules, workflows, the worker registry, the overview, throughput,
dead-letter groups) go through a `ReadStore`. Every `PostgresStore` has one on its own
connections (`PostgresStore.reads`: the primary, which a worker reads); a queue with a
``read_dsn`` opens another on a small pool of read-only connections (`open_read_store`),
where reads may lag the primary by the replica's replay delay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs
import psycopg
from ulid import ULID

from venturi.flow.limits import FairKey, KindLimits, KindState
from venturi.models import (
    HistoryCursor,
    HistoryFilter,
    JobId,
    JobRecord,
    JournalRecord,
    KindStats,
    StatsSnapshot,
    to_uuid,
)
from venturi.observations import (
    DeadGroup,
    KindOverview,
    Overview,
    Throughput,
    ThroughputBucket,
    WorkerInfo,
)
from venturi.prefix import Prefix
from venturi.schedules.schedule import ScheduleInfo
from venturi.store import sqlfiles
from venturi.store.connections import (
    Connections,
    Preparation,
    check_preparation,
    new_pool,
    open_owned,
)
from venturi.store.dsn import Dsn

# Dashboard reads are short and few at a time; the pool opens connections only when a
# read asks for one, so a queue that never reads holds none on the read server.
READ_POOL_SIZE: Final = 2
READ_APPLICATION_NAME: Final = "venturi-read"
READ_ONLY_OPTION: Final = "-c default_transaction_read_only=on"
# Below this many rows (by the planner's estimate) the overview counts every job exactly:
# a small table costs nothing to scan, and may not have been analyzed yet.
EXACT_COUNT_BELOW: Final = 100_000
_ESTIMATED_STATUSES: Final = ("waiting", "completed", "dead", "cancelled")


@attrs.define(eq=False)
class ReadStore:
    """Reads of one prefix's tables. Thread-safe; database outages surface as
    `StoreUnavailable`. Methods taking ``conn`` read inside that connection's transaction
    instead (so a transaction sees the jobs it wrote itself)."""

    connections: Connections
    prefix: Prefix

    def _read(
        self,
        name: str,
        params: dict[str, Any] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        return self.connections.run(sqlfiles.statement(name, self.prefix), params, conn)

    # -- jobs -------------------------------------------------------------------------

    def get(self, job_id: JobId, conn: psycopg.Connection[Any] | None = None) -> JobRecord | None:
        """The job, or None."""
        rows = self._read("get", {"id": to_uuid(job_id)}, conn)
        return JobRecord.from_row(rows[0]) if rows else None

    def journal(
        self, job_id: JobId, conn: psycopg.Connection[Any] | None = None
    ) -> list[JournalRecord]:
        """The job's runs, oldest first."""
        rows = self._read("journal", {"id": to_uuid(job_id)}, conn)
        return [JournalRecord.from_row(r) for r in rows]

    def last_notes(self, job_ids: Sequence[JobId]) -> dict[ULID, str]:
        """Each job's latest non-empty journal note (jobs without one are left out)."""
        if not job_ids:
            return {}
        rows = self._read("last_notes", {"ids": [to_uuid(i) for i in job_ids]})
        return {ULID.from_uuid(row[0]): row[1] for row in rows}

    def history(
        self, filter: HistoryFilter, before: HistoryCursor | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """One page of jobs, newest id first, after ``before``."""
        params = {
            "kind": filter.kind,
            "status": None if filter.status is None else filter.status.value,
            "finished_since": filter.finished_since,
            "finished_until": filter.finished_until,
            "before_id": None if before is None else before.id.to_uuid(),
            "limit": limit,
        }
        return [JobRecord.from_row(r) for r in self._read("history", params)]

    def stats(self) -> StatsSnapshot:
        """Counts of each kind's jobs by status."""
        rows = self._read("stats")
        kinds = tuple(
            KindStats(*row[:8], paused=row[9], waiting=row[10])  # type: ignore[misc]
            for row in rows
        )
        taken_at = rows[0][8] if rows else self._read("now")[0][0]
        return StatsSnapshot(kinds, taken_at)

    def pending_jobs(
        self, kind: str | None = None, conn: psycopg.Connection[Any] | None = None
    ) -> list[JobRecord]:
        """The jobs waiting to run (due or scheduled), of ``kind`` or all, oldest first."""
        rows = self._read("pending_jobs", {"kind": kind}, conn)
        return [JobRecord.from_row(r) for r in rows]

    def jobs_by_dedup_key(
        self, dedup_key: str, kind: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """The unfinished (pending or running) jobs holding ``dedup_key`` (of ``kind``,
        if given), newest first."""
        params = {"dedup_key": dedup_key, "kind": kind, "limit": limit}
        return [JobRecord.from_row(row) for row in self._read("jobs_by_dedup_key", params)]

    # -- results and workflows --------------------------------------------------------

    def finished_jobs(self, job_ids: Sequence[ULID]) -> list[JobRecord]:
        """Those of ``job_ids`` that have finished (completed, dead or cancelled)."""
        if not job_ids:
            return []
        rows = self._read("finished_jobs", {"ids": [i.to_uuid() for i in job_ids]})
        return [JobRecord.from_row(r) for r in rows]

    def results(self, job_ids: Sequence[JobId]) -> dict[ULID, Any]:
        """Each completed job's return value (its latest completion's attachment)."""
        rows = self._read("completion_results", {"ids": [to_uuid(i) for i in job_ids]})
        return {ULID.from_uuid(r[0]): r[1] for r in rows}

    def parent_results(self, job_id: JobId) -> dict[ULID, Any]:
        """Each parent of ``job_id`` and its return value (None unless it completed)."""
        rows = self._read("parent_results", {"id": to_uuid(job_id)})
        return {ULID.from_uuid(r[0]): r[1] for r in rows}

    def workflow_jobs(
        self, workflow_id: JobId, conn: psycopg.Connection[Any] | None = None
    ) -> list[tuple[JobRecord, list[ULID]]]:
        """Every job of a workflow (enqueue order) with its parents' ids."""
        rows = self._read("workflow_jobs", {"id": to_uuid(workflow_id)}, conn)
        return [(JobRecord.from_row(r[:-1]), [ULID.from_uuid(p) for p in r[-1]]) for r in rows]

    # -- control rows -----------------------------------------------------------------

    def kinds(self) -> list[KindState]:
        """Every kind with a row of flow control: pause, declared limits, running jobs."""
        return [KindState.from_row(row) for row in self._read("kinds")]

    def kind_limits(self) -> list[tuple[KindLimits, bool]]:
        """Each kind's latest declared limits, and whether it is paused, without counting
        its running jobs (`kinds` does): what workers re-read every few seconds."""
        return [
            (KindLimits.of_row(row[0], row[2:]), bool(row[1])) for row in self._read("kind_limits")
        ]

    def weights(self, kind: str | None = None) -> dict[str, dict[str, float]]:
        """The weights set for each fair kind's keys (those of ``kind`` only, if given)."""
        found: dict[str, dict[str, float]] = {}
        for name, key, weight in self._read("fair_weights", {"kind": kind}):
            found.setdefault(name, {})[key] = float(weight)
        return found

    def fair_keys(
        self, kinds: Sequence[str] | None = None, limit: int = 10
    ) -> dict[str, list[FairKey]]:
        """For each fair kind (of ``kinds``, if given), its ``limit`` keys with the most
        due jobs, with their running jobs. Reads the kinds' unfinished jobs once."""
        found: dict[str, list[FairKey]] = {}
        params = {"kinds": None if kinds is None else list(kinds), "limit": limit}
        for kind, key, due, running in self._read("fair_keys", params):
            found.setdefault(kind, []).append(FairKey(key, int(due), int(running)))
        return found

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule row of the prefix (inactive ones too)."""
        return [ScheduleInfo.from_row(row) for row in self._read("schedules_list")]

    def workers(self) -> list[WorkerInfo]:
        """The live workers of the registry, by name."""
        return [WorkerInfo.from_row(row) for row in self._read("workers_list")]

    # -- figures ----------------------------------------------------------------------

    def overview(self, exact_below: int = EXACT_COUNT_BELOW) -> Overview:
        """Each kind's jobs by status without counting a large table: pending, scheduled
        and claimed jobs are counted from their partial indexes; on a table of at least
        ``exact_below`` rows (planner's estimate) the rest are estimated."""
        size_rows = self._read("table_size", {"table": self.prefix.jobs})
        rows, analyzed_at = size_rows[0] if size_rows else (-1, None)
        paused = {limits.kind for limits, paused in self.kind_limits() if paused}
        if rows < exact_below:
            return self._exact_overview(paused, int(rows), analyzed_at)
        active = self._read("active_counts")
        taken_at = active[0][5] if active else self._read("now")[0][0]
        figures: dict[str, dict[str, Any]] = {}
        for kind, due, scheduled, claimed, oldest, _ in active:
            figures[kind] = {
                "pending": due,
                "scheduled": scheduled,
                "claimed": claimed,
                "oldest_pending_seconds": oldest,
            }
        params = {
            "table": self.prefix.jobs,
            "statistics": self.prefix.table("jobs_kind_status_stats"),
        }
        listed = self._read("kind_status_estimates", params)
        for kind, status, estimate in listed:
            if status in _ESTIMATED_STATUSES:
                figures.setdefault(kind, {})[status] = int(estimate)
        unlisted = dict.fromkeys(_ESTIMATED_STATUSES)
        kinds = tuple(
            KindOverview(kind, paused=kind in paused, **{**unlisted, **values})
            for kind, values in sorted(figures.items())
        )
        floor = min((int(row[2]) for row in listed), default=0)
        return Overview(kinds, taken_at, True, int(rows), analyzed_at, floor)

    def _exact_overview(self, paused: set[str], rows: int, analyzed_at: Any) -> Overview:
        stats = self._read("stats")
        kinds = tuple(
            KindOverview(
                kind=row[0],
                pending=row[1],
                scheduled=row[2],
                claimed=row[3],
                completed=row[4],
                dead=row[5],
                cancelled=row[6],
                oldest_pending_seconds=row[7],
                waiting=row[10],
                paused=row[0] in paused,
            )
            for row in stats
        )
        taken_at = stats[0][8] if stats else self._read("now")[0][0]
        return Overview(kinds, taken_at, False, max(rows, 0), analyzed_at)

    def throughput(self, minutes: int = 60, bucket: int = 5) -> Throughput:
        """Completed and failed runs per kind in ``bucket``-minute buckets over the last
        ``minutes`` minutes, from the journal."""
        rows = self._read("journal_hourly", {"minutes": minutes, "bucket": bucket})
        taken_at = rows[0][4] if rows else self._read("now")[0][0]
        buckets = tuple(ThroughputBucket(r[0], r[1], r[2], r[3]) for r in rows)
        return Throughput(buckets, minutes, bucket, taken_at)

    def dead_groups(self, sample: int = 500) -> list[DeadGroup]:
        """The newest ``sample`` dead jobs grouped by kind and their error's first line."""
        return [DeadGroup.from_row(row) for row in self._read("dead_groups", {"sample": sample})]

    def close(self) -> None:
        """Close the connections if they were opened for these reads alone."""
        self.connections.close()


def read_only_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """Connect keywords for a read DSN's ``params``: every transaction read-only (added to
    the DSN's own ``options``), so a write sent there by mistake fails instead of landing
    on a database the queue does not write to; ``application_name`` unless the DSN sets
    one, so the connections are told apart in ``pg_stat_activity``."""
    options = " ".join(part for part in (params.get("options"), READ_ONLY_OPTION) if part)
    keywords: dict[str, Any] = {"options": options}
    if "application_name" not in params:
        keywords["application_name"] = READ_APPLICATION_NAME
    return keywords


def open_read_store(
    target: Dsn,
    prefix: Prefix,
    *,
    pool_timeout: float,
    prepared_statements: Preparation,
) -> ReadStore:
    """A read store on ``target`` under ``prefix`` whose pool of `READ_POOL_SIZE`
    read-only connections opens them on demand; `ReadStore.close` closes it."""
    kwargs = {**target.connect_kwargs(), **read_only_keywords(dict(target.params))}
    name = f"venturi-{prefix.name}-read"
    prepared = check_preparation(prepared_statements)
    pool = new_pool(
        target, kwargs, READ_POOL_SIZE, pool_timeout, name, min_size=0, prepared=prepared
    )
    store = ReadStore(Connections(pool, owned=True, target=target), prefix)
    open_owned(pool)
    return store
