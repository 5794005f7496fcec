"""Values the database would refuse are refused before any SQL (max_attempts past int4,
worker names, history cursors); and a settlement the database refuses anyway is written
again as the same outcome without what was refused, never left to a lapsed lease."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import Probe, complete_many
from venturi import ConfigurationError, InvalidJob, Queue
from venturi.durations import MAX_DELAY_SECONDS
from venturi.models import JobRecord, NewJob, Outcome
from venturi.settlements import Claim, SettleAction, Settlement
from venturi.store.postgres import PostgresStore

INT4_MAX = 2**31 - 1


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=4)
    instance.migrate()
    yield instance
    instance.close()


@pytest.mark.parametrize("attempts", [INT4_MAX + 1, 2**40])
def test_max_attempts_past_int4_is_refused_before_sql(
    store: PostgresStore, probe: Probe, attempts: int
) -> None:
    with pytest.raises(InvalidJob, match=rf"max_attempts .* at most {INT4_MAX}"):
        store.enqueue(NewJob("k", max_attempts=attempts))
    assert probe.scalar("SELECT count(*) FROM {jobs}") == 0


def test_max_attempts_at_int4_max_is_stored(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("k", max_attempts=INT4_MAX))
    job = store.reads.get(job_id)
    assert job is not None and job.max_attempts == INT4_MAX


def test_a_kind_registered_with_too_many_attempts_is_refused(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="max_attempts"):
        queue.job("k", max_attempts=2**40)(lambda: None)


@pytest.mark.parametrize("form", [str, lambda i: i, lambda i: i.to_uuid()])
def test_history_before_takes_an_id(queue: Queue, form: Any) -> None:
    @queue.job("k")
    def k() -> None: ...

    ids = [k.enqueue() for _ in range(3)]
    page = queue.history(before=form(ids[2]))
    assert [j.id for j in page] == [ids[1], ids[0]]


def test_history_before_refuses_what_is_no_id(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="job id"):
        queue.history(before=12345)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        (12345, "must be a str"),
        ("", "must not be empty"),
        ("x" * 1_000_000, "at most 512"),
        ("w\x00", "NUL"),
        ("w\ud800", "Unicode"),
    ],
)
def test_a_worker_name_the_database_cannot_keep_is_refused(
    queue: Queue, name: object, rule: str
) -> None:
    @queue.job("k")
    def k() -> None: ...

    with pytest.raises(ConfigurationError, match=rf"worker name .*{rule}"):
        queue.worker(name=name)  # type: ignore[arg-type]


# -- the fallback ----------------------------------------------------------------------


def _claimed(store: PostgresStore, n: int = 1) -> list[JobRecord]:
    store.enqueue_many([NewJob("k", max_attempts=5) for _ in range(n)])
    return store.claim("w", {"k": 30}, n)


def _refused_attachment() -> Settlement:
    """A completion whose attachment JSON the server refuses (jsonb holds no NUL), past
    the checks that would catch it."""
    settlement = Settlement.complete(attachment={"ok": True}, note="done")
    settlement.__dict__["attachment_json"] = '{"text": "\\u0000"}'
    return settlement


def _unchecked(action: SettleAction, **fields: Any) -> Settlement:
    """A settlement built past the named constructors' checks."""
    settlement = Settlement(action)
    for name, value in fields.items():
        object.__setattr__(settlement, name, value)
    return settlement


def _journal(store: PostgresStore, job: JobRecord) -> tuple[Outcome, str]:
    (entry,) = store.reads.journal(job.id)
    assert entry.note is not None
    return entry.outcome, entry.note


def test_a_refused_completion_completes_without_its_attachment(store: PostgresStore) -> None:
    (job,) = _claimed(store)
    assert store.settle(Claim.of(job), _refused_attachment()) is Outcome.COMPLETED
    after = store.reads.get(job.id)
    assert after is not None and (after.status, after.run_count) == ("completed", 1)
    outcome, note = _journal(store, job)
    assert outcome is Outcome.COMPLETED and "done" in note
    assert "could not be stored" in note and "22P05" in note
    (entry,) = store.reads.journal(job.id)
    assert entry.attachment is None


def test_one_refused_completion_in_a_batch_leaves_the_others_whole(store: PostgresStore) -> None:
    jobs = _claimed(store, 5)
    items = [(Claim.of(j), Settlement.complete({"n": i})) for i, j in enumerate(jobs)]
    items[2] = (items[2][0], _refused_attachment())
    outcome = complete_many(store, items)
    assert outcome.applied == {j.id for j in jobs} and not outcome.busy
    for i, job in enumerate(jobs):
        (entry,) = store.reads.journal(job.id)
        assert entry.outcome is Outcome.COMPLETED
        assert entry.attachment == (None if i == 2 else {"n": i})


@pytest.mark.parametrize(
    ("settlement", "outcome", "status"),
    [
        (lambda: _unchecked(SettleAction.RETRY, delay=1e16), Outcome.RETRIED, "pending"),
        (lambda: _unchecked(SettleAction.PAUSE, delay=1e16), Outcome.PAUSED, "pending"),
        (lambda: _unchecked(SettleAction.DEAD, note="a\x00b"), Outcome.DEAD, "dead"),
        (
            lambda: _unchecked(SettleAction.RETRY, delay=0.0, note="a\ud800b"),
            Outcome.RETRIED,
            "pending",
        ),
    ],
    ids=["retry-delay", "pause-delay", "dead-nul", "retry-surrogate"],
)
def test_a_refused_settlement_is_written_as_the_same_outcome(
    store: PostgresStore, settlement: Any, outcome: Outcome, status: str
) -> None:
    (job,) = _claimed(store)
    assert store.settle(Claim.of(job), settlement()) is outcome
    after = store.reads.get(job.id)
    assert after is not None and (after.status, after.run_count) == (status, 1)
    assert after.visible_at <= datetime.now(UTC) + timedelta(seconds=MAX_DELAY_SECONDS + 60)
    written, note = _journal(store, job)
    assert written is outcome and "could not be stored" in note


def test_settle_many_writes_a_refused_one_as_its_fallback_beside_the_others(
    store: PostgresStore,
) -> None:
    jobs = _claimed(store, 4)
    items = [(Claim.of(j), Settlement.retry(60, note=f"r{i}")) for i, j in enumerate(jobs)]
    items[1] = (items[1][0], _unchecked(SettleAction.RETRY, delay=1e16, note="far"))
    assert store.settle_many(items) == [Outcome.RETRIED] * 4
    notes = [_journal(store, j)[1] for j in jobs]
    assert notes[0] == "r0" and notes[2] == "r2" and notes[3] == "r3"
    assert "could not be stored" in notes[1] and "far" in notes[1]
