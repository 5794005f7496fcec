"""Passing a place on in the store: a completed run of a kind with a concurrency limit
claims the kind's next job in the statement that completes it, and only then, only
within the limit, and never for a run that lost its claim."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from tests.support import Probe
from venturi import NewJob
from venturi.errors import StoreError
from venturi.flow.limits import KindLimits, Rate
from venturi.models import JobRecord, Outcome
from venturi.prefix import Prefix
from venturi.settlements import BUSY, Claim, Settlement
from venturi.store.postgres import PostgresStore

LEASE = 30.0


def limited(store: PostgresStore, count: int, concurrency: int = 2) -> list[JobRecord]:
    """Declare ``k`` limited to ``concurrency``, enqueue ``count`` jobs, claim the places."""
    store.declare_kinds([KindLimits("k", concurrency=concurrency)], "test")
    store.enqueue_many([NewJob("k", {"n": n}) for n in range(count)])
    return store.claim("w", {"k": LEASE}, concurrency, limited={"k"})


def pass_on(store: PostgresStore, job: JobRecord) -> tuple[bool, bool, list[JobRecord]]:
    """(applied, busy, claimed) of completing ``job`` and passing its place on."""
    written, jobs = store.settle_and_pass(Claim.of(job), Settlement.complete(), "k", LEASE)
    return written is Outcome.COMPLETED, written is BUSY, jobs


def test_a_completed_run_passes_its_place_to_the_next_job(
    store: PostgresStore, probe: Probe
) -> None:
    first, second = limited(store, 4)
    applied, busy, (passed,) = pass_on(store, first)
    assert applied and not busy
    assert passed.kind == "k" and passed.claimed_by == "w" and passed.run_count == 1
    assert passed.payload == {"n": 2}  # the next in claim order
    assert probe.count("jobs", "status = 'claimed'") == 2  # never more than the limit
    assert probe.scalar("SELECT status FROM {jobs} WHERE id = %s", first.id.to_uuid()) == (
        "completed"
    )
    assert probe.count("journal", "outcome = 'completed'") == 1
    assert pass_on(store, passed)[2][0].payload == {"n": 3}
    assert pass_on(store, second)[2] == []  # nothing left: the place is free
    assert store.claim("w", {"k": LEASE}, 5, limited={"k"}) == []


@pytest.fixture(params=["own-pool", "borrowed-pool"])
def either_store(
    request: pytest.FixtureRequest, store: PostgresStore, database_dsn: str, prefix: str
) -> Iterator[PostgresStore]:
    """The store on its own pool (autocommit connections) and on a borrowed pool whose
    connections do not autocommit."""
    if request.param == "own-pool":
        yield store
        return
    with ConnectionPool(database_dsn, min_size=1, max_size=2, open=True) as pool:
        borrowed = PostgresStore.from_pool(pool, Prefix(prefix))
        yield borrowed
        borrowed.close()


def test_a_pass_whose_claim_fails_completes_nothing(
    either_store: PostgresStore, probe: Probe
) -> None:
    """The completion and the claim are one transaction: when the claim fails (here a
    lease no timestamp can hold, once it has a job to claim) the completion, which
    applied first, is rolled back with it, so no place opens that nobody takes."""
    first, _ = limited(either_store, 4)
    with pytest.raises(StoreError, match="interval out of range"):
        either_store.settle_and_pass(Claim.of(first), Settlement.complete(), "k", float("inf"))
    assert probe.scalar("SELECT status FROM {jobs} WHERE id = %s", first.id.to_uuid()) == (
        "claimed"
    )
    assert probe.count("journal") == 0
    assert probe.count("jobs", "status = 'claimed'") == 2
    applied, busy, (passed,) = pass_on(either_store, first)  # the connection is usable
    assert applied and not busy and passed.payload == {"n": 2}
    assert probe.count("journal", "outcome = 'completed'") == 1


def test_a_fenced_completion_passes_nothing(store: PostgresStore, probe: Probe) -> None:
    first, _ = limited(store, 4)
    assert store.cancel(first.id)  # the run lost its claim
    applied, busy, jobs = pass_on(store, first)
    assert (applied, busy, jobs) == (False, False, [])
    assert probe.count("jobs", "status = 'pending'") == 2


def test_a_run_completed_already_passes_nothing(store: PostgresStore, probe: Probe) -> None:
    """A completion retried after its first commit's reply was lost finds the run
    completed: no place was freed by it, so it must claim nothing."""
    first, _ = limited(store, 4)
    assert store.settle(Claim.of(first), Settlement.complete())
    assert pass_on(store, first) == (False, False, [])
    assert probe.count("jobs", "status = 'claimed'") == 1
    assert probe.count("jobs", "status = 'pending'") == 2


def test_a_completion_whose_row_is_locked_passes_nothing(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    first, _ = limited(store, 4)
    table = sql.Identifier(f"{store.prefix.name}_jobs")
    with psycopg.connect(database_dsn) as other:
        other.execute(
            sql.SQL("SELECT 1 FROM {} WHERE id = %s FOR UPDATE").format(table),
            (first.id.to_uuid(),),
        )
        assert pass_on(store, first) == (False, True, [])
    assert probe.count("jobs", "status = 'pending'") == 2


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: s.pause_kinds(["k"]), id="paused"),
        pytest.param(
            lambda s: s.declare_kinds([KindLimits("k", concurrency=1)], "t"), id="limit-lowered"
        ),
        pytest.param(
            lambda s: s.declare_kinds([KindLimits("k", concurrency=2, rate=Rate(9, 1.0))], "t"),
            id="now-rated",
        ),
        pytest.param(
            lambda s: s.declare_kinds([KindLimits("k", concurrency=2, key_concurrency=1)], "t"),
            id="now-keyed",
        ),
    ],
)
def test_a_run_completes_but_passes_nothing_when_the_kind_has_no_place_for_it(
    store: PostgresStore, probe: Probe, change: object
) -> None:
    first, _ = limited(store, 4)
    change(store)  # type: ignore[operator]
    assert pass_on(store, first) == (True, False, [])
    assert probe.count("jobs", "status = 'claimed'") == 1


def test_racing_passes_and_claims_never_exceed_the_limit(
    store: PostgresStore, probe: Probe
) -> None:
    """Threads passing places on while others claim and the test counts: the kind's
    claimed jobs never exceed its limit, and every job ends completed exactly once."""
    jobs, limit = 300, 3
    held = limited(store, jobs, limit)
    highest = 0
    done = threading.Event()
    errors: list[BaseException] = []

    def passer(job: JobRecord | None) -> None:
        try:
            while not done.is_set():
                if job is None:
                    got = store.claim("w", {"k": LEASE}, 1, limited={"k"})
                    job = got[0] if got else None
                    if job is None and probe_pending() == 0:
                        return
                    continue
                _, busy, passed = pass_on(store, job)
                if not busy:  # a claim's lock on the row: try again, as the worker does
                    job = passed[0] if passed else None
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def probe_pending() -> int:
        return int(store.reads.stats().total("pending"))

    threads = [threading.Thread(target=passer, args=(job,)) for job in held]
    threads += [threading.Thread(target=passer, args=(None,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        highest = max(highest, probe.count("jobs", "status = 'claimed'"))
    done.set()
    assert not errors
    assert highest <= limit
    assert probe.count("jobs", "status = 'completed' AND run_count = 1") == jobs
    assert probe.count("journal") == jobs
