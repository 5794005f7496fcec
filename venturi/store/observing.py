"""The store's operations behind the dashboard and `venturi workers`: the worker
registry, the overview's figures, throughput, dead-letter groups, finding jobs by dedup
key and making a scheduled job due now. `PostgresStore` inherits them."""

from __future__ import annotations

from typing import Any, Final

from venturi.models import JobId, JobRecord, to_uuid
from venturi.observations import (
    DeadGroup,
    KindOverview,
    Overview,
    Throughput,
    ThroughputBucket,
    WorkerInfo,
    WorkerPresence,
)
from venturi.store.housekeeping import Housekeeping

# Below this many rows (by the planner's estimate) the overview counts every job exactly:
# a small table costs nothing to scan, and may not have been analyzed yet.
EXACT_COUNT_BELOW: Final = 100_000
_ESTIMATED_STATUSES: Final = ("waiting", "completed", "dead", "cancelled")


class Observing(Housekeeping):
    """Read-mostly operations of `PostgresStore` for operators (a mixin over its pool)."""

    def beat_worker(self, presence: WorkerPresence, running: int) -> None:
        """Write ``presence`` into the worker registry (and drop the rows of dead workers)."""
        self._fetch(
            "worker_beat",
            {
                "name": presence.name,
                "host": presence.host,
                "pid": presence.pid,
                "kinds": list(presence.kinds),
                "concurrency": presence.concurrency,
                "running": running,
                "beat_every": presence.beat_every,
            },
        )

    def leave_worker(self, name: str) -> None:
        """Remove a stopping worker from the registry."""
        self._fetch("worker_leave", {"name": name})

    def workers(self) -> list[WorkerInfo]:
        """The live workers of the registry, by name."""
        return [WorkerInfo.from_row(row) for row in self._fetch("workers_list")]

    def overview(self, exact_below: int = EXACT_COUNT_BELOW) -> Overview:
        """Each kind's jobs by status without counting a large table: pending, scheduled
        and claimed jobs are counted from their partial indexes; on a table of at least
        ``exact_below`` rows (planner's estimate) the rest are estimated."""
        size_rows = self._fetch("table_size", {"table": self.prefix.jobs})
        rows, analyzed_at = size_rows[0] if size_rows else (-1, None)
        paused = {row[0] for row in self._fetch("kinds") if row[1]}
        if rows < exact_below:
            return self._exact_overview(paused, int(rows), analyzed_at)
        active = self._fetch("active_counts")
        taken_at = active[0][5] if active else self._fetch("now")[0][0]
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
        listed = self._fetch("kind_status_estimates", params)
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
        stats = self._fetch("stats")
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
        taken_at = stats[0][8] if stats else self._fetch("now")[0][0]
        return Overview(kinds, taken_at, False, max(rows, 0), analyzed_at)

    def throughput(self, minutes: int = 60, bucket: int = 5) -> Throughput:
        """Completed and failed runs per kind in ``bucket``-minute buckets over the last
        ``minutes`` minutes, from the journal."""
        rows = self._fetch("journal_hourly", {"minutes": minutes, "bucket": bucket})
        taken_at = rows[0][4] if rows else self._fetch("now")[0][0]
        buckets = tuple(ThroughputBucket(r[0], r[1], r[2], r[3]) for r in rows)
        return Throughput(buckets, minutes, bucket, taken_at)

    def dead_groups(self, sample: int = 500) -> list[DeadGroup]:
        """The newest ``sample`` dead jobs grouped by kind and their error's first line."""
        return [DeadGroup.from_row(row) for row in self._fetch("dead_groups", {"sample": sample})]

    def jobs_by_dedup_key(
        self, dedup_key: str, kind: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        """The unfinished (pending or running) jobs holding ``dedup_key`` (of ``kind``,
        if given), newest first."""
        params = {"dedup_key": dedup_key, "kind": kind, "limit": limit}
        return [JobRecord.from_row(row) for row in self._fetch("jobs_by_dedup_key", params)]

    def retry_now(self, job_id: JobId, note: str | None = None) -> bool:
        """Make a pending job that waits for a later time due now; False if it is not one."""
        return bool(self._fetch("retry_now", {"id": to_uuid(job_id), "note": note}))
