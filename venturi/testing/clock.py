"""`advance`: move a queue's jobs through time in the database, so tests of backoff,
``delay=`` and schedules run at once instead of sleeping."""

from __future__ import annotations

from typing import Any

import psycopg

from venturi.client import Queue
from venturi.durations import Duration, text_seconds, to_seconds
from venturi.testing.modes import run_if_inline


def parse_duration(value: Duration | str, field: str = "duration") -> float:
    """Seconds from seconds, a `timedelta`, or text such as ``"90s"``, ``"15m"``,
    ``"1h30m"``, ``"2d"`` (units ms, s, m, h, d, w); raises ValueError otherwise."""
    if not isinstance(value, str):
        return to_seconds(value, field)
    seconds = text_seconds(value.replace(" ", ""))
    if seconds is None:
        raise ValueError(
            f"{field} {value!r} is not a duration: write seconds, a timedelta or text "
            "such as '90s', '15m', '1h30m', '2d' (units ms, s, m, h, d, w)"
        )
    return seconds


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
