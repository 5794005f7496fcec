"""The exactly-once checker itself: each broken promise, staged in SQL, is reported."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg import sql
from ulid import ULID

from tests.faults import effects
from tests.support import Probe, ledger
from venturi.models import NewJob
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


@pytest.fixture
def probe(store: PostgresStore, database_dsn: str, shared_prefix: str) -> Iterator[Probe]:
    ledger.create(database_dsn, shared_prefix)
    instance = Probe(database_dsn, shared_prefix)
    yield instance
    instance.close()


def _job(store: PostgresStore, *, complete: bool = True) -> tuple[ULID, int]:
    job_id = store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 60}, 1)
    if complete:
        assert store.settle(Claim.of(job), Settlement.complete())
    return job_id, job.run_count


def _effect(probe: Probe, job_id: ULID, run: int) -> None:
    probe.conn.execute(
        sql.SQL("INSERT INTO {} VALUES (%s, %s, 'w', 1)").format(
            ledger.effects_table(probe.prefix.name)
        ),
        (job_id.to_uuid(), run),
    )


def test_one_effect_per_completed_job_passes(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    done, run = _job(store)
    _effect(probe, done, run)
    _job(store, complete=False)  # running, nothing committed yet
    figures = effects.check(database_dsn, probe.prefix.name)
    assert (figures.jobs, figures.effect_rows, figures.duplicates) == (2, 1, 0)


@pytest.mark.parametrize("staged", ["missing", "doubled", "other run", "uncompleted", "no job"])
def test_each_violation_is_reported(
    store: PostgresStore, probe: Probe, database_dsn: str, staged: str
) -> None:
    done, run = _job(store)
    running, running_run = _job(store, complete=False)
    if staged != "missing":
        _effect(probe, done, run)
    if staged == "doubled":
        _effect(probe, done, run)
    elif staged == "other run":
        _effect(probe, done, run + 1)
    elif staged == "uncompleted":
        _effect(probe, running, running_run)
    elif staged == "no job":
        _effect(probe, ULID(), 1)
    with pytest.raises(AssertionError, match="1 exactly-once violations"):
        effects.check(database_dsn, probe.prefix.name)
