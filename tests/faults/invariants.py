"""The SQL checks every fault run ends with: venturi's promises, read from the tables.

`check` reads the prefix's jobs, journal and (when present) the execution ledger and
raises `AssertionError` listing every broken promise:

- nothing lost: every enqueued id exists, and is terminal (``settled=True``) or pending,
  or claimed under a lease that has not been expired for longer than ``stale_after``;
- one valid claim per run epoch: no (job, run) executed twice;
- at most one applied settlement per claim, and none after the run's lease was taken
  over: each run ends in at most one journal row, runs end in order, and no run ends
  after a later run began;
- the journal matches the transitions: every finished run has exactly one row, the last
  row agrees with the job's status, and failure_count agrees with the failures recorded;
- executions > 1 only where a run was interrupted (its journal row says so).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, Final

import attrs
import psycopg
from psycopg import sql
from ulid import ULID

RUN_ENDINGS: Final = frozenset({"completed", "retried", "paused", "dead", "released", "recovered"})
TERMINAL: Final = frozenset({"completed", "dead", "cancelled"})
LAST_ROW_FOR_STATUS: Final = {
    "completed": {"completed"},
    "dead": {"dead"},
    "cancelled": {"cancelled"},
    "pending": {"retried", "paused", "released", "recovered", "requeued", "merged", "signalled"},
}
INTERRUPTED: Final = frozenset({"recovered", "released"})
MAX_EXAMPLES: Final = 8


@attrs.define
class Figures:
    """What a fault run did, for the test to print and the README to quote."""

    jobs: int = 0
    statuses: dict[str, int] = attrs.field(factory=dict)
    runs: int = 0
    executions: int = 0
    jobs_run_twice: int = 0
    interrupted_runs: int = 0
    journal: dict[str, int] = attrs.field(factory=dict)

    def line(self) -> str:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.journal.items()))
        return (
            f"jobs {self.jobs} ({statuses}); runs {self.runs}; executions {self.executions}; "
            f"jobs executed more than once {self.jobs_run_twice}; interrupted runs "
            f"{self.interrupted_runs}; journal: {outcomes}"
        )


@attrs.define
class _Job:
    status: str
    run_count: int
    failure_count: int
    stale: bool
    rows: list[tuple[int, str]] = attrs.field(factory=list)  # (run_no, outcome) by id
    executions: list[tuple[int, bool]] = attrs.field(factory=list)  # (run_no, finished)


def _ident(prefix: str, suffix: str) -> sql.Identifier:
    return sql.Identifier(f"{prefix}{suffix}")


def _load(conn: psycopg.Connection[Any], prefix: str, stale_after: float) -> dict[Any, _Job]:
    jobs: dict[Any, _Job] = {}
    for job_id, status, runs, failures, stale in conn.execute(
        sql.SQL(
            "SELECT id, status, run_count, failure_count,"
            " status = 'claimed' AND claim_expires_at < now() - make_interval(secs => %s)"
            " FROM {}"
        ).format(_ident(prefix, "_jobs")),
        (stale_after,),
    ):
        jobs[job_id] = _Job(status, runs, failures, bool(stale))
    for job_id, run_no, outcome in conn.execute(
        sql.SQL("SELECT job_id, run_no, outcome FROM {} ORDER BY id").format(
            _ident(prefix, "_journal")
        )
    ):
        jobs[job_id].rows.append((run_no, outcome))
    ledger = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{prefix}_ledger",)).fetchone()
    if ledger and ledger[0]:
        for job_id, run_no, finished in conn.execute(
            sql.SQL("SELECT job_id, run_no, finished_at IS NOT NULL FROM {}").format(
                _ident(prefix, "_ledger")
            )
        ):
            if job_id in jobs:
                jobs[job_id].executions.append((run_no, finished))
    return jobs


def _check_job(job_id: Any, job: _Job, settled: bool, reruns: frozenset[str]) -> list[str]:
    name = str(ULID.from_uuid(job_id))
    problems: list[str] = []
    if settled and job.status not in TERMINAL:
        problems.append(f"{name} is {job.status}, not settled")
    if job.stale:
        problems.append(f"{name} is stuck claimed past its lease and the reaper interval")
    terminal_rows = sum(1 for _, outcome in job.rows if outcome in TERMINAL)
    if terminal_rows > 1:
        problems.append(f"{name} has {terminal_rows} terminal settlements: {job.rows}")
    endings = [(run, outcome) for run, outcome in job.rows if outcome in RUN_ENDINGS]
    ended: dict[int, str] = {}
    for run, outcome in endings:
        if run in ended:
            problems.append(f"{name} run {run} ended twice ({ended[run]}, then {outcome})")
        if not 1 <= run <= job.run_count:
            problems.append(f"{name} journal names run {run} of {job.run_count}")
        if ended and run < max(ended):
            problems.append(f"{name} run {run} ended after run {max(ended)} had: {job.rows}")
        ended[run] = outcome
    cancelled_last = bool(job.rows) and job.rows[-1][1] == "cancelled"
    open_run = job.status == "claimed" or cancelled_last
    for run in range(1, job.run_count + (0 if open_run else 1)):
        if run not in ended:
            problems.append(f"{name} run {run} of {job.run_count} has no journal row: {job.rows}")
    if job.status == "claimed" and job.run_count in ended:
        problems.append(f"{name} is claimed but its run {job.run_count} already ended")
    expected_last = LAST_ROW_FOR_STATUS.get(job.status)
    if expected_last is not None and job.rows and job.rows[-1][1] not in expected_last:
        problems.append(f"{name} is {job.status} but its last journal row is {job.rows[-1]}")
    if expected_last is not None and not job.rows and job.status != "pending":
        problems.append(f"{name} is {job.status} with an empty journal")
    counted = sum(1 for _, o in endings if o in ("retried", "recovered"))
    dead = sum(1 for _, o in endings if o == "dead")
    if not counted <= job.failure_count <= counted + dead:
        problems.append(f"{name} failure_count {job.failure_count} disagrees with {job.rows}")
    problems += _check_executions(name, job, ended, reruns)
    return problems


def _check_executions(
    name: str, job: _Job, ended: dict[int, str], reruns: frozenset[str]
) -> list[str]:
    problems: list[str] = []
    per_run = Counter(run for run, _ in job.executions)
    for run, count in per_run.items():
        if count > 1:
            problems.append(f"{name} run {run} was executed {count} times (one claim, twice)")
        if run > job.run_count:
            problems.append(f"{name} executed run {run} but was claimed {job.run_count} times")
    for run, finished in job.executions:
        outcome = ended.get(run)
        if outcome == "completed" and not finished:
            problems.append(f"{name} run {run} completed before its handler finished")
        if run < job.run_count and outcome not in reruns:
            problems.append(
                f"{name} ran again after run {run}, which ended {outcome!r} "
                f"(allowed: {sorted(reruns)})"
            )
    return problems


def check(
    dsn: str,
    prefix: str,
    expected: Iterable[ULID] = (),
    *,
    settled: bool = True,
    stale_after: float = 30.0,
    reruns: Iterable[str] = INTERRUPTED,
) -> Figures:
    """Check every promise over the prefix's tables; return the figures of the run.

    ``expected``: ids the test enqueued (each must exist). ``settled``: every job must be
    terminal. ``stale_after``: how long past its lease a claim may linger (lease + reaper
    interval + slack). ``reruns``: journal outcomes after which a job may run again.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        jobs = _load(conn, prefix, stale_after)
    problems = [f"{i} was enqueued and is gone" for i in expected if i.to_uuid() not in jobs]
    allowed = frozenset(reruns)
    for job_id, job in jobs.items():
        problems += _check_job(job_id, job, settled, allowed)
    if problems:
        shown = "\n  ".join(problems[:MAX_EXAMPLES])
        raise AssertionError(f"{len(problems)} invariant violations, e.g.:\n  {shown}")
    return _figures(jobs)


def _figures(jobs: dict[Any, _Job]) -> Figures:
    figures = Figures(jobs=len(jobs))
    statuses: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for job in jobs.values():
        statuses[job.status] += 1
        figures.runs += job.run_count
        figures.executions += len(job.executions)
        figures.jobs_run_twice += len(job.executions) > 1
        outcomes.update(outcome for _, outcome in job.rows)
        ended = defaultdict(str, {run: outcome for run, outcome in job.rows})
        figures.interrupted_runs += sum(1 for run, _ in job.executions if ended[run] in INTERRUPTED)
    figures.statuses = dict(statuses)
    figures.journal = dict(outcomes)
    return figures
