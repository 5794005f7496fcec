"""Flow control values: a kind's declared limits (global concurrency, concurrency per
key, a rate), whether its keys share the workers fairly, and the state of a kind as the
database holds it (limits, fairness, pause, running)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from venturi.errors import ConfigurationError, InvalidJob
from venturi.models import validate_concurrency_key, validate_kind

RATE_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0}
_UNIT_NAMES: Final = {seconds: unit for unit, seconds in RATE_UNITS.items()}
# The starts of a rate's current window are kept in the kind's row, so a claim reads and
# rewrites at most this many timestamps.
MAX_RATE_COUNT: Final = 10_000
# A key's weight in a fair kind is within (0, MAX_WEIGHT]; a key without one weighs 1.
MAX_WEIGHT: Final = 1_000_000
_RATE_PATTERN: Final = re.compile(r"\s*([0-9]+)\s*/\s*([smh])\s*", re.ASCII)


@attrs.frozen
class Rate:
    """At most ``count`` runs start in any ``window`` seconds (written ``"50/s"``)."""

    count: int
    window: float

    @classmethod
    def parse(cls, text: object) -> Rate:
        """``"N/s"``, ``"N/m"`` or ``"N/h"``; raise `ConfigurationError` otherwise."""
        if not isinstance(text, str):
            raise ConfigurationError(f"rate must be a str such as '50/s', got {text!r}")
        match = _RATE_PATTERN.fullmatch(text)
        if match is None:
            raise ConfigurationError(
                f"rate {text!r} must read N/s, N/m or N/h (N a whole number, e.g. '50/s')"
            )
        count = int(match.group(1))
        if not 1 <= count <= MAX_RATE_COUNT:
            raise ConfigurationError(
                f"rate {text!r}: the count must be within [1, {MAX_RATE_COUNT}]"
            )
        return cls(count, RATE_UNITS[match.group(2)])

    def __str__(self) -> str:
        unit = _UNIT_NAMES.get(self.window)
        return f"{self.count}/{unit}" if unit else f"{self.count}/{self.window:g}s"


def to_rate(value: object) -> Rate | None:
    """A converter: None, a `Rate`, or its text form."""
    if value is None or isinstance(value, Rate):
        return value
    return Rate.parse(value)


def _limit(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{field} must be an int >= 1 or None, got {value!r}")
    if value < 1:
        raise ConfigurationError(f"{field} must be at least 1, got {value}")
    return value


def to_concurrency(value: object) -> int | None:
    """A converter: None, or an int >= 1 (`ConfigurationError` otherwise)."""
    return _limit(value, "concurrency")


def to_key_concurrency(value: object) -> int | None:
    """A converter: None, or an int >= 1 (`ConfigurationError` otherwise)."""
    return _limit(value, "key_concurrency")


def to_fair(value: object) -> bool:
    """A converter: True or False (`ConfigurationError` otherwise)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"fair must be True or False, got {value!r}")
    return value


@attrs.frozen
class KindLimits:
    """What a worker declares for one kind it runs: each limit or None (unlimited), and
    whether the kind's concurrency keys take turns (``fair``)."""

    kind: str = attrs.field(converter=validate_kind)
    concurrency: int | None = attrs.field(default=None, converter=to_concurrency)
    key_concurrency: int | None = attrs.field(default=None, converter=to_key_concurrency)
    rate: Rate | None = attrs.field(default=None, converter=to_rate)
    fair: bool = attrs.field(default=False, converter=to_fair)

    @property
    def limited(self) -> bool:
        """True if any limit is set: its claims take the kind's turn in the database."""
        return (
            self.concurrency is not None
            or self.key_concurrency is not None
            or self.rate is not None
        )

    @classmethod
    def of_row(cls, kind: str, columns: Sequence[Any]) -> KindLimits:
        """From a kinds row's concurrency, key_concurrency, rate_limit, rate_window and
        fair columns."""
        concurrency, key_concurrency, rate_limit, rate_window, fair = columns
        rate = None if rate_limit is None else Rate(rate_limit, float(rate_window))
        return cls(kind, concurrency, key_concurrency, rate, bool(fair))


@attrs.frozen
class KindState:
    """One kind's row of flow control, as read: pause, the latest declaration, and how
    many of its jobs are claimed now."""

    kind: str
    paused: bool
    paused_at: datetime | None
    limits: KindLimits
    declared_by: str | None
    declared_at: datetime | None
    running: int

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> KindState:
        """From a row of ``sql/kinds.sql``."""
        kind, paused, paused_at = row[:3]
        limits = KindLimits.of_row(kind, (*row[3:7], row[10]))
        return cls(kind, paused, paused_at, limits, row[7], row[8], int(row[9]))

    @property
    def limited(self) -> bool:
        return self.limits.limited


def checked_kinds(kinds: Iterable[object]) -> list[str]:
    """Each kind name checked against the kind rules (`InvalidJob` for a bad one)."""
    names = [validate_kind(kind) for kind in kinds]
    if not names:
        raise ConfigurationError("name at least one kind")
    return names


def checked_weights(weights: object) -> dict[str, float | None]:
    """Each key's weight checked: a concurrency key (a non-empty str) and a real number
    within (0, `MAX_WEIGHT`], or None (back to the default, 1). `ConfigurationError`
    names the first bad one, so nothing is written."""
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigurationError(
            f"weights must be a non-empty mapping of key to weight, got {weights!r}"
        )
    checked: dict[str, float | None] = {}
    for key, weight in weights.items():
        if not isinstance(key, str):
            raise ConfigurationError(f"a weight's key must be a str, got {key!r}")
        try:
            name = validate_concurrency_key(key)
        except InvalidJob as exc:
            raise ConfigurationError(f"weight key {key!r}: {exc}") from None
        assert name is not None
        if weight is None:
            checked[name] = None
            continue
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ConfigurationError(f"weight of {key!r} must be a number, got {weight!r}")
        if not math.isfinite(weight) or not 0 < weight <= MAX_WEIGHT:
            raise ConfigurationError(
                f"weight of {key!r} must be above 0 and at most {MAX_WEIGHT:,}, got {weight!r}"
            )
        checked[name] = float(weight)
    return checked


@attrs.frozen
class FairKey:
    """One key of a fair kind as `venturi stats` shows it: its due and running jobs
    (``key`` None: the kind's jobs without a key, which share one turn)."""

    key: str | None
    due: int
    running: int
