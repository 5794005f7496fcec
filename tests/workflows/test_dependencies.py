"""Jobs with parents: status ``waiting`` until every parent completed, released in the
parent's fenced completion transaction; dead or cancelled parents cancel (or run) them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Probe, complete_many, postgres_store, recover
from venturi import InvalidJob, JobContext, JobStatus, NewJob, Queue
from venturi.settlements import Claim, Settlement
from venturi.store.ids import new_id


def _status(queue: Queue, job_id: Any) -> str:
    record = queue.get(job_id)
    assert record is not None
    return record.status.value


def _claim_one(queue: Queue, kind: str, worker: str = "w1") -> Claim:
    jobs = queue.store.claim(worker, {kind: 60.0}, 1)
    assert len(jobs) == 1
    return Claim.of(jobs[0])


def test_a_child_waits_outside_the_claim_until_its_parent_completes(queue: Queue) -> None:
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", {"x": 1}, depends_on=[parent])
    assert _status(queue, child) == "waiting"
    assert queue.store.claim("w", {"child": 60.0}, 10) == [], "a waiting job is never claimed"
    claim = _claim_one(queue, "parent")
    assert _status(queue, child) == "waiting", "a running parent releases nothing"
    assert queue.store.settle(claim, Settlement.complete({"rows": 3})) == "completed"
    # Released by the completion's own transaction: visible as soon as it returns.
    record = queue.get(child)
    assert record is not None and record.status == "pending" and record.parents_left == 0
    assert queue.store.reads.parent_results(child) == {parent: {"rows": 3}}


def test_a_fenced_zombie_completion_releases_nothing(queue: Queue, probe: Probe) -> None:
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", depends_on=[parent])
    zombie = _claim_one(queue, "parent", "zombie")
    probe.rows("UPDATE {jobs} SET claim_expires_at = now() - interval '1 s'")
    stale = queue.store.find_stale()
    assert recover(queue.store, stale[0]) == "recovered"
    live = _claim_one(queue, "parent", "live")
    assert queue.store.settle(zombie, Settlement.complete()) is None
    assert complete_many(queue.store, [(zombie, Settlement.complete())]).applied == frozenset()
    assert _status(queue, child) == "waiting"
    assert probe.count("deps", "open") == 1
    assert queue.store.settle(live, Settlement.complete()) == "completed"
    assert _status(queue, child) == "pending"


def test_batched_completions_release_a_fan_in_child_once(queue: Queue, probe: Probe) -> None:
    parents = queue.enqueue_many([queue.new_job("parent") for _ in range(5)])
    child = queue.enqueue("child", depends_on=parents)
    claims = [Claim.of(j) for j in queue.store.claim("w", {"parent": 60.0}, 5)]
    first = complete_many(queue.store, [(c, Settlement.complete()) for c in claims[:3]])
    assert len(first.applied) == 3
    record = queue.get(child)
    assert record is not None and record.status == "waiting" and record.parents_left == 2
    complete_many(queue.store, [(c, Settlement.complete()) for c in claims[3:]])
    record = queue.get(child)
    assert record is not None and record.status == "pending" and record.parents_left == 0
    assert probe.count("deps", "open") == 0


def test_a_dead_parent_cancels_its_descendants_with_a_note_naming_it(queue: Queue) -> None:
    parent = queue.enqueue("parent", max_attempts=1)
    child = queue.enqueue("child", depends_on=[parent])
    grandchild = queue.enqueue("grandchild", depends_on=[child])
    runs_anyway = queue.enqueue("child", depends_on=[parent], on_parent_failure="run")
    claim = _claim_one(queue, "parent")
    assert queue.store.settle(claim, Settlement.retry(note="broken")) == "dead"
    assert _status(queue, child) == "cancelled"
    assert _status(queue, grandchild) == "cancelled"
    assert queue.journal(child)[-1].note == f"parent {parent} ended dead"
    assert queue.journal(grandchild)[-1].note == f"parent {child} ended cancelled"
    assert _status(queue, runs_anyway) == "pending"
    assert queue.store.reads.parent_results(runs_anyway) == {parent: None}


def test_settle_dead_and_cancel_settle_children_too(queue: Queue) -> None:
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", depends_on=[parent])
    claim = _claim_one(queue, "parent")
    assert queue.store.settle(claim, Settlement.dead("poison")) == "dead"
    assert _status(queue, child) == "cancelled"
    other = queue.enqueue("parent")
    waiting = queue.enqueue("child", depends_on=[other])
    below = queue.enqueue("child", depends_on=[waiting])
    assert queue.cancel(waiting), "a waiting job can be cancelled"
    assert _status(queue, below) == "cancelled"
    assert queue.journal(below)[-1].note == f"parent {waiting} ended cancelled"
    assert queue.cancel(other)
    assert _status(queue, waiting) == "cancelled", "already cancelled, untouched"


def test_enqueue_after_finished_parents(queue: Queue) -> None:
    done = queue.enqueue("parent")
    queue.store.settle(_claim_one(queue, "parent"), Settlement.complete(7))
    dead = queue.enqueue("parent")
    queue.store.settle(_claim_one(queue, "parent"), Settlement.dead())
    assert _status(queue, queue.enqueue("child", depends_on=[done])) == "pending"
    cancelled = queue.enqueue("child", depends_on=[done, dead])
    assert _status(queue, cancelled) == "cancelled"
    assert queue.journal(cancelled)[-1].note == f"parent {dead} ended dead"
    running = queue.enqueue("child", depends_on=[dead], on_parent_failure="run")
    assert _status(queue, running) == "pending"


def test_bad_after_is_refused_and_nothing_is_written(queue: Queue, probe: Probe) -> None:
    parent = queue.enqueue("parent")
    before = probe.count("jobs")
    with pytest.raises(InvalidJob, match="does not exist"):
        queue.enqueue("child", depends_on=[parent, new_id()])
    with pytest.raises(InvalidJob, match="does not exist"):
        queue.enqueue_many(
            [queue.new_job("child", depends_on=[parent]), NewJob("c", depends_on=[new_id()])]
        )
    with pytest.raises(InvalidJob, match="list of job ids"):
        queue.enqueue("child", depends_on=parent)
    with pytest.raises(InvalidJob, match="neither a ULID"):
        queue.enqueue("child", depends_on=["nope"])
    with pytest.raises(InvalidJob, match="on_parent_failure"):
        queue.enqueue("child", depends_on=[parent], on_parent_failure="ignore")
    with pytest.raises(InvalidJob, match="dedup_key"):
        queue.enqueue("child", depends_on=[parent], dedup_key="k")
    with pytest.raises(InvalidJob, match="separately"):
        queue.enqueue_many([NewJob("c", depends_on=[parent]), NewJob("d", dedup_key="k")])
    assert probe.count("jobs") == before
    assert probe.count("deps") == 0


def test_enqueue_many_and_the_job_function_take_after(queue: Queue) -> None:
    seen: list[dict[Any, Any]] = []

    @queue.job("step", context=True)
    def step(ctx: JobContext, n: int) -> int:
        seen.append(dict(ctx.parents))
        return n * 10

    first = step.enqueue(n=1)
    second = step.enqueue_with({"n": 2}, depends_on=[first])
    third, fourth = queue.enqueue_many(
        [
            queue.new_job("step", {"n": 3}, depends_on=[first, second]),
            queue.new_job("step", {"n": 4}),
        ]
    )
    assert [_status(queue, i) for i in (second, third, fourth)] == ["waiting", "waiting", "pending"]
    assert queue.drain() == 4
    assert seen[0] == {} and seen[1] == {}
    assert {first: 10} in seen and {first: 10, second: 20} in seen
    assert queue.result(third, timeout=5) == 30


def test_a_caller_transaction_rolled_back_writes_no_child(queue: Queue, database_dsn: str) -> None:
    import psycopg

    parent = queue.enqueue("parent")
    with psycopg.connect(database_dsn) as conn:
        child = queue.enqueue("child", depends_on=[parent], conn=conn)
        conn.rollback()
    assert queue.get(child) is None
    with psycopg.connect(database_dsn) as conn:
        child = queue.enqueue("child", depends_on=[parent], conn=conn)
        conn.commit()
    assert _status(queue, child) == "waiting"


def test_the_waiting_status_is_counted_and_filtered(queue: Queue) -> None:
    parent = queue.enqueue("parent")
    queue.enqueue("child", depends_on=[parent])
    assert queue.stats().total("waiting") == 1
    assert [r.kind for r in queue.history(status="waiting")] == ["child"]
    assert JobStatus("waiting") is JobStatus.WAITING and not JobStatus.WAITING.terminal
    assert postgres_store(queue).reads.finished_jobs([parent]) == []
