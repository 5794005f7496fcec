"""When a schedule's slots fall: a 5-field cron expression in a time zone, or a fixed
interval.

Cron slots come from cronsim, which keeps Debian cron's rules for daylight-saving
changes: a job at a fixed local time that the spring-forward jump skips runs once, at
the jump; one that the fall-back hour repeats runs once, at the first occurrence. Jobs
that run every hour (or more often) follow real time through both changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
from cronsim import CronSim, CronSimError

from venturi.durations import MAX_DELAY_SECONDS
from venturi.errors import ConfigurationError

ALIASES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
SHORTEST_INTERVAL: Final = 1.0
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


class Timing(Protocol):
    """Where slots fall; every time in and out is aware, and slots come back in UTC."""

    @property
    def expression(self) -> str:
        """The timing as people write it (``0 3 * * *``, ``every 30s``)."""
        ...

    @property
    def zone(self) -> str: ...

    def after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment``."""
        ...

    def back_from(self, moment: datetime) -> Iterator[datetime]:
        """Slots at or before ``moment``, latest first."""
        ...


def time_zone(name: str) -> ZoneInfo:
    """The `zoneinfo` zone called ``name``; `ConfigurationError` if there is none."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"tz must be a zoneinfo name such as 'Europe/Berlin', got {name!r}"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(f"tz {name!r} is not a known time zone ({exc})") from None


def _check_expression(value: str) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"cron must be a str, got {type(value).__name__}")
    text = " ".join(value.split())
    expanded = ALIASES.get(text.lower(), text)
    if len(expanded.split()) != 5:
        raise ConfigurationError(
            f"cron {value!r} must have 5 fields (minute hour day-of-month month day-of-week) "
            f"or be one of {', '.join(ALIASES)}"
        )
    try:
        CronSim(expanded, datetime.now(UTC))
    except CronSimError as exc:
        raise ConfigurationError(f"cron {value!r} is not a valid expression: {exc}") from None
    return text


@attrs.frozen
class Cron:
    """A standard 5-field cron expression (or an ``@daily``-style alias) in ``zone``."""

    expression: str = attrs.field(converter=_check_expression)
    zone: str = "UTC"
    _tz: ZoneInfo = attrs.field(init=False, repr=False, eq=False)

    @_tz.default
    def _load_zone(self) -> ZoneInfo:
        return time_zone(self.zone)

    @property
    def _fields(self) -> str:
        return ALIASES.get(self.expression.lower(), self.expression)

    def after(self, moment: datetime) -> datetime:
        slots = CronSim(self._fields, moment.astimezone(self._tz))
        return next(slots).astimezone(UTC)

    def back_from(self, moment: datetime) -> Iterator[datetime]:
        # cronsim counts back from the whole second, exclusively, unless the start has
        # microseconds: one microsecond more makes ``moment`` itself a candidate.
        for slot in CronSim(self._fields, (moment + _MICROSECOND).astimezone(self._tz), True):
            yield slot.astimezone(UTC)


def _check_interval(value: float) -> float:
    # The longest delay allowed anywhere: past it, the next slot (a multiple of the
    # interval since 1970) could fall beyond the datetimes Python can compute.
    if not math.isfinite(value) or not SHORTEST_INTERVAL <= value <= MAX_DELAY_SECONDS:
        raise ConfigurationError(
            f"every must be at least {SHORTEST_INTERVAL:g}s and at most {MAX_DELAY_SECONDS}s "
            f"(100 years), got {value!r}s"
        )
    return value


@attrs.frozen
class Every:
    """A fixed interval; slots are its whole multiples since the Unix epoch (UTC), so
    every worker and every restart agree on them."""

    seconds: float = attrs.field(converter=_check_interval)

    @property
    def expression(self) -> str:
        return f"every {format_seconds(self.seconds)}"

    @property
    def zone(self) -> str:
        return "UTC"

    @property
    def _step(self) -> int:
        return round(self.seconds * 1_000_000)

    def _slot(self, index: int) -> datetime:
        return _EPOCH + timedelta(microseconds=index * self._step)

    def _index(self, moment: datetime) -> int:
        elapsed = moment - _EPOCH
        micros = (elapsed.days * 86_400 + elapsed.seconds) * 1_000_000 + elapsed.microseconds
        return micros // self._step

    def after(self, moment: datetime) -> datetime:
        return self._slot(self._index(moment) + 1)

    def back_from(self, moment: datetime) -> Iterator[datetime]:
        index = self._index(moment)
        while True:
            yield self._slot(index)
            index -= 1


_UNITS: Final = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def format_seconds(seconds: float) -> str:
    """Seconds in the largest unit that divides them: ``1d``, ``90m``, ``30s``, ``1.5s``."""
    for unit, size in _UNITS:
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
