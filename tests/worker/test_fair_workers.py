"""Fair kinds across processes: four worker processes at concurrency 16 each share one
fair kind, and the turns, the weights and the limits hold for all of them together
(a rotation kept per process would let one process's claims run ahead of the others')."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.support import Probe, wait_until
from tests.worker.conftest import PROCESSES
from tests.worker.test_flow_races import drain, ledger, most_overlapping
from venturi import NewJob, Queue
from venturi.worker.prefetch import MIN_CEILING

pytestmark = pytest.mark.slow


def keyed(key: str, count: int) -> list[NewJob]:
    return [NewJob("limited", {"n": n}, concurrency_key=key) for n in range(count)]


def declared_fair(queue: Queue) -> None:
    wait_until(
        lambda: any(k.kind == "limited" and k.limits.fair for k in queue.kinds()),
        timeout=30,
        what="the kind to be declared fair",
    )


def claims_between(runs: list[tuple[Any, ...]], key: str, since: datetime) -> int:
    """How many runs of other keys were claimed after ``since`` and before ``key``'s."""
    (claimed,) = [claimed_at for run_key, claimed_at, _, _ in runs if run_key == key]
    return sum(1 for k, at, _, _ in runs if k != key and since < at < claimed)


def test_a_late_key_is_served_within_a_turn_of_a_deep_backlog(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    flow_workers("--fair", "--sleep", "0.02")
    declared_fair(queue)
    queue.enqueue_many(keyed("deep", 10_000))
    wait_until(
        lambda: probe.count("jobs", "status = 'completed'") >= 300,
        timeout=60,
        what="the deep key's drain to be under way",
    )
    arrivals = {}
    for number in range(10):
        key = f"small:{number}"
        arrivals[key] = probe.scalar("SELECT now()")
        queue.enqueue("limited", {"n": number}, concurrency_key=key)
    assert probe.count("jobs", "status = 'pending'") > 5000  # the backlog is still deep
    drain(queue, probe, 10_010, "10,010 jobs to drain")
    runs = ledger(probe, flow_ledger, 10_010)
    waited = {key: claims_between(runs, key, at) for key, at in arrivals.items()}
    print(f"runs of other keys claimed while each small key waited: {waited}")
    # Each small key is at the front of the turns from its enqueue on, never behind the
    # deep backlog: only claims already under way may pass it, one per process, each of
    # at most its handlers and its largest prefetch (without fairness: thousands).
    in_flight = PROCESSES * (16 + MIN_CEILING)
    assert max(waited.values()) <= in_flight + len(arrivals)


def test_weights_share_the_claims_of_four_processes(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    flow_workers("--fair")
    declared_fair(queue)
    queue.set_weights("limited", {"one": 1, "two": 2, "four": 4})
    queue.enqueue_many(keyed("one", 1000) + keyed("two", 1000) + keyed("four", 1000))
    drain(queue, probe, 3000, "3,000 weighted jobs to drain")
    runs = ledger(probe, flow_ledger, 3000)
    # While every key still has due jobs (the first 1,400 claims: "four" has 1,000 and
    # runs out after 7/4 of them), claims follow the weights.
    first = Counter(key for key, _, _, _ in runs[:1400])
    print(f"first 1,400 claims by key: {dict(first)}")
    for key, share in (("one", 1 / 7), ("two", 2 / 7), ("four", 4 / 7)):
        assert abs(first[key] / 1400 - share) < 0.05 * share + 0.01


def test_a_fair_kind_keeps_its_key_limit_across_processes(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    flow_workers("--fair", "--key-limit", "2", "--sleep", "0.01")
    declared_fair(queue)
    queue.enqueue_many(keyed("hot", 300) + [j for n in range(60) for j in keyed(f"c:{n}", 5)])
    drain(queue, probe, 600, "600 keyed fair jobs to drain")
    runs = ledger(probe, flow_ledger, 600)
    hot = [(started, ended) for key, _, started, ended in runs if key == "hot"]
    assert most_overlapping(hot) <= 2
    # The cold keys are not held behind the hot one's backlog: they finish long before it.
    hot_end = max(ended for _, ended in hot)
    cold_end = max(ended for key, _, _, ended in runs if key != "hot")
    assert cold_end < hot_end


def test_a_paused_fair_kind_waits_and_keys_come_and_go_while_it_drains(
    queue: Queue, probe: Probe, flow_workers: Callable[..., None], flow_ledger: str
) -> None:
    flow_workers("--fair", "--sleep", "0.002")
    declared_fair(queue)
    queue.pause("limited")
    queue.enqueue_many(keyed("a", 500) + keyed("b", 500))
    assert probe.count("jobs", "status <> 'pending'") == 0
    queue.resume("limited")
    wait_until(
        lambda: probe.count("jobs", "status = 'completed'") >= 200,
        timeout=60,
        what="the drain to be under way",
    )
    queue.enqueue_many(keyed("c", 300))  # a key added while draining
    drain(queue, probe, 1300, "1,300 fair jobs to drain")
    runs = ledger(probe, flow_ledger, 1300)
    counts = Counter(key for key, _, _, _ in runs)
    assert counts == {"a": 500, "b": 500, "c": 300}
    assert probe.count("jobs", "fair_tag IS NULL") == 0
    assert probe.count("journal", "outcome = 'completed'") == 1300
