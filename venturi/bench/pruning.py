"""The ``prune`` workload of `venturi bench`: a worker draining beside the retention's
prune of many finished rows, against the same worker draining beside the same rows left
alone. Retention promises the first loses less than 20% of the second's throughput.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from venturi.bench.support import BENCH_KIND, BenchFailure, compose, fetch_one
from venturi.bench.workloads import VenturiBench
from venturi.schedules.retention import Retention

FINISHED_KIND: Final = "bench.finished"
PRUNE_CONCURRENCY: Final = 16


class PruneBench:
    """One round: stage ``prune_rows`` jobs finished two days ago (with a journal row
    each), drain ``jobs`` jobs beside them, then drain as many again while the default
    retention prunes them. The staged rows are made again each round."""

    def __init__(self, bench: VenturiBench) -> None:
        self.bench = bench

    def round(self) -> dict[str, float]:
        bench, settings = self.bench, self.bench.settings
        bench.reset(settings.jobs)
        self._stage(settings.prune_rows)
        alone = self._drain("beside finished rows")
        bench.conn.execute(
            compose("DELETE FROM {jobs} WHERE kind = %s", bench.prefix), (BENCH_KIND,)
        )
        stop = threading.Event()
        pruned: dict[str, float] = {}

        def prune() -> None:
            started = time.perf_counter()
            deleted = bench.queue.prune(Retention(), stop)
            pruned["rows"] = float(sum((deleted or {}).values()))
            pruned["seconds"] = time.perf_counter() - started

        pruner = threading.Thread(target=prune, name="bench-prune")
        pruner.start()
        try:
            beside = self._drain("beside a prune")
        finally:
            pruner.join(settings.timeout)
            stop.set()
        if pruned.get("rows") != settings.prune_rows:
            raise BenchFailure(f"prune: deleted {pruned.get('rows')} of {settings.prune_rows} rows")
        return {
            f"prune.alone.c{PRUNE_CONCURRENCY}": alone,
            f"prune.beside.c{PRUNE_CONCURRENCY}": beside,
            # This round's two drains side by side: less exposed to drift between rounds.
            "prune.ratio": beside / alone,
            "prune.deleted": settings.prune_rows / pruned["seconds"],
        }

    def _stage(self, rows: int) -> None:
        conn, prefix = self.bench.conn, self.bench.prefix
        conn.execute(
            compose(
                """
                WITH made AS (
                    INSERT INTO {jobs} (id, kind, status, run_count, finished_at)
                    SELECT gen_random_uuid(), %(kind)s, 'completed', 1,
                           now() - interval '2 days' - i * interval '1 millisecond'
                    FROM generate_series(1, %(rows)s) AS i
                    RETURNING id, kind
                )
                INSERT INTO {journal} (job_id, kind, run_no, outcome)
                SELECT id, kind, 1, 'completed' FROM made
                """,
                prefix,
            ),
            {"kind": FINISHED_KIND, "rows": rows},
        )
        conn.execute(compose("VACUUM (ANALYZE) {jobs}", prefix))
        conn.execute(compose("VACUUM (ANALYZE) {journal}", prefix))

    def _drain(self, what: str) -> float:
        """Jobs per second of a c16 worker draining ``jobs`` jobs, each checked to have
        run once and completed on its first claim."""
        bench = self.bench
        count = bench.settings.jobs
        bench.ledger.reset(count)
        elapsed = bench.drain_timed(PRUNE_CONCURRENCY, count, f"prune: drain {what}")
        bench.ledger.check(count, f"prune: drain {what}")
        query = compose(
            "SELECT count(*) FILTER (WHERE status = 'completed' AND run_count = 1), count(*)"
            " FROM {jobs} WHERE kind = %s",
            bench.prefix,
        )
        completed, total = fetch_one(bench.conn, query, (BENCH_KIND,))
        if completed != count or total != count:
            raise BenchFailure(f"prune: drain {what}: {completed} of {total} completed once")
        return count / elapsed
