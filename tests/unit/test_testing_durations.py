"""`venturi.testing.parse_duration`: the durations `advance` takes as text."""

from __future__ import annotations

from datetime import timedelta

import pytest

from venturi import InvalidJob
from venturi.testing import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("15m", 900.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("1h 30m", 5400.0),
    ],
)
def test_text_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_numbers_and_timedeltas_pass_through() -> None:
    assert parse_duration(5) == 5.0
    assert parse_duration(timedelta(minutes=2)) == 120.0


@pytest.mark.parametrize("text", ["", "soon", "1x", "-1h", "h", "1h-", "1hh", "h1"])
def test_refused_text_names_the_rule(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text, "advance")


def test_refused_numbers() -> None:
    with pytest.raises(InvalidJob, match="advance must not be negative"):
        parse_duration(-1, "advance")
