"""The exactly-once check of transactional runs, read from the tables.

`check` compares each job with the effects its transactional runs committed (the
effects table of `tests.support.ledger`) and raises `AssertionError` listing every job
whose effects are not exactly those of its completion: a completed job has exactly one
effects row, written by the run that completed it; any other job has none.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

import attrs
import psycopg
from psycopg import sql
from ulid import ULID

from tests.support import ledger

MAX_EXAMPLES: Final = 8


@attrs.frozen
class EffectFigures:
    """What the effects table holds, for the test to print and the README to quote."""

    jobs: int
    effect_rows: int
    duplicates: int  # effects rows beyond the first, summed over jobs
    executions: int  # ledger rows: handler executions, committed or not

    def line(self) -> str:
        return (
            f"effects rows {self.effect_rows} for {self.jobs} jobs (duplicates "
            f"{self.duplicates}); handler executions {self.executions}"
        )


def check(dsn: str, prefix: str) -> EffectFigures:
    """Raise unless every job's committed effects are exactly its completion's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Each job, and the run its journal says completed it (None if none did).
        completed_by: dict[Any, int | None] = dict(
            conn.execute(
                sql.SQL(
                    "SELECT j.id, (SELECT max(run_no) FROM {} AS e"
                    " WHERE e.job_id = j.id AND e.outcome = 'completed') FROM {} AS j"
                ).format(sql.Identifier(f"{prefix}_journal"), sql.Identifier(f"{prefix}_jobs"))
            ).fetchall()
        )
        effects: dict[Any, list[int]] = defaultdict(list)
        for job_id, run_no in conn.execute(
            sql.SQL("SELECT job_id, run_no FROM {}").format(ledger.effects_table(prefix))
        ):
            effects[job_id].append(run_no)
        executions = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(ledger.table(prefix))
        ).fetchone()
    problems = []
    for job_id in completed_by.keys() | effects.keys():
        name = str(ULID.from_uuid(job_id))
        run = completed_by.get(job_id)
        expected = [] if run is None else [run]
        if job_id not in completed_by:
            problems.append(f"effects {effects[job_id]} of a job that does not exist: {name}")
        elif sorted(effects.get(job_id, [])) != expected:
            problems.append(
                f"{name} committed effects of runs {sorted(effects.get(job_id, []))}; "
                f"expected those of its completing run only: {expected}"
            )
    if problems:
        shown = "\n  ".join(problems[:MAX_EXAMPLES])
        raise AssertionError(f"{len(problems)} exactly-once violations, e.g.:\n  {shown}")
    rows = sum(len(runs) for runs in effects.values())
    return EffectFigures(
        jobs=len(completed_by),
        effect_rows=rows,
        duplicates=sum(len(runs) - 1 for runs in effects.values() if runs),
        executions=int(executions[0]) if executions else 0,
    )
