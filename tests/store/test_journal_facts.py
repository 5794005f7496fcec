"""The journal's facts: what code reads about a run as data, written by the statement
that writes the run's journal row. Every settlement names its worker; a failure from an
exception carries its type and message; the reaper's rows say the run was lost; a
handler's (an integration's) own facts are kept as given. Rows that no run wrote have
none, and a prefix made before migration 0011 keeps its rows as they were."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import Probe, complete_many, migrate_before, recover, wait_until
from venturi import Queue
from venturi.context import JobContext
from venturi.errors import InvalidPayload
from venturi.models import JobRecord, NewJob, Outcome
from venturi.settlements import Claim, Settlement
from venturi.store.migrations import known_migrations
from venturi.store.postgres import PostgresStore

FACTS = {"app": {"step": 2, "ok": True}}

SETTLEMENTS: dict[str, tuple[Callable[..., Settlement], Outcome]] = {
    "complete": (lambda **f: Settlement.complete({"sent": True}, **f), Outcome.COMPLETED),
    "retry": (lambda **f: Settlement.retry(0, **f), Outcome.RETRIED),
    "pause": (lambda **f: Settlement.pause(delay=0, **f), Outcome.PAUSED),
    "dead": (lambda **f: Settlement.dead("poison", **f), Outcome.DEAD),
    "release": (Settlement.release, Outcome.RELEASED),
}


def _claimed(store: PostgresStore, max_attempts: int = 5, lease: float = 30) -> JobRecord:
    store.enqueue(NewJob("k", max_attempts=max_attempts))
    [claimed] = store.claim("worker-7", {"k": lease}, 1)
    return claimed


@pytest.mark.parametrize("name", list(SETTLEMENTS))
def test_each_settlement_journals_its_facts_and_its_worker(store: PostgresStore, name: str) -> None:
    build, outcome = SETTLEMENTS[name]
    job = _claimed(store)
    assert store.settle(Claim.of(job), build(facts=FACTS)) is outcome
    [entry] = store.reads.journal(job.id)
    assert entry.outcome is outcome
    assert entry.facts == {**FACTS, "worker": "worker-7"}


@pytest.mark.parametrize("name", list(SETTLEMENTS))
def test_a_settlement_without_facts_still_names_its_worker(store: PostgresStore, name: str) -> None:
    build, _ = SETTLEMENTS[name]
    job = _claimed(store)
    store.settle(Claim.of(job), build())
    [entry] = store.reads.journal(job.id)
    assert entry.facts == {"worker": "worker-7"}


def test_settle_many_journals_each_runs_own_facts(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("k") for _ in range(4)])
    jobs = store.claim("worker-7", {"k": 30}, 4)
    items = [(Claim.of(j), Settlement.retry(0, facts={"n": i})) for i, j in enumerate(jobs)]
    assert store.settle_many(items) == [Outcome.RETRIED] * 4
    for i, job in enumerate(jobs):
        [entry] = store.reads.journal(job.id)
        assert entry.facts == {"n": i, "worker": "worker-7"}


def test_a_completed_batch_journals_each_runs_own_facts(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("k") for _ in range(3)])
    jobs = store.claim("worker-7", {"k": 30}, 3)
    facts: list[dict[str, Any] | None] = [{"n": 0}, None, {"n": 2}]
    items = [(Claim.of(j), Settlement.complete(facts=f)) for j, f in zip(jobs, facts, strict=True)]
    assert complete_many(store, items).applied == {j.id for j in jobs}
    written = [store.reads.journal(j.id)[0].facts for j in jobs]
    assert written == [
        {"n": 0, "worker": "worker-7"},
        {"worker": "worker-7"},
        {"n": 2, "worker": "worker-7"},
    ]


def test_the_worker_fact_is_the_stores_not_a_handlers(store: PostgresStore) -> None:
    job = _claimed(store)
    store.settle(Claim.of(job), Settlement.complete(facts={"worker": "someone else"}))
    [entry] = store.reads.journal(job.id)
    assert entry.facts == {"worker": "worker-7"}


@pytest.mark.parametrize(("max_attempts", "outcome"), [(5, Outcome.RECOVERED), (1, Outcome.DEAD)])
def test_the_reapers_rows_say_the_run_was_lost(
    store: PostgresStore, max_attempts: int, outcome: Outcome
) -> None:
    job = _claimed(store, max_attempts=max_attempts, lease=0.001)
    [stale] = wait_until(store.find_stale, timeout=10, what="the lease to expire")
    assert recover(store, stale) is outcome
    [entry] = store.reads.journal(job.id)
    assert entry.facts == {"lost": "lease expired", "worker": "worker-7"}
    assert entry.note is not None and entry.note.startswith("lease held by worker-7 expired")


def test_rows_no_run_wrote_have_no_facts(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("k"))
    assert store.cancel(job_id, note="not needed")
    assert store.requeue(job_id)
    assert [(e.outcome, e.facts) for e in store.reads.journal(job_id)] == [
        (Outcome.CANCELLED, None),
        (Outcome.REQUEUED, None),
    ]


def test_facts_that_are_not_json_are_refused_before_anything_is_written(
    store: PostgresStore,
) -> None:
    job = _claimed(store)
    with pytest.raises(InvalidPayload, match="facts"):
        store.settle(Claim.of(job), Settlement.retry(0, facts={"when": object()}))
    assert store.reads.journal(job.id) == []


def test_a_refused_settlement_keeps_only_the_error_in_ascii() -> None:
    error = {"type": "app.Błąd", "message": "zła wartość"}
    settlement = Settlement.retry(0, note="boom", facts={"error": error, "app": {"x": 1}})
    fallback = settlement.fallback("the database refused a character")
    assert fallback.facts == {
        "error": {"type": "app.B\\u0142\\u0105d", "message": "z\\u0142a warto\\u015b\\u0107"}
    }
    assert fallback.note is not None and "the facts" in fallback.note.splitlines()[0]


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=2)
    instance.migrate()
    yield instance
    instance.close()


class Refused(Exception):
    """A handler's own exception, journaled by its import path."""


@pytest.mark.parametrize(("max_attempts", "outcome"), [(3, Outcome.RETRIED), (1, Outcome.DEAD)])
def test_a_handlers_exception_is_journaled_with_its_type_and_message(
    queue: Queue, max_attempts: int, outcome: Outcome
) -> None:
    @queue.job("boom", max_attempts=max_attempts)
    def boom() -> None:
        raise Refused("card declined: 4242")

    job_id = boom.enqueue()
    queue.drain()
    [entry] = queue.journal(job_id)
    assert entry.outcome is outcome
    assert entry.facts is not None
    assert entry.facts["error"] == {
        "type": f"{__name__}.Refused",
        "message": "card declined: 4242",
    }
    assert isinstance(entry.facts["worker"], str) and entry.facts["worker"]
    assert entry.note is not None and "Traceback" in entry.note  # the note is for people


def test_a_handlers_facts_are_journaled_with_its_run(queue: Queue) -> None:
    @queue.job("noted", context=True)
    def noted(ctx: JobContext) -> int:
        ctx.facts["integration"] = {"started_at": "2026-01-02T03:04:05+00:00"}
        ctx.note("a line for people")
        return 1

    job_id = noted.enqueue()
    queue.drain()
    [entry] = queue.journal(job_id)
    assert entry.outcome is Outcome.COMPLETED
    assert entry.note == "a line for people"
    assert entry.facts is not None
    assert entry.facts["integration"] == {"started_at": "2026-01-02T03:04:05+00:00"}


@pytest.mark.parametrize("value", [object(), "NUL \x00 inside"], ids=["object", "nul"])
def test_a_handlers_facts_that_jsonb_refuses_fail_the_run_with_a_note(
    queue: Queue, value: object
) -> None:
    @queue.job("odd", context=True, max_attempts=1)
    def odd(ctx: JobContext) -> None:
        ctx.facts["when"] = value

    job_id = odd.enqueue()
    queue.drain()
    [entry] = queue.journal(job_id)
    assert entry.outcome is Outcome.DEAD
    assert entry.note is not None and "run outcome not storable" in entry.note
    assert entry.facts is not None and "when" not in entry.facts


def test_migration_0011_keeps_the_journal_rows_written_before_it(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    """A prefix migrated by the code before 0011, with journal rows, gains the facts
    column with every row as it was and its facts null."""
    later = [name for _, name in known_migrations() if name >= "0011"]
    assert migrate_before(database_dsn, prefix, "0011") == "0011_journal_facts"
    probe = Probe(database_dsn, prefix)
    columns = "id, job_id, kind, run_no, recorded_at, outcome, note, attachment"
    try:
        probe.rows("INSERT INTO {jobs} (id, kind) SELECT gen_random_uuid(), 'old'")
        probe.rows(
            "INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment)"
            " SELECT id, kind, n, o, 'lease held by w expired', '{{\"a\": 1}}'::jsonb"
            " FROM {jobs}, unnest(%s::text[]) WITH ORDINALITY AS u (o, n)",
            ["retried", "recovered", "completed"],
        )
        before = probe.rows(f"SELECT {columns} FROM {{journal}} ORDER BY id")
        store = make_store(prefix)
        assert store.migrate() == later
        assert probe.rows(f"SELECT {columns} FROM {{journal}} ORDER BY id") == before
        assert probe.rows("SELECT count(*) FROM {journal} WHERE facts IS NULL") == [(3,)]
        [job_id] = {row[1] for row in before}
        assert [e.facts for e in store.reads.journal(job_id)] == [None, None, None]
        store.check_schema()
    finally:
        probe.close()


def test_a_transactional_runs_facts_are_journaled_with_its_completion(queue: Queue) -> None:
    @queue.job("booked", transactional=True, context=True)
    def booked(ctx: JobContext) -> None:
        ctx.conn.execute("SELECT 1")
        ctx.facts["integration"] = {"rows": 1}

    job_id = booked.enqueue()
    queue.drain()
    [entry] = queue.journal(job_id)
    assert entry.outcome is Outcome.COMPLETED
    assert entry.facts is not None and entry.facts["integration"] == {"rows": 1}
