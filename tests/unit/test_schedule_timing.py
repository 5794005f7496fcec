"""Slots and catch-up planning, with fixed clocks (no database, no waiting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from venturi.errors import ConfigurationError
from venturi.schedules.cron import Cron, Every
from venturi.schedules.schedule import MISSED_AFTER, Schedule, timing_of

BERLIN = ZoneInfo("Europe/Berlin")


def utc(*parts: int) -> datetime:
    """An aware UTC datetime from (year, month, day[, hour[, minute[, second]]])."""
    year, month, day, hour, minute, second = (*parts, 0, 0, 0)[:6]
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def slots_between(timing: Cron | Every, start: datetime, end: datetime) -> list[datetime]:
    """Slots in [start, end)."""
    found, moment = [], start - timedelta(microseconds=1)
    while (moment := timing.after(moment)) < end:
        found.append(moment)
    return found


@pytest.mark.parametrize(
    ("day", "expected_local"),
    [
        # Spring forward: 02:00 -> 03:00, so 02:30 never happens; it runs once, at the jump.
        (datetime(2026, 3, 29, tzinfo=BERLIN), [datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN)]),
        # Fall back: 03:00 -> 02:00, so 02:30 happens twice; it runs once, the first time.
        (datetime(2026, 10, 25, tzinfo=BERLIN), [datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN)]),
        (datetime(2026, 7, 1, tzinfo=BERLIN), [datetime(2026, 7, 1, 2, 30, tzinfo=BERLIN)]),
    ],
)
def test_a_daily_0230_berlin_job_fires_once_on_dst_days(
    day: datetime, expected_local: list[datetime]
) -> None:
    timing = Cron("30 2 * * *", "Europe/Berlin")
    fired = slots_between(timing, day, day + timedelta(days=1))
    assert fired == [e.astimezone(UTC) for e in expected_local]
    assert all(slot.tzinfo is UTC for slot in fired)
    # Counting back from the day's end finds the same single slot.
    back = [s for s in islice(timing.back_from(day + timedelta(days=1)), 3) if s >= day]
    assert back == fired


def test_fall_back_first_occurrence_is_summer_time() -> None:
    timing = Cron("30 2 * * *", "Europe/Berlin")
    (slot,) = slots_between(timing, utc(2026, 10, 24, 22), utc(2026, 10, 25, 22))
    assert slot == utc(2026, 10, 25, 0, 30)  # 02:30 CEST, not 02:30 CET (01:30 UTC)


def test_hourly_follows_real_time_through_dst() -> None:
    timing = Cron("@hourly", "Europe/Berlin")
    # Local midnight to midnight: 23 real hours in spring, 25 in autumn.
    spring = slots_between(timing, utc(2026, 3, 28, 23), utc(2026, 3, 29, 22))
    fall = slots_between(timing, utc(2026, 10, 24, 22), utc(2026, 10, 25, 23))
    assert len(spring) == 23 and len(fall) == 25  # the day's real hours, once each
    assert len(set(spring)) == len(spring) and len(set(fall)) == len(fall)


def test_cron_in_utc_and_aliases() -> None:
    assert Cron("0 3 * * *").after(utc(2026, 1, 1, 3)) == utc(2026, 1, 2, 3)
    assert Cron("@daily").after(utc(2026, 1, 1, 12)) == utc(2026, 1, 2)
    assert Cron("0 8 * * mon").after(utc(2026, 11, 30, 9)) == utc(2026, 12, 7, 8)
    assert Cron("@weekly").expression == "@weekly"
    assert Cron("  0   3 * * * ").expression == "0 3 * * *"


def test_back_from_includes_the_moment_itself() -> None:
    assert next(Cron("0 3 * * *").back_from(utc(2026, 1, 1, 3))) == utc(2026, 1, 1, 3)
    second = utc(2026, 1, 1, 3) + timedelta(microseconds=5)
    assert next(Cron("0 3 * * *").back_from(second)) == utc(2026, 1, 1, 3)
    assert next(Every(30).back_from(utc(2026, 1, 1, 0, 0, 45))) == utc(2026, 1, 1, 0, 0, 30)


def test_every_slots_align_to_the_epoch() -> None:
    timing = Every(30)
    assert timing.after(utc(2026, 1, 1, 0, 0, 10)) == utc(2026, 1, 1, 0, 0, 30)
    assert timing.after(utc(2026, 1, 1, 0, 0, 30)) == utc(2026, 1, 1, 0, 1)
    assert timing.expression == "every 30s"
    assert Every(5400).expression == "every 90m"
    assert Every(1.5).after(utc(2026, 1, 1)) == utc(2026, 1, 1) + timedelta(seconds=1.5)


@pytest.mark.parametrize(
    ("cron", "every", "tz", "message"),
    [
        ("61 * * * *", None, None, "not a valid expression"),
        ("* * * *", None, None, "5 fields"),
        ("0 0 0 * * *", None, None, "5 fields"),
        ("@sometimes", None, None, "5 fields"),
        ("0 3 * * *", None, "Mars/Olympus", "not a known time zone"),
        ("0 3 * * *", None, "", "zoneinfo name"),
        (None, 0.5, None, "at least 1s"),
        (None, "0.5s", None, "at least 1s"),
        (None, "soon", None, "text such as"),
        (None, -1, None, "must be positive"),
        ("0 3 * * *", 30, None, "exactly one"),
        (None, None, None, "exactly one"),
        (None, 30, "Europe/Berlin", "tz= applies to cron"),
    ],
)
def test_bad_timings_are_refused(
    cron: str | None, every: float | str | None, tz: str | None, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        timing_of(cron, every, tz)


def _schedule(catch_up: Any, max_catch_up: int = 100) -> Schedule:
    return Schedule("s", "k", Every(60), catch_up=catch_up, max_catch_up=max_catch_up)


NOW = utc(2026, 1, 1, 12, 0, 5)


def test_on_time_slot_fires_under_every_policy() -> None:
    for policy in ("latest", "all", "none"):
        firing = _schedule(policy).plan(utc(2026, 1, 1, 12), NOW)
        assert firing.slots == [utc(2026, 1, 1, 12)]
        assert firing.next_slot == utc(2026, 1, 1, 12, 1)


def test_catch_up_after_downtime_by_policy() -> None:
    missed_since = utc(2026, 1, 1, 10)  # two hours without a worker: 121 slots due
    latest = _schedule("latest").plan(missed_since, NOW + timedelta(minutes=1))
    assert latest.slots == [utc(2026, 1, 1, 12, 1)]
    everything = _schedule("all").plan(missed_since, NOW)
    assert len(everything.slots) == 100  # max_catch_up: the most recent 100
    assert everything.slots[-1] == utc(2026, 1, 1, 12) and everything.slots == sorted(
        everything.slots
    )
    few = _schedule("all").plan(utc(2026, 1, 1, 11, 58), NOW)
    assert few.slots == [utc(2026, 1, 1, 11, 58), utc(2026, 1, 1, 11, 59), utc(2026, 1, 1, 12)]
    capped = _schedule("all", max_catch_up=2).plan(missed_since, NOW)
    assert capped.slots == [utc(2026, 1, 1, 11, 59), utc(2026, 1, 1, 12)]
    late = NOW + MISSED_AFTER
    assert _schedule("none").plan(missed_since, late).slots == []
    for firing in (latest, everything, capped):
        assert firing.next_slot > NOW


def test_bad_catch_up_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="catch_up must be one of"):
        _schedule("some")
    with pytest.raises(ConfigurationError, match="max_catch_up must be a positive int"):
        _schedule("all", max_catch_up=0)


@pytest.mark.parametrize(
    "day", [datetime(2026, 3, 29, tzinfo=BERLIN), datetime(2026, 10, 25, tzinfo=BERLIN)]
)
def test_a_scheduler_stepping_through_a_dst_day_fires_the_0230_job_once(day: datetime) -> None:
    schedule = Schedule("nightly", "k", Cron("30 2 * * *", "Europe/Berlin"))
    now = day.astimezone(UTC)
    next_slot = schedule.timing.after(now)
    fired: list[datetime] = []
    while now < (day + timedelta(days=1)).astimezone(UTC):
        now += timedelta(seconds=20)  # a worker looking three times a minute
        if next_slot <= now:
            firing = schedule.plan(next_slot, now)
            fired += firing.slots
            next_slot = firing.next_slot
    assert len(fired) == 1, fired
    assert fired[0].astimezone(BERLIN).date() == day.date()
