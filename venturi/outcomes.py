"""What a handler raises to end its run in a way other than completing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from venturi.durations import Duration, delay_seconds, require_storable
from venturi.errors import InvalidJob
from venturi.settlements import KEEP


class Retry(Exception):
    """Count a failure and run again after ``after`` (default: the job's backoff).

    ``after`` is bounded like ``enqueue(delay=)`` (`MAX_DELAY_SECONDS`, 100 years): a
    longer one raises `InvalidJob` here, in the handler, which fails the run saying so.
    The job is dead once its failures reach ``max_attempts``. ``carry`` is handed to the
    next run (left unchanged when not given).
    """

    def __init__(
        self, after: Duration | None = None, carry: Any = KEEP, note: str | None = None
    ) -> None:
        super().__init__(note or "retry requested")
        self.after = None if after is None else delay_seconds(after, "Retry(after)")
        self.carry = carry
        self.note = note


class Pause(Exception):
    """Re-pend without counting a failure: after ``after``, or at ``until``.

    For snoozing, waiting on something outside, and resumable work that checkpoints
    its progress in ``carry``. ``after`` is bounded like ``Retry(after=)``, ``until`` to
    the times Python can read back.
    """

    def __init__(
        self,
        after: Duration | None = None,
        until: datetime | None = None,
        carry: Any = KEEP,
        note: str | None = None,
    ) -> None:
        super().__init__(note or "pause requested")
        if after is not None and until is not None:
            raise InvalidJob("Pause takes either after or until, not both")
        self.after = None if after is None else delay_seconds(after, "Pause(after)")
        self.until = None if until is None else require_storable(until, "Pause(until)")
        self.carry = carry
        self.note = note


class Fail(Exception):
    """Mark the job dead at once: poison input, no point retrying."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note
