"""Durations as callers write them (seconds or `timedelta`) turned into seconds."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from venturi.errors import InvalidJob

Duration = int | float | timedelta


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
