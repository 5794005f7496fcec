"""Durations as callers write them (seconds or `timedelta`) turned into seconds."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Final

from venturi.errors import InvalidJob

Duration = int | float | timedelta
_TEXT_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)", re.ASCII)
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def to_seconds(value: Duration, field: str, *, allow_zero: bool = True) -> float:
    """Seconds as a finite float; raises `InvalidJob` naming ``field`` otherwise."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJob(
            f"{field} must be seconds (int or float) or a timedelta, got {type(value).__name__}"
        )
    else:
        seconds = float(value)
    if not math.isfinite(seconds):
        raise InvalidJob(f"{field} must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        rule = "must not be negative" if allow_zero else "must be positive"
        raise InvalidJob(f"{field} {rule}, got {value!r}")
    return seconds


# The longest delay anything may ask for: ``enqueue(delay=)``, ``Retry(after=)``,
# ``Pause(after=)``, a backoff policy's answer, a schedule's ``every``. ``now() +`` it stays
# far inside both PostgreSQL's timestamps and Python's datetimes (`LATEST`), so a job due
# then can always be written and read back.
MAX_DELAY_SECONDS: Final = 100 * 365 * 24 * 3600


def delay_seconds(value: Duration, field: str, *, allow_zero: bool = True) -> float:
    """`to_seconds`, refusing more than `MAX_DELAY_SECONDS` (100 years): the one bound
    of every delay; raises `InvalidJob` naming ``field``."""
    seconds = to_seconds(value, field, allow_zero=allow_zero)
    if seconds > MAX_DELAY_SECONDS:
        raise InvalidJob(
            f"{field} {seconds:g}s is more than {MAX_DELAY_SECONDS}s (100 years), the "
            "longest delay allowed"
        )
    return seconds


def text_seconds(text: str, *, milliseconds: bool = True) -> float | None:
    """Seconds in compact duration text — ``250ms``, ``30s``, ``5m``, ``1h30m``, ``2d``,
    ``1w`` (``ms`` only with ``milliseconds``) — or None when ``text`` is not such text.
    The one parser of duration text: the API, the CLI and `venturi.testing` each add
    their own spelling rules around it."""
    parts = _TEXT_PART.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        return None
    if not milliseconds and any(unit == "ms" for _, unit in parts):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def text_or_seconds(value: Duration | str, field: str, *, allow_zero: bool = True) -> float:
    """`to_seconds`, and text such as ``30s``, ``5m``, ``12h``, ``3d`` or ``1w`` too."""
    if isinstance(value, str):
        seconds = text_seconds("".join(value.split()).lower(), milliseconds=False)
        if seconds is None:
            raise InvalidJob(
                f"{field} must be seconds, a timedelta or text such as '30s', '5m', '12h', "
                f"'3d' or '1w', got {value!r}"
            )
        value = seconds
    return to_seconds(value, field, allow_zero=allow_zero)


def require_aware(value: datetime, field: str) -> datetime:
    """Return ``value`` if it carries a timezone; raise `InvalidJob` for naive datetimes."""
    if not isinstance(value, datetime):
        raise InvalidJob(f"{field} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InvalidJob(
            f"{field} must be timezone-aware (naive datetimes are ambiguous); "
            "use datetime.now(timezone.utc) or attach a tzinfo"
        )
    return value


# timestamptz reaches far beyond Python's datetime, which stops at years 1 and 9999: a job
# stored with a time outside that range could never be read back, and would break every
# read of its row (get, history, even the claim that picks it up). A day's margin keeps it
# readable in any session time zone.
EARLIEST: Final = datetime(1, 1, 2, tzinfo=UTC)
LATEST: Final = datetime(9999, 12, 30, tzinfo=UTC)


def require_storable(value: datetime, field: str) -> datetime:
    """`require_aware`, and within the range Python can read back (years 1 to 9999)."""
    require_aware(value, field)
    try:
        fits = EARLIEST <= value.astimezone(UTC) <= LATEST
    except OverflowError:
        fits = False
    if not fits:
        raise InvalidJob(
            f"{field} {value.isoformat()} is outside the times Python can read back "
            f"({EARLIEST.date()} to {LATEST.date()} UTC)"
        )
    return value
