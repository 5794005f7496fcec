"""The invariant checker itself: each broken promise, staged in SQL, is reported."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg import sql
from ulid import ULID

from tests.faults import invariants
from tests.support import Probe, ledger
from venturi.models import NewJob
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


@pytest.fixture
def scene(
    store: PostgresStore, database_dsn: str, shared_prefix: str
) -> Iterator[tuple[PostgresStore, Probe]]:
    ledger.create(database_dsn, shared_prefix)
    probe = Probe(database_dsn, shared_prefix)
    yield store, probe
    probe.close()


def _completed(
    store: PostgresStore,
    probe: Probe,
    executions: int = 1,
    finished: bool = True,
    row_first: tuple[int, str] | None = None,
) -> ULID:
    """A job claimed, executed, and completed; ``row_first`` is a (run, outcome) journal
    row written just before the completion."""
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    for _ in range(executions):
        _execute(probe, job_id, job.run_count, finished)
    if row_first is not None:
        _journal(probe, job_id, *row_first)
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


def _claimed(store: PostgresStore) -> tuple[ULID, Claim]:
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    return job_id, Claim.of(job)


def _paused_then_completed(store: PostgresStore) -> ULID:
    """Run 1 paused, run 2 completed (journal: paused, completed)."""
    job_id, first = _claimed(store)
    assert store.settle(first, Settlement.pause(0))
    [again] = store.claim("w", {"k": 60}, 1)
    assert store.settle(Claim.of(again), Settlement.complete())
    return job_id


# Each staging breaks exactly one promise (the checker reports one violation), so
# deleting any one check from `invariants.py` fails the test named for it.


def _enqueued_and_gone(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe), ULID()]


def _not_settled(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [store.enqueue(NewJob("k"))]


def _stuck_claimed(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id, _ = _claimed(store)
    probe.rows("UPDATE {jobs} SET claim_expires_at = now() - interval '1 hour'")
    return [job_id]


def _two_terminal_settlements(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe, row_first=(1, "cancelled"))]


def _run_ended_twice(store: PostgresStore, probe: Probe) -> list[ULID]:
    """Released by a stopping worker, then completed anyway: the fence failed."""
    return [_completed(store, probe, row_first=(1, "released"))]


def _run_number_out_of_range(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe, row_first=(0, "released"))]


def _runs_ended_out_of_order(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id, first = _claimed(store)
    assert store.settle(first, Settlement.pause(0))
    [again] = store.claim("w", {"k": 60}, 1)
    assert store.settle(Claim.of(again), Settlement.pause(0))
    probe.rows("UPDATE {journal} SET run_no = 3 - run_no")  # run 2's row first, then run 1's
    return [job_id]


def _run_without_journal_row(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _paused_then_completed(store)
    probe.rows("DELETE FROM {journal} WHERE run_no = 1")
    return [job_id]


def _claimed_after_its_run_ended(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id, _ = _claimed(store)
    _journal(probe, job_id, 1, "released")
    return [job_id]


def _last_row_disagrees_with_status(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    probe.rows("UPDATE {jobs} SET status = 'dead'")
    return [job_id]


def _terminal_with_empty_journal(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = store.enqueue(NewJob("k"))
    assert store.cancel(job_id)
    probe.rows("DELETE FROM {journal}")
    return [job_id]


def _failure_count_disagrees(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    probe.rows("UPDATE {jobs} SET failure_count = 1")
    return [job_id]


def _one_claim_executed_twice(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe, executions=2)]


def _executed_a_run_never_claimed(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id = _completed(store, probe)
    _execute(probe, job_id, 2)
    return [job_id]


def _completed_before_handler_finished(store: PostgresStore, probe: Probe) -> list[ULID]:
    return [_completed(store, probe, finished=False)]


def _ran_again_without_interruption(store: PostgresStore, probe: Probe) -> list[ULID]:
    job_id, first = _claimed(store)
    _execute(probe, job_id, 1)
    assert store.settle(first, Settlement.pause(0))
    [again] = store.claim("w", {"k": 60}, 1)
    _execute(probe, job_id, 2)
    assert store.settle(Claim.of(again), Settlement.complete())
    return [job_id]


# (staging, settled, the complaint the checker must make)
BROKEN_PROMISES: list[tuple[Staging, bool, str]] = [
    (_enqueued_and_gone, True, "was enqueued and is gone"),
    (_not_settled, True, "is pending, not settled"),
    (_stuck_claimed, False, "stuck claimed past its lease"),
    (_two_terminal_settlements, True, "has 2 terminal settlements"),
    (_run_ended_twice, True, "run 1 ended twice (released, then completed)"),
    (_run_number_out_of_range, True, "journal names run 0 of 1"),
    (_runs_ended_out_of_order, False, "run 1 ended after run 2 had"),
    (_run_without_journal_row, True, "run 1 of 2 has no journal row"),
    (_claimed_after_its_run_ended, False, "is claimed but its run 1 already ended"),
    (_last_row_disagrees_with_status, True, "is dead but its last journal row is (1, 'completed')"),
    (_terminal_with_empty_journal, True, "is cancelled with an empty journal"),
    (_failure_count_disagrees, True, "failure_count 1 disagrees"),
    (_one_claim_executed_twice, True, "run 1 was executed 2 times"),
    (_executed_a_run_never_claimed, True, "executed run 2 but was claimed 1 times"),
    (_completed_before_handler_finished, True, "run 1 completed before its handler finished"),
    (_ran_again_without_interruption, True, "ran again after run 1, which ended 'paused'"),
]


@pytest.mark.parametrize(
    ("stage", "settled", "complaint"),
    BROKEN_PROMISES,
    ids=[stage.__name__.strip("_") for stage, _, _ in BROKEN_PROMISES],
)
def test_each_broken_promise_is_reported(
    scene: tuple[PostgresStore, Probe],
    database_dsn: str,
    stage: Staging,
    settled: bool,
    complaint: str,
) -> None:
    store, probe = scene
    ids = stage(store, probe)
    with pytest.raises(AssertionError) as caught:
        invariants.check(database_dsn, probe.prefix.name, ids, settled=settled, stale_after=60)
    message = str(caught.value)
    assert message.startswith("1 invariant violations"), message
    assert complaint in message, message


def test_every_check_has_a_staged_violation() -> None:
    """A check added to `invariants.py` without a staging here fails this count."""
    source = Path(invariants.__file__).read_text(encoding="utf-8")
    checks = source.count("problems.append(") + source.count("problems = [f")
    assert checks == len(BROKEN_PROMISES)
