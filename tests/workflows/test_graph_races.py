"""Races on the real server: concurrent parents release a fan-in child exactly once;
enqueues racing a parent's completion never leave a child stuck; SIGKILLed workers in
the middle of a 1,000-job graph leave no child waiting and run none early; the scale of
10,000 children under one parent and a fan-in after 1,000 parents; and the index probe."""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import Probe, complete_many, ledger, wait_until
from tests.support.fleet import Fleet, WorkerProcess
from tests.workflows.invariants import graph_violations
from venturi import Queue, Worker
from venturi.settlements import Claim, Settlement

pytestmark = pytest.mark.slow


def _claims(queue: Queue, kind: str, count: int) -> list[Claim]:
    claims: list[Claim] = []
    while len(claims) < count:
        claims += [Claim.of(j) for j in queue.store.claim("w", {kind: 60.0}, count - len(claims))]
    return claims


def _run_threads(targets: list[Any]) -> None:
    threads = [threading.Thread(target=t) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


def _fan_in_round(queue: Queue, probe: Probe, batched: bool) -> None:
    parents = queue.enqueue_many([queue.new_job("parent") for _ in range(48)])
    child = queue.enqueue("child", depends_on=parents)
    claims = _claims(queue, "parent", len(parents))
    barrier = threading.Barrier(16)

    def settle(mine: list[Claim]) -> None:
        barrier.wait()
        if batched:
            for i in range(0, len(mine), 2):
                pair = [(c, Settlement.complete()) for c in mine[i : i + 2]]
                while complete_many(queue.store, pair).busy:
                    pass
        else:
            for claim in mine:
                assert queue.store.settle(claim, Settlement.complete()) == "completed"

    _run_threads([lambda n=n: settle(claims[n::16]) for n in range(16)])
    record = queue.get(child)
    assert record is not None and (record.status, record.parents_left) == ("pending", 0)
    assert probe.count("journal", "job_id = %s", child.to_uuid()) == 0
    assert probe.count("deps", "open") == 0


@pytest.mark.parametrize("batched", [False, True])
def test_parents_completing_on_many_threads_release_a_fan_in_child_once(
    queue: Queue, probe: Probe, batched: bool
) -> None:
    for _ in range(3):
        _fan_in_round(queue, probe, batched)
        probe.rows("DELETE FROM {jobs}")


def _enqueue_race_round(queue: Queue, probe: Probe) -> None:
    parent = queue.enqueue("parent")
    (claim,) = _claims(queue, "parent", 1)
    barrier = threading.Barrier(9)
    made: list[Any] = []

    def enqueue_children() -> None:
        barrier.wait()
        made.extend(queue.enqueue("child", depends_on=[parent]) for _ in range(20))

    def complete() -> None:
        barrier.wait()
        while complete_many(queue.store, [(claim, Settlement.complete())]).busy:
            pass

    _run_threads([enqueue_children] * 8 + [complete])
    assert len(made) == 160
    assert probe.count("jobs", "status = 'waiting'") == 0, "a child missed its release"
    assert probe.count("jobs", "status = 'pending' AND parents_left = 0") == 160


def test_children_enqueued_while_their_parent_completes_are_never_stuck(
    queue: Queue, probe: Probe
) -> None:
    for _ in range(5):
        _enqueue_race_round(queue, probe)
        probe.rows("DELETE FROM {jobs}")


@pytest.mark.timeout(900)
def test_ten_thousand_children_of_one_parent_and_a_fan_in_after_a_thousand(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    ran: list[int] = []

    @queue.job("leaf")
    def leaf(n: int) -> int:
        ran.append(n)
        return n

    root = queue.enqueue("leaf", {"n": -1})
    children = queue.enqueue_many(
        [queue.new_job("leaf", {"n": n}, depends_on=[root]) for n in range(10_000)]
    )
    fan_in = queue.enqueue("leaf", {"n": 10_000}, depends_on=children[:1000])
    assert probe.count("jobs", "status = 'waiting'") == 10_001
    (claim,) = _claims(queue, "leaf", 1)
    assert queue.store.settle(claim, Settlement.complete(-1)) == "completed"
    assert probe.count("jobs", "status = 'pending'") == 10_000
    start_worker(concurrency=8)
    wait_until(lambda: probe.count("jobs", "status = 'completed'") == 10_002, 600, 0.2)
    assert sorted(ran) == list(range(10_001))
    assert ran[-1] == 10_000, "the fan-in ran last"
    record = queue.get(fan_in)
    assert record is not None and record.status == "completed"
    assert len(queue.store.reads.parent_results(fan_in)) == 1000
    assert probe.count("deps", "open") == 0


def test_releasing_children_is_an_index_probe_per_finished_parent(
    queue: Queue, probe: Probe
) -> None:
    parents = queue.enqueue_many([queue.new_job("parent") for _ in range(200)])
    queue.enqueue_many(
        [queue.new_job("child", depends_on=[parents[n % 200]]) for n in range(20_000)]
    )
    probe.rows("ANALYZE {deps}")
    plan = "\n".join(
        r[0]
        for r in probe.rows(
            "EXPLAIN UPDATE {deps} AS d SET open = false"
            " WHERE d.parent_id = ANY (%s::uuid[]) AND d.open RETURNING d.child_id",
            [parents[0].to_uuid(), parents[1].to_uuid()],
        )
    )
    assert "Index Scan" in plan and "deps_pkey" in plan and "Seq Scan" not in plan, plan


@pytest.mark.timeout(900)
def test_sigkilled_workers_in_a_thousand_job_graph_leave_none_stuck_or_early(
    queue: Queue, probe: Probe, fleet: Fleet
) -> None:
    rng = random.Random(14)
    layers: list[list[Any]] = []
    with queue.workflow() as wf:
        for depth in range(10):
            layer = []
            for _ in range(100):
                parents = rng.sample(layers[-1], 2) if layers else []
                if depth > 1 and rng.random() < 0.3:
                    parents.append(rng.choice(layers[rng.randrange(depth - 1)]))
                layer.append(wf.add_with(ledger.WORK_KIND, {"ms": 30}, depends_on=parents))
            layers.append(layer)
    for _ in range(3):
        fleet.spawn(lease=1.0, concurrency=4)

    def done() -> int:
        return probe.count("jobs", "status = 'completed'")

    def holding() -> list[WorkerProcess]:
        """The live workers holding a claimed job now (a kill of one is a kill mid-run)."""
        held = {
            row[0] for row in probe.rows("SELECT claimed_by FROM {jobs} WHERE status = 'claimed'")
        }
        return [worker for worker in fleet.alive if worker.name in held]

    for number in range(1, 4):
        wait_until(lambda n=number: done() >= 250 * n, 240, 0.05, "progress")  # type: ignore[misc]
        victim = rng.choice(wait_until(holding, 60, 0.005, "a worker holding a claimed job"))
        victim.signal(signal.SIGKILL)
        victim.wait_exit(30)
        fleet.spawn(wait=False, lease=1.0, concurrency=4)
    wait_until(lambda: done() == 1000, 300, 0.1, "the whole graph to complete")
    assert graph_violations(probe) == []
    assert probe.count("journal", "outcome = 'recovered'") >= 1, "no kill hit a running job"
