"""Retention: how long finished jobs are kept before the workers delete them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from venturi.durations import Duration, text_or_seconds
from venturi.errors import ConfigurationError, InvalidJob
from venturi.schedules.cron import Every, format_seconds
from venturi.schedules.schedule import Schedule

DAY: Final = 86_400.0
# The built-in schedule under which workers prune, and how often it comes due.
RETENTION_SCHEDULE: Final = "venturi.schedules.retention"
DEFAULT_PRUNE_EVERY: Final = 60.0
_KEEP_FOREVER: Final = ("never", "forever", "none")
STATUSES: Final = ("completed", "cancelled", "dead")


def _kept_for(value: object, field: str) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _KEEP_FOREVER):
        return None
    try:
        return text_or_seconds(value, f"retention {field}", allow_zero=False)  # type: ignore[arg-type]
    except InvalidJob as exc:
        raise ConfigurationError(f"{exc} (or None / 'never' to keep forever)") from None


def _completed(value: object) -> float | None:
    return _kept_for(value, "completed")


def _cancelled(value: object) -> float | None:
    return _kept_for(value, "cancelled")


def _dead(value: object) -> float | None:
    return _kept_for(value, "dead")


def _prune_every(value: object) -> float:
    try:
        return text_or_seconds(value, "retention every", allow_zero=False)  # type: ignore[arg-type]
    except InvalidJob as exc:
        raise ConfigurationError(str(exc)) from None


@attrs.frozen
class Retention:
    """Seconds each terminal status is kept after it finished (None: forever).

    Defaults: ``completed`` and ``cancelled`` 1 day, ``dead`` 7 days. Values take seconds,
    a `timedelta`, or text (``"3d"``, ``"12h"``, ``"never"``). Workers prune every
    ``every`` seconds (60), one worker at a time, in batches of ``batch`` jobs.
    """

    completed: float | None = attrs.field(default=DAY, converter=_completed)
    cancelled: float | None = attrs.field(default=DAY, converter=_cancelled)
    dead: float | None = attrs.field(default=7 * DAY, converter=_dead)
    every: float = attrs.field(default=DEFAULT_PRUNE_EVERY, converter=_prune_every)
    batch: int = attrs.field(default=500)

    @batch.validator
    def _check_batch(self, _: object, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"retention batch must be a positive int, got {value!r}")

    @classmethod
    def of(cls, value: Retention | Mapping[str, Duration | str | None] | str | None) -> Retention:
        """`Retention` from itself, a mapping of its fields, or CLI text such as
        ``completed=3d,dead=never``; None keeps every finished job (nothing pruned)."""
        if value is None:
            return cls(completed=None, cancelled=None, dead=None)
        if isinstance(value, Retention):
            return value
        if isinstance(value, str):
            value = _parse_text(value)
        if not isinstance(value, Mapping):
            raise ConfigurationError(
                f"retention must be a Retention, a mapping or None, got {type(value).__name__}"
            )
        unknown = sorted(set(value) - {f.name for f in attrs.fields(cls)})
        if unknown:
            raise ConfigurationError(
                f"retention has unknown keys {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(STATUSES)}, every, batch"
            )
        return cls(**value)  # type: ignore[arg-type]  # each field's converter checks it

    def kept(self) -> dict[str, float | None]:
        """Each terminal status and how long it is kept (None: forever)."""
        return {status: getattr(self, status) for status in STATUSES}

    @property
    def prunes(self) -> bool:
        return any(seconds is not None for seconds in self.kept().values())

    def describe(self) -> str:
        """``completed 1d, cancelled 1d, dead 7d`` (``never`` for kept forever)."""
        return ", ".join(
            f"{status} {'never' if keep is None else format_seconds(keep)}"
            for status, keep in self.kept().items()
        )

    def schedule(self) -> Schedule:
        """The built-in schedule whose slots start a prune; its payload shows the
        retention in force (`venturi stats`, `venturi schedules`)."""
        return Schedule(
            RETENTION_SCHEDULE,
            RETENTION_SCHEDULE,
            Every(self.every),
            payload={**self.kept(), "batch": self.batch},
            builtin=True,
        )


# `Queue(retention=...)`'s default: every field at its default (None would keep all).
DEFAULT_RETENTION: Final = Retention()


def _parse_text(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigurationError(
                f"retention {text!r}: expected status=duration pairs such as "
                "'completed=3d,dead=never'"
            )
        pairs[key.strip()] = value.strip()
    return pairs
