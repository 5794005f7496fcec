"""Helpers for the schedule tests: reading fired jobs, and the one-job-per-slot check."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from tests.support import Probe


def fired_slots(probe: Probe, kind: str) -> list[datetime]:
    """The ``scheduled_at`` of every job of ``kind``, as the database stored it."""
    rows = probe.rows(
        "SELECT (payload->>'scheduled_at')::timestamptz FROM {jobs} WHERE kind = %s ORDER BY 1",
        kind,
    )
    return [row[0] for row in rows]


def slot_problems(
    fired: list[datetime], expected: list[datetime]
) -> tuple[dict[datetime, int], list[datetime]]:
    """Slots enqueued more than once (with their counts), and expected slots never
    enqueued."""
    counts = Counter(fired)
    duplicates = {slot: n for slot, n in counts.items() if n > 1}
    missing = [slot for slot in expected if slot not in counts]
    return duplicates, missing
