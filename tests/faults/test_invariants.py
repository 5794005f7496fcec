"""The invariant checker itself: each broken promise, staged in SQL, is reported."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from psycopg import sql
from ulid import ULID

from tests.faults import invariants, ledger
from tests.support import Probe
from venturi.models import Claim, NewJob, Settlement
from venturi.pgstore import PostgresStore


@pytest.fixture
def scene(
    store: PostgresStore, database_dsn: str, shared_prefix: str
) -> Iterator[tuple[PostgresStore, Probe]]:
    ledger.create(database_dsn, shared_prefix)
    probe = Probe(database_dsn, shared_prefix)
    yield store, probe
    probe.close()


def _completed(store: PostgresStore, probe: Probe, executions: int = 1) -> ULID:
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    for _ in range(executions):
        _execute(probe, job_id, job.run_count)
    assert store.settle(Claim.of(job), Settlement.complete())
    return job_id


def _execute(probe: Probe, job_id: ULID, run: int, finished: bool = True) -> None:
    probe.conn.execute(
        sql.SQL(
            "INSERT INTO {} (job_id, run_no, token, worker, pid, finished_at)"
            " VALUES (%s, %s, %s, 'w', 1, CASE WHEN %s THEN clock_timestamp() END)"
        ).format(ledger.table(probe.prefix.name)),
        (job_id.to_uuid(), run, uuid.uuid4(), finished),
    )


def _journal(probe: Probe, job_id: ULID, run: int, outcome: str) -> None:
    probe.rows(
        "INSERT INTO {journal} (job_id, kind, run_no, outcome) VALUES (%s, 'k', %s, %s)",
        job_id.to_uuid(),
        run,
        outcome,
    )


def test_a_clean_run_passes(scene: tuple[PostgresStore, Probe], database_dsn: str) -> None:
    store, probe = scene
    ids = [_completed(store, probe) for _ in range(3)]
    figures = invariants.check(database_dsn, probe.prefix.name, ids)
    assert figures.statuses == {"completed": 3} and figures.executions == 3


Staging = Callable[[PostgresStore, Probe], list[ULID]]


def _lost(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe), ULID()]


def _settled_twice(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    _journal(probe, job_id, 1, "completed")
    return [job_id]


def _settled_after_takeover(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    _journal(probe, job_id, 1, "recovered")
    return [job_id]


def _one_claim_run_twice(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe, executions=2)]


def _rerun_without_interruption(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    _execute(probe, job_id, 1)
    assert store.settle(Claim.of(job), Settlement.pause(0))
    [again] = store.claim("w", {"k": 60}, 1)
    _execute(probe, job_id, 2)
    assert store.settle(Claim.of(again), Settlement.complete())
    return [job_id]


def _stuck_claim(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = store.enqueue(NewJob("k"))
    store.claim("w", {"k": 60}, 1)
    probe.rows("UPDATE {jobs} SET claim_expires_at = now() - interval '1 hour'")
    return [job_id]


def _completed_unfinished(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    _execute(probe, job_id, 1, finished=False)
    assert store.settle(Claim.of(job), Settlement.complete())
    return [job_id]


def _missing_journal(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    probe.rows("DELETE FROM {journal}")
    return [job_id]


@pytest.mark.parametrize(
    ("stage", "complaint"),
    [
        (_lost, "was enqueued and is gone"),
        (_settled_twice, "terminal settlements"),
        (_settled_after_takeover, "ended twice"),
        (_one_claim_run_twice, "executed 2 times"),
        (_rerun_without_interruption, "ran again after run 1"),
        (_stuck_claim, "stuck claimed"),
        (_completed_unfinished, "completed before its handler finished"),
        (_missing_journal, "empty journal"),
    ],
)
def test_each_broken_promise_is_reported(
    scene: tuple[PostgresStore, Probe], database_dsn: str, stage: Staging, complaint: str
) -> None:
    store, probe = scene
    ids = stage(store, probe)
    with pytest.raises(AssertionError, match=complaint):
        invariants.check(database_dsn, probe.prefix.name, ids, stale_after=60)
