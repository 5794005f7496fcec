"""How a claimed run ends and what a batch statement did: the values the worker hands
the store when it settles, renews or completes runs."""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs
from ulid import ULID

from venturi.durations import (
    EARLIEST,
    LATEST,
    MAX_DELAY_SECONDS,
    Duration,
    delay_seconds,
    require_storable,
)
from venturi.errors import InvalidJob
from venturi.models import JobRecord, Outcome
from venturi.payload import encode_json

# The longest note a run leaves in the journal, and the longest text of a failure logged:
# a handler's exception message, its ``Fail(note)``, ``Retry``/``Pause`` notes and
# ``ctx.note()`` lines together. Longer text is cut, saying how long it was.
MAX_NOTE_CHARS: Final = 16_000
# What PostgreSQL's text cannot hold: NUL, and surrogates (no UTF-8 encodes them).
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")


# The journal facts of the reaper's recovery rows (outcome recovered, or dead once
# max_attempts is reached): the run's worker lost it, its lease lapsed (crashed or stuck).
LOST_FACTS: Final = {"lost": "lease expired"}
LOST_FACTS_JSON: Final = encode_json(LOST_FACTS, "facts")


def _storable_char(match: re.Match[str]) -> str:
    return "\\x00" if match.group() == "\x00" else "\ufffd"


def storable_text(text: str, limit: int = MAX_NOTE_CHARS) -> str:
    """``text`` as any UTF-8 database stores it, at most ``limit`` characters.

    A NUL becomes the four characters ``\\x00`` (visible where it was), a lone surrogate
    U+FFFD; text longer than ``limit`` is cut, ending with a
    line saying how many characters it had.
    """
    if not isinstance(text, str):
        text = str(text)
    whole = len(text)
    if whole > limit:
        text = text[:limit]
    if not text.isascii() or "\x00" in text:
        text = _UNSTORABLE.sub(_storable_char, text)
    if whole > limit or len(text) > limit:
        tail = f"\n... (cut: {whole} characters)"
        text = text[: limit - len(tail)] + tail
    return text


def _storable_note(note: str | None) -> str | None:
    return None if note is None else storable_text(note)


def _ascii(text: str) -> str:
    """``text`` in ASCII (other characters as Python escapes): every server encoding
    holds it, whatever the database's own."""
    return text.encode("ascii", "backslashreplace").decode("ascii")


class _Keep:
    """Marker: leave the job's carry as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()


class Busy(enum.Enum):
    """Another session held the row locked: nothing changed, try again."""

    BUSY = "busy"


BUSY: Final = Busy.BUSY


class SettleAction(enum.StrEnum):
    COMPLETE = "complete"
    RETRY = "retry"
    PAUSE = "pause"
    DEAD = "dead"
    RELEASE = "release"
    RECOVER = "recover"  # the reaper's: a lapsed lease, counted as a failure


_OUTCOMES: Final = {
    SettleAction.COMPLETE: Outcome.COMPLETED,
    SettleAction.RETRY: Outcome.RETRIED,
    SettleAction.PAUSE: Outcome.PAUSED,
    SettleAction.DEAD: Outcome.DEAD,
    SettleAction.RELEASE: Outcome.RELEASED,
    SettleAction.RECOVER: Outcome.RECOVERED,
}


# Built for every run's end: without slots, construction sets fields through the instance
# dict and the cached JSON below lives there too (a slotted class reaches it through a
# generated __getattr__ on every read).
@attrs.frozen(slots=False)
class Settlement:
    """How a claimed run ends. Built with the named constructors, applied by the store."""

    action: SettleAction
    delay: float | None = None
    at: datetime | None = None
    carry: Any = KEEP
    # Made storable on the way in (`storable_text`): whatever text a handler hands back.
    note: str | None = attrs.field(default=None, converter=_storable_note)
    attachment: Any = None
    # What code reads about the run, as data (the journal's ``facts``; the store adds
    # ``worker``): ``error`` for a failure from an exception, an integration's own keys.
    facts: Mapping[str, Any] | None = None

    # Encoded once, when the worker checks the outcome is storable, and reused by the
    # store's statement: a completion's attachment is never serialised twice.
    @functools.cached_property
    def carry_json(self) -> str | None:
        """The new carry as JSON text, or None when the carry is kept."""
        if self.carry is KEEP:
            return None
        return encode_json(self.carry, "carry")

    @functools.cached_property
    def attachment_json(self) -> str | None:
        """The attachment as JSON text, or None; raises `InvalidPayload` if unstorable."""
        return None if self.attachment is None else encode_json(self.attachment, "attachment")

    @functools.cached_property
    def facts_json(self) -> str | None:
        """The facts as JSON text, or None; raises `InvalidPayload` if unstorable."""
        return None if not self.facts else encode_json(dict(self.facts), "facts")

    @property
    def requested(self) -> Outcome:
        """The journal outcome this settlement asks for. What applied is the store's
        answer (`Store.settle`): a retry of the last allowed attempt records ``dead``."""
        return _OUTCOMES[self.action]

    @classmethod
    def complete(
        cls, attachment: Any = None, note: str | None = None, facts: Mapping[str, Any] | None = None
    ) -> Settlement:
        return cls(SettleAction.COMPLETE, attachment=attachment, note=note, facts=facts)

    @classmethod
    def retry(
        cls,
        delay: Duration = 0,
        carry: Any = KEEP,
        note: str | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> Settlement:
        """Count a failure and re-pend after ``delay``; dead once max_attempts is reached."""
        seconds = delay_seconds(delay, "retry delay")
        return cls(SettleAction.RETRY, delay=seconds, carry=carry, note=note, facts=facts)

    @classmethod
    def pause(
        cls,
        delay: Duration | None = None,
        at: datetime | None = None,
        carry: Any = KEEP,
        note: str | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> Settlement:
        """Re-pend without counting a failure, visible after ``delay`` or at ``at``."""
        if delay is not None and at is not None:
            raise InvalidJob("give either after or until, not both")
        if at is not None:
            require_storable(at, "until")
            return cls(SettleAction.PAUSE, at=at, carry=carry, note=note, facts=facts)
        seconds = 0.0 if delay is None else delay_seconds(delay, "pause delay")
        return cls(SettleAction.PAUSE, delay=seconds, carry=carry, note=note, facts=facts)

    @classmethod
    def dead(cls, note: str | None = None, facts: Mapping[str, Any] | None = None) -> Settlement:
        return cls(SettleAction.DEAD, note=note, facts=facts)

    @classmethod
    def release(cls, note: str | None = None, facts: Mapping[str, Any] | None = None) -> Settlement:
        """Hand a claimed job back untouched (never started, or stopping)."""
        return cls(SettleAction.RELEASE, note=note, facts=facts)

    @classmethod
    def recover(cls, owner: str | None, delay: Duration = 0) -> Settlement:
        """Take back a run whose lease lapsed (its worker, ``owner``, crashed or froze): a
        failure like `retry`, pending after ``delay`` or dead once out of attempts. Only
        a run whose lease has expired is recovered; the journal's facts say it was lost."""
        seconds = delay_seconds(delay, "recovery delay")
        note = f"lease held by {owner or '?'} expired"
        return cls(SettleAction.RECOVER, delay=seconds, note=note, facts=LOST_FACTS)

    def fallback(self, refusal: str) -> Settlement:
        """The same outcome in a form any database stores, for when it refused this one
        (``refusal`` says why): no attachment, the carry left as it was, no facts but the
        failure's ``error`` in ASCII, the delay within `MAX_DELAY_SECONDS`, and a note in
        ASCII that says what was dropped, followed by as much of this one's note as fits.
        A completion stays a completion, a failure the same failure: the run is settled,
        never left for its lease to lapse."""
        dropped = ["the result" if self.attachment is not None else ""]
        dropped.append("the carry" if self.carry is not KEEP else "")
        facts = _storable_error(self.facts)
        if self.facts and set(self.facts) - set(facts or {}):
            dropped.append("the facts")
        at = self.at if self.at is not None and EARLIEST <= self.at <= LATEST else None
        delay = None if self.delay is None else min(self.delay, float(MAX_DELAY_SECONDS))
        if at is None and self.at is not None:
            delay, dropped = float(MAX_DELAY_SECONDS), [*dropped, "the time to run again"]
        if delay is not None and self.delay is not None and delay < self.delay:
            dropped.append(f"the delay beyond {MAX_DELAY_SECONDS}s")
        what = ", ".join(d for d in dropped if d)
        written = f"written without {what}" if what else "its note written in ASCII"
        note = f"this run's settlement could not be stored ({refusal}); {written}"
        if self.note:
            note = f"{note}\n{self.note}"
        return Settlement(
            self.action, delay=delay, at=at, note=storable_text(_ascii(note)), facts=facts
        )


def error_facts(exc: BaseException, message: str) -> dict[str, Any]:
    """The journal facts of a run that raised ``exc``: ``{"error": {"type", "message"}}``,
    the type as its import path (``module.QualName``), both storable."""
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return {"error": {"type": storable_text(kind), "message": storable_text(message)}}


def _storable_error(facts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Only the ``error`` of ``facts``, in ASCII (what any database stores), or None."""
    error = None if facts is None else facts.get("error")
    if not isinstance(error, Mapping):
        return None
    return {"error": {str(k): _ascii(storable_text(str(v))) for k, v in error.items()}}


@attrs.frozen
class Claim:
    """The fencing token of one run: which job, which worker, which epoch."""

    job_id: ULID
    claimed_by: str
    run_count: int

    @classmethod
    def of(cls, job: JobRecord) -> Claim:
        if job.claimed_by is None:
            raise InvalidJob(f"job {job.id} is not claimed")
        return cls(job.id, job.claimed_by, job.run_count)


@attrs.frozen
class BatchOutcome:
    """What a statement over many runs (renew leases, complete) did to each of them.

    ``applied``: changed. ``busy``: still held by its run, but its row was locked by
    another session, so it was skipped untouched; try again later. Any other run of the
    batch has lost its claim (fenced out).
    """

    applied: frozenset[ULID] = frozenset()
    busy: frozenset[ULID] = frozenset()

    def kept(self, job_id: ULID) -> bool:
        """The run still holds its claim (changed, or skipped while locked)."""
        return job_id in self.applied or job_id in self.busy

    @classmethod
    def merged(cls, outcomes: Sequence[BatchOutcome]) -> BatchOutcome:
        """The outcome of statements over disjoint parts of one batch, together."""
        applied = frozenset().union(*(o.applied for o in outcomes))
        busy = frozenset().union(*(o.busy for o in outcomes))
        return cls(applied, busy)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[Any, ...]]) -> BatchOutcome:
        """From ``(id, applied)`` rows."""
        applied = frozenset(ULID.from_uuid(r[0]) for r in rows if r[1])
        busy = frozenset(ULID.from_uuid(r[0]) for r in rows if not r[1])
        return cls(applied, busy)
