"""Settling many runs at once (completions, retries, pauses, deaths, releases) in one
statement: each does what `settle` would, a locked row is skipped as busy, and a
statement the database refuses for one run is written again without it."""

from __future__ import annotations

import psycopg
import pytest

from tests.support import Probe
from venturi.errors import StoreError
from venturi.models import JobRecord, NewJob, Outcome
from venturi.settlements import BUSY, Claim, Settlement
from venturi.store.postgres import PostgresStore


def _claimed(store: PostgresStore, count: int) -> list[JobRecord]:
    store.enqueue_many([NewJob("k", max_attempts=5) for _ in range(count)])
    return store.claim("w", {"k": 30}, count)


def _refused(job: JobRecord) -> tuple[Claim, Settlement]:
    # A claim no statement can carry (text holds no NUL): refused again as its fallback,
    # which makes any value of the settlement storable but keeps the claim it fences on.
    return Claim(job.id, "w\x00", job.run_count), Settlement.pause(delay=0)


def test_each_run_settles_as_settle_would_in_order(store: PostgresStore, probe: Probe) -> None:
    jobs = _claimed(store, 6)
    stale = Claim(jobs[5].id, "w", jobs[5].run_count + 1)
    items = [
        (Claim.of(jobs[0]), Settlement.retry(0, note="again")),
        (Claim.of(jobs[1]), Settlement.pause(delay=0, carry={"step": 2})),
        (Claim.of(jobs[2]), Settlement.dead("poison")),
        (Claim.of(jobs[3]), Settlement.release()),
        (Claim.of(jobs[4]), Settlement.retry(0)),
        (stale, Settlement.retry(0)),
    ]
    written = store.settle_many(items)
    assert written == [
        Outcome.RETRIED,
        Outcome.PAUSED,
        Outcome.DEAD,
        Outcome.RELEASED,
        Outcome.RETRIED,
        None,
    ]
    statuses = dict(probe.rows("SELECT status, count(*) FROM {jobs} GROUP BY status"))
    assert statuses == {"pending": 4, "dead": 1, "claimed": 1}
    assert probe.count("journal") == 5


def test_a_locked_row_is_busy_and_the_others_apply(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    jobs = _claimed(store, 3)
    with psycopg.connect(database_dsn) as user:  # a transaction holding one row locked
        user.execute(
            f"SELECT id FROM {store.prefix.name}_jobs WHERE id = %s FOR UPDATE",
            (jobs[1].id.to_uuid(),),
        )
        written = store.settle_many([(Claim.of(j), Settlement.retry(0)) for j in jobs])
        assert written == [Outcome.RETRIED, BUSY, Outcome.RETRIED]
        user.rollback()
    assert probe.count("jobs", "status = 'claimed'") == 1
    assert store.settle_many([(Claim.of(jobs[1]), Settlement.retry(0))]) == [Outcome.RETRIED]


@pytest.mark.parametrize("others", [0, 2], ids=["alone", "in_a_group"])
def test_a_refused_statement_is_undone_alone(
    store: PostgresStore, probe: Probe, others: int
) -> None:
    jobs = _claimed(store, 2 + others)
    items = [_refused(jobs[0]), (Claim.of(jobs[1]), Settlement.dead("x"))]
    items += [(Claim.of(j), Settlement.pause(delay=0)) for j in jobs[2:]]
    written = store.settle_many(items)
    assert isinstance(written[0], StoreError), written
    assert "0x00" in str(written[0])  # the NUL the claim holds
    assert written[1:] == [Outcome.DEAD] + [Outcome.PAUSED] * others
    assert probe.count("jobs", "status = 'claimed'") == 1
    assert probe.count("journal") == 1 + others


def test_completions_settle_beside_the_other_ends_in_one_statement(
    store: PostgresStore, probe: Probe
) -> None:
    jobs = _claimed(store, 2)
    written = store.settle_many(
        [
            (Claim.of(jobs[0]), Settlement.retry(0)),
            (Claim.of(jobs[1]), Settlement.complete({"n": 1})),
        ]
    )
    assert written == [Outcome.RETRIED, Outcome.COMPLETED]
    assert probe.count("jobs", "status = 'claimed'") == 0
    assert sorted(r[0] for r in probe.rows("SELECT outcome FROM {journal}")) == [
        "completed",
        "retried",
    ]
