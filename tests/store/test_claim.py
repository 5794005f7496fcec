"""Claim: up to n due jobs of the given kinds, highest priority first, then oldest, at or
above a priority floor; stamped with owner, lease and the next run epoch."""

from __future__ import annotations

from datetime import timedelta

from tests.support import Probe, wait_until
from venturi.models import JobStatus, NewJob
from venturi.store.postgres import PostgresStore


def test_claim_stamps_owner_lease_and_epoch(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("k", {"a": 1}))
    before = store.now()
    [job] = store.claim("worker-1", {"k": 45}, 5)
    after = store.now()
    assert job.id == job_id and job.payload == {"a": 1}
    assert job.status is JobStatus.CLAIMED
    assert job.claimed_by == "worker-1"
    assert job.run_count == 1
    assert job.claim_expires_at is not None
    assert before + timedelta(seconds=45) <= job.claim_expires_at <= after + timedelta(seconds=45)
    assert store.reads.get(job_id) == job


def test_a_claimed_job_is_not_claimed_again(store: PostgresStore) -> None:
    store.enqueue(NewJob("k"))
    assert len(store.claim("a", {"k": 30}, 5)) == 1
    assert store.claim("b", {"k": 30}, 5) == []


def test_claim_order_is_priority_then_oldest(store: PostgresStore) -> None:
    now = store.now()
    specs = [  # (name, priority, seconds ago it became visible)
        ("low-old", 0, 300),
        ("high-new", 5, 10),
        ("mid-old", 1, 200),
        ("high-old", 5, 100),
        ("low-new", 0, 20),
        ("negative", -3, 1000),
        ("mid-new", 1, 30),
    ]
    for name, priority, ago in specs:
        store.enqueue(
            NewJob("k", {"name": name}, priority=priority, at=now - timedelta(seconds=ago))
        )
    order = []
    while batch := store.claim("w", {"k": 30}, 1):
        order.append(batch[0].payload["name"])
    assert order == ["high-old", "high-new", "mid-old", "mid-new", "low-old", "low-new", "negative"]


def test_a_batch_comes_back_in_claim_order_across_kinds(store: PostgresStore) -> None:
    now = store.now()
    store.enqueue(NewJob("a", {"n": "a0"}, priority=0, at=now - timedelta(seconds=50)))
    store.enqueue(NewJob("b", {"n": "b9"}, priority=9, at=now - timedelta(seconds=1)))
    store.enqueue(NewJob("a", {"n": "a9"}, priority=9, at=now - timedelta(seconds=5)))
    store.enqueue(NewJob("b", {"n": "b0"}, priority=0, at=now - timedelta(seconds=60)))
    jobs = store.claim("w", {"a": 30, "b": 30}, 3)
    assert [j.payload["n"] for j in jobs] == ["a9", "b9", "b0"]


def test_claim_takes_at_most_the_limit(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("a") for _ in range(10)] + [NewJob("b") for _ in range(10)])
    assert len(store.claim("w", {"a": 30, "b": 30}, 7)) == 7
    assert len(store.claim("w", {"a": 30, "b": 30}, 100)) == 13
    assert store.claim("w", {"a": 30}, 0) == []
    assert store.claim("w", {}, 5) == []


def test_only_the_given_kinds_are_claimed(store: PostgresStore, probe: Probe) -> None:
    store.enqueue_many([NewJob("a"), NewJob("b"), NewJob("c"), NewJob("a.b")])
    jobs = store.claim("w", {"a": 30, "c": 30}, 10)
    assert sorted(j.kind for j in jobs) == ["a", "c"]
    assert probe.count("jobs", "status = 'pending'") == 2


def test_each_kind_gets_its_own_lease(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("short"), NewJob("long")])
    jobs = {j.kind: j for j in store.claim("w", {"short": 5, "long": 3600}, 10)}
    short, long = jobs["short"].claim_expires_at, jobs["long"].claim_expires_at
    assert short is not None and long is not None
    assert timedelta(seconds=3590) < long - short < timedelta(seconds=3600)


def test_the_priority_floor_leaves_lower_priorities(store: PostgresStore) -> None:
    for priority in (-5, 0, 2, 3, 10):
        store.enqueue(NewJob("k", {"p": priority}, priority=priority))
    jobs = store.claim("w", {"k": 30}, 10, priority_floor=2)
    assert sorted(j.priority for j in jobs) == [2, 3, 10]
    rest = store.claim("w", {"k": 30}, 10)
    assert sorted(j.priority for j in rest) == [-5, 0]


def test_future_jobs_wait_until_visible_in_database_time(store: PostgresStore) -> None:
    at = store.now() + timedelta(seconds=1)
    job_id = store.enqueue(NewJob("k", at=at))
    assert store.claim("w", {"k": 30}, 10) == []
    [job] = wait_until(
        lambda: store.claim("w", {"k": 30}, 10),
        timeout=10,
        what="the delayed job to become claimable",
    )
    assert job.id == job_id
    assert store.now() >= at


def test_next_visible_at(store: PostgresStore) -> None:
    assert store.next_visible_at(["k"]) is None
    assert store.next_visible_at([]) is None
    now = store.now()
    store.enqueue(NewJob("k", at=now + timedelta(seconds=90)))
    store.enqueue(NewJob("k", at=now + timedelta(seconds=60)))
    store.enqueue(NewJob("other", at=now + timedelta(seconds=5)))
    assert store.next_visible_at(["k"]) == now + timedelta(seconds=60)
    assert store.next_visible_at(["k", "other"]) == now + timedelta(seconds=5)
    assert store.next_visible_at(["nothing"]) is None


def test_next_visible_at_and_seconds_until_visible_respect_the_priority_floor(
    store: PostgresStore,
) -> None:
    store.enqueue(NewJob("k", {}, priority=-5))
    store.enqueue(NewJob("k", {}, priority=3, delay=30))
    assert store.seconds_until_visible(["k"]) == 0.0
    waiting = store.seconds_until_visible(["k"], priority_floor=0)
    assert waiting is not None and 25 < waiting <= 30
    assert store.seconds_until_visible(["k"], priority_floor=4) is None
    assert store.next_visible_at(["k"], priority_floor=4) is None
