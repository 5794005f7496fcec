"""Dedup: one pending job per (kind, dedup_key); duplicates keep, replace or merge into it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.support import Listener, Probe
from venturi.errors import DuplicateJob
from venturi.models import JobStatus, NewJob, Outcome
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


def _sum(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {"n": old["n"] + new["n"]}


def test_keep_returns_the_pending_holder_and_journals_the_merge(
    store: PostgresStore, probe: Probe
) -> None:
    first = store.enqueue(NewJob("k", {"v": 1}, priority=1, dedup_key="user:1"))
    second = store.enqueue(NewJob("k", {"v": 2}, priority=9, dedup_key="user:1"))
    assert second == first
    job = store.reads.get(first)
    assert job is not None and job.payload == {"v": 1} and job.priority == 1
    [entry] = store.reads.journal(first)
    assert entry.outcome is Outcome.MERGED and entry.run_no == 0
    assert "kept" in (entry.note or "")
    assert probe.count("jobs") == 1


def test_replace_overwrites_payload_priority_and_visibility(
    store: PostgresStore, probe: Probe
) -> None:
    at = datetime(2032, 1, 1, tzinfo=UTC)
    first = store.enqueue(NewJob("k", {"v": 1}, dedup_key="d", on_duplicate="replace"))
    second = store.enqueue(
        NewJob(
            "k", {"v": 2}, priority=5, at=at, max_attempts=2, dedup_key="d", on_duplicate="replace"
        )
    )
    assert second == first
    job = store.reads.get(first)
    assert job is not None
    assert (job.payload, job.priority, job.visible_at, job.max_attempts) == ({"v": 2}, 5, at, 2)
    assert [e.outcome for e in store.reads.journal(first)] == [Outcome.MERGED]
    assert probe.count("jobs") == 1


def test_a_merge_function_combines_payloads(store: PostgresStore, probe: Probe) -> None:
    first = store.enqueue(NewJob("k", {"n": 1}, dedup_key="d", on_duplicate=_sum))
    for _ in range(3):
        assert store.enqueue(NewJob("k", {"n": 2}, dedup_key="d", on_duplicate=_sum)) == first
    job = store.reads.get(first)
    assert job is not None and job.payload == {"n": 7}
    entries = store.reads.journal(first)
    assert [e.outcome for e in entries] == [Outcome.MERGED] * 3
    assert all("_sum" in (e.note or "") for e in entries)
    assert probe.count("jobs") == 1


@pytest.mark.parametrize("on_duplicate", ["keep", "replace", _sum])
def test_a_new_key_creates_a_job_and_notifies(
    store: PostgresStore, listener: Listener, on_duplicate: Any
) -> None:
    job_id = store.enqueue(NewJob("k", {"n": 1}, dedup_key="d", on_duplicate=on_duplicate))
    assert listener.receive(1) == ["k"]
    job = store.reads.get(job_id)
    assert job is not None and job.dedup_key == "d" and job.status is JobStatus.PENDING
    assert store.reads.journal(job_id) == []


def test_the_same_key_in_another_kind_is_another_job(store: PostgresStore) -> None:
    a = store.enqueue(NewJob("a", dedup_key="d"))
    b = store.enqueue(NewJob("b", dedup_key="d"))
    assert a != b


def test_a_claimed_holder_does_not_absorb_new_work(store: PostgresStore) -> None:
    first = store.enqueue(NewJob("k", {"v": 1}, dedup_key="d"))
    [running] = store.claim("w", {"k": 30}, 1)
    assert running.id == first
    second = store.enqueue(NewJob("k", {"v": 2}, dedup_key="d"))
    assert second != first
    assert store.reads.journal(first) == []


@pytest.mark.parametrize(
    "settlement",
    [Settlement.retry(0), Settlement.pause(0), Settlement.release()],
    ids=["retry", "pause", "release"],
)
def test_a_run_repending_while_a_newer_job_holds_the_key_gives_it_up(
    store: PostgresStore, settlement: Settlement
) -> None:
    first = store.enqueue(NewJob("k", dedup_key="d"))
    [running] = store.claim("w", {"k": 30}, 1)
    second = store.enqueue(NewJob("k", dedup_key="d"))
    assert store.settle(Claim.of(running), settlement) is settlement.requested
    old, new = store.reads.get(first), store.reads.get(second)
    assert old is not None and old.status is JobStatus.PENDING and old.dedup_key is None
    assert new is not None and new.status is JobStatus.PENDING and new.dedup_key == "d"


def test_a_run_repending_with_its_key_free_keeps_it(store: PostgresStore) -> None:
    first = store.enqueue(NewJob("k", dedup_key="d"))
    [running] = store.claim("w", {"k": 30}, 1)
    assert store.settle(Claim.of(running), Settlement.retry(0)) is Outcome.RETRIED
    job = store.reads.get(first)
    assert job is not None and job.dedup_key == "d"
    assert store.enqueue(NewJob("k", dedup_key="d")) == first


def test_a_finished_holder_frees_the_key(store: PostgresStore) -> None:
    first = store.enqueue(NewJob("k", dedup_key="d"))
    [running] = store.claim("w", {"k": 30}, 1)
    assert store.settle(Claim.of(running), Settlement.complete())
    assert store.enqueue(NewJob("k", dedup_key="d")) != first


def test_requeue_onto_a_held_key_is_refused_and_writes_nothing(
    store: PostgresStore, probe: Probe
) -> None:
    first = store.enqueue(NewJob("k", dedup_key="d"))
    [running] = store.claim("w", {"k": 30}, 1)
    assert store.settle(Claim.of(running), Settlement.dead("poison"))
    store.enqueue(NewJob("k", dedup_key="d"))
    journal_rows = probe.count("journal")
    with pytest.raises(DuplicateJob, match="dedup key"):
        store.requeue(first)
    job = store.reads.get(first)
    assert job is not None and job.status is JobStatus.DEAD
    assert probe.count("journal") == journal_rows


def test_the_unique_index_refuses_a_second_pending_job_with_one_key(
    store: PostgresStore, probe: Probe
) -> None:
    store.enqueue(NewJob("k", dedup_key="d"))
    with pytest.raises(psycopg.errors.UniqueViolation):
        probe.rows("INSERT INTO {jobs} (id, kind, dedup_key) VALUES (gen_random_uuid(), 'k', 'd')")
