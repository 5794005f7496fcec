"""Retry delay policies: pure logic, no database."""

from __future__ import annotations

from datetime import timedelta

import pytest

import venturi
from venturi.backoff import Constant, Exponential, delay_for
from venturi.errors import ConfigurationError, InvalidJob


def test_exponential_doubles_from_base_without_jitter() -> None:
    policy = venturi.exponential(base=2, cap=1000, jitter=0)
    assert [policy(n) for n in range(1, 6)] == [2.0, 4.0, 8.0, 16.0, 32.0]


def test_exponential_is_capped_even_for_huge_failure_counts() -> None:
    policy = venturi.exponential(base=1, cap=60, jitter=0)
    assert policy(7) == 60.0
    assert policy(10_000) == 60.0


@pytest.mark.parametrize("failures", [1, 3, 6, 9, 40])
def test_exponential_jitter_stays_within_its_band_and_under_the_cap(failures: int) -> None:
    policy = venturi.exponential(base=1, cap=100, jitter=0.25)
    raw = min(100.0, 2.0 ** (failures - 1))
    delays = [policy(failures) for _ in range(500)]
    assert all(raw * 0.75 <= d <= min(100.0, raw * 1.25) for d in delays), (
        min(delays),
        max(delays),
    )
    assert len(set(delays)) > 1, "jitter should spread the delays"


def test_exponential_default_is_the_documented_policy() -> None:
    assert Exponential() == Exponential(base=1.0, cap=3600.0, jitter=0.1)


def test_exponential_accepts_timedeltas() -> None:
    policy = venturi.exponential(base=timedelta(seconds=3), cap=timedelta(minutes=1), jitter=0)
    assert (policy(1), policy(10)) == (3.0, 60.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base": -1}, "base"),
        ({"cap": -5}, "cap"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": -0.1}, "jitter"),
    ],
)
def test_exponential_refuses_bad_settings(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises((ConfigurationError, InvalidJob), match=field):
        venturi.exponential(**kwargs)


def test_constant_gives_the_same_delay_every_time() -> None:
    policy = venturi.constant(timedelta(milliseconds=250))
    assert {policy(n) for n in (1, 2, 50)} == {0.25}


def test_constant_refuses_a_negative_delay() -> None:
    with pytest.raises(InvalidJob, match="delay"):
        venturi.constant(-1)
    with pytest.raises(ConfigurationError, match="delay"):
        Constant(-1.0)


def test_any_callable_of_the_failure_count_is_a_policy() -> None:
    seen: list[int] = []

    def linear(failures: int) -> timedelta:
        seen.append(failures)
        return timedelta(seconds=10 * failures)

    assert delay_for(linear, 3) == 30.0
    assert seen == [3]


def test_a_policy_returning_nonsense_is_refused_with_its_field() -> None:
    with pytest.raises(InvalidJob, match="backoff delay"):
        delay_for(lambda n: -1, 1)
    with pytest.raises(InvalidJob, match="backoff delay"):
        delay_for(lambda n: "soon", 1)  # type: ignore[arg-type, return-value]
