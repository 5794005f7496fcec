"""The ``durable`` workload of `venturi bench`: a worker draining ordinary jobs beside
many jobs suspended in durable sleeps and waits, against the same worker draining them
alone, side by side in each round. Suspended jobs are pending with a later
``visible_at`` (the claim index steps past them) and rows of their own in the steps and
waits tables (which enqueue, claim and settle never read): they should cost nothing.
"""

from __future__ import annotations

from typing import Final

from venturi.bench.support import BENCH_KIND, compose
from venturi.bench.workloads import VenturiBench

DURABLE_CONCURRENCY: Final = 16


class SuspendedBench:
    """Two queues of one no-op kind: ``beside`` holds ``settings.suspended`` jobs of
    that kind suspended (as a durable run leaves them), ``alone`` holds none. A round
    drains ``settings.durable_jobs`` jobs on each, in alternating order."""

    def __init__(self, beside: VenturiBench, alone: VenturiBench) -> None:
        self.beside = beside
        self.alone = alone
        self._rounds = 0

    def fill(self) -> None:
        """Stage the suspended jobs as a run that recorded a step and then slept or
        waited leaves them: pending from tomorrow, run once, two steps and a wait each
        (half sleeping, half waiting for a signal), a journal row each."""
        bench = self.beside
        size = bench.settings.suspended
        bench.conn.execute(
            compose(
                """
                WITH made AS (
                    INSERT INTO {jobs} (id, kind, payload, run_count, visible_at)
                    SELECT lpad(to_hex(i), 32, '0')::uuid, %(kind)s, '{{}}'::jsonb, 1,
                           now() + interval '1 day' + i * interval '1 millisecond'
                    FROM generate_series(1, %(size)s) AS i
                    RETURNING id, visible_at
                ),
                steps AS (
                    INSERT INTO {steps} (job_id, name, seq, run_no, result)
                    SELECT m.id, s.name, s.seq, 1, s.result
                    FROM made AS m,
                         LATERAL (VALUES ('charge', 1, '"ch_1"'::jsonb),
                                         (CASE WHEN get_byte(uuid_send(m.id), 15) %% 2 = 0
                                               THEN 'sleep#2' ELSE 'wait_for:approved' END,
                                          2, to_jsonb(m.visible_at))) AS s (name, seq, result)
                )
                INSERT INTO {waits} (job_id, run_no, what, name, until)
                SELECT id, 1,
                       CASE WHEN get_byte(uuid_send(id), 15) %% 2 = 0 THEN 'sleep'
                            ELSE 'signal' END,
                       CASE WHEN get_byte(uuid_send(id), 15) %% 2 = 0 THEN 'sleep#2'
                            ELSE 'approved' END,
                       visible_at
                FROM made
                """,
                bench.prefix,
            ),
            {"kind": BENCH_KIND, "size": size},
        )
        bench.conn.execute(compose("VACUUM (ANALYZE) {jobs}", bench.prefix))
        bench.backlog = size

    def round(self) -> dict[str, float]:
        count = self.beside.settings.durable_jobs
        key = f"c{DURABLE_CONCURRENCY}"
        order = [("beside", self.beside), ("alone", self.alone)]
        if self._rounds % 2:
            order.reverse()
        self._rounds += 1
        rates = {name: self._drain(bench, f"durable.{name}.{key}", count) for name, bench in order}
        return {
            f"durable.beside.{key}": rates["beside"],
            f"durable.alone.{key}": rates["alone"],
            # This round's two drains side by side: less exposed to drift between rounds.
            "durable.ratio": rates["beside"] / rates["alone"],
        }

    @staticmethod
    def _drain(bench: VenturiBench, key: str, count: int) -> float:
        """One drain on ``bench``, its table first cleared of the last round's jobs the
        same way on both queues (deleted, then vacuumed), so the two differ only in the
        suspended jobs."""
        bench.conn.execute(compose("DELETE FROM {jobs} WHERE status <> 'pending'", bench.prefix))
        bench.conn.execute(compose("VACUUM {jobs}", bench.prefix))
        return bench.drain(DURABLE_CONCURRENCY, key, count)[key]
