"""The adaptive prefetch: deep for jobs quicker than a claim round trip, the floor for slow
ones, fixed when the worker was given a number. Pure logic, no database."""

from __future__ import annotations

from venturi.worker.prefetch import MIN_CEILING, Prefetch


def test_the_floor_until_both_durations_are_known() -> None:
    prefetch = Prefetch(concurrency=4)
    assert prefetch.size == prefetch.floor == 1
    prefetch.observe_run(0.0001)
    assert prefetch.size == 1
    prefetch.observe_claim(0.001)
    assert prefetch.size > 1


def test_quick_jobs_get_about_two_round_trips_of_work_up_to_the_ceiling() -> None:
    prefetch = Prefetch(concurrency=1)
    prefetch.observe_claim(0.001)
    prefetch.observe_run(0.0002)  # five jobs per round trip, twice over
    assert prefetch.size == 10
    assert prefetch.min_batch == 5
    prefetch = Prefetch(concurrency=16)
    prefetch.observe_claim(0.001)
    prefetch.observe_run(0.00001)
    assert prefetch.size == prefetch.ceiling == max(MIN_CEILING, 64) == 64
    assert Prefetch(concurrency=40).ceiling == 160


def test_slow_jobs_get_the_floor() -> None:
    prefetch = Prefetch(concurrency=16)
    prefetch.observe_claim(0.001)
    prefetch.observe_run(5.0)
    assert prefetch.size == 1
    assert prefetch.min_batch == 1


def test_the_averages_follow_a_change_of_pace() -> None:
    prefetch = Prefetch(concurrency=2)
    prefetch.observe_claim(0.001)
    prefetch.observe_run(0.0001)
    assert prefetch.size == 40
    for _ in range(40):
        prefetch.observe_run(1.0)
    assert prefetch.size == 1


def test_a_given_prefetch_is_fixed() -> None:
    prefetch = Prefetch(concurrency=8, fixed=3)
    prefetch.observe_claim(0.001)
    prefetch.observe_run(0.00001)
    assert prefetch.size == prefetch.floor == prefetch.ceiling == 3
    assert Prefetch(concurrency=8, fixed=0).size == 0
    assert Prefetch(concurrency=8, fixed=0).min_batch == 1
