"""`advance`: move a queue's jobs through time in the database, so tests of backoff,
``delay=`` and schedules run at once instead of sleeping."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from venturi.client import Queue
from venturi.durations import Duration, to_seconds
from venturi.testing.modes import run_if_inline

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: Duration | str, field: str = "duration") -> float:
    """Seconds from seconds, a `timedelta`, or text such as ``"90s"``, ``"15m"``,
    ``"1h30m"``, ``"2d"`` (units ms, s, m, h, d, w); raises ValueError otherwise."""
    if not isinstance(value, str):
        return to_seconds(value, field)
    text = value.replace(" ", "")
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(
            f"{field} {value!r} is not a duration: write seconds, a timedelta or text "
            "such as '90s', '15m', '1h30m', '2d' (units ms, s, m, h, d, w)"
        )
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def advance(
    queue: Queue, duration: Duration | str, *, conn: psycopg.Connection[Any] | None = None
) -> None:
    """Make the queue's jobs due as if ``duration`` had passed: scheduled jobs, retries
    waiting out their backoff and paused jobs come due that much earlier, and claims
    expire that much earlier. The database's clock is not touched and nothing sleeps.

    ``conn`` moves the jobs on that connection (in its transaction). In inline mode the
    jobs that came due run at once, in this thread.
    """
    seconds = parse_duration(duration, "advance")
    if seconds <= 0:
        raise ValueError(f"advance needs a positive duration, got {duration!r}")
    queue.store.advance_clock(seconds, conn)
    run_if_inline(queue)
