"""``beat_schedule`` as venturi schedules: ``crontab(...)`` becomes a cron expression in
the app's ``timezone``, a ``timedelta`` or a number of seconds an ``every=`` interval.
The workers fire them, each slot exactly once; there is no beat process."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from venturi.errors import ConfigurationError

from .exceptions import NotSupported

_ENTRY_KEYS: Final = frozenset({"task", "schedule", "args", "kwargs", "options", "relative"})


class crontab:  # Celery's name
    """A cron schedule, written as Celery writes it: ``crontab(minute=0, hour=3)``,
    ``crontab(minute="*/15")``, ``crontab(hour=7, minute=30, day_of_week="mon-fri")``."""

    def __init__(
        self,
        minute: Any = "*",
        hour: Any = "*",
        day_of_week: Any = "*",
        day_of_month: Any = "*",
        month_of_year: Any = "*",
        **options: Any,
    ) -> None:
        if options:
            raise NotSupported(f"crontab({', '.join(sorted(options))}=)", "give the five fields")
        self.minute = _field(minute, "minute")
        self.hour = _field(hour, "hour")
        self.day_of_week = _field(day_of_week, "day_of_week")
        self.day_of_month = _field(day_of_month, "day_of_month")
        self.month_of_year = _field(month_of_year, "month_of_year")

    @property
    def expression(self) -> str:
        """The 5-field cron expression (minute hour day-of-month month day-of-week)."""
        return " ".join(
            (self.minute, self.hour, self.day_of_month, self.month_of_year, self.day_of_week)
        )

    def __repr__(self) -> str:
        return f"<crontab: {self.expression}>"


def _field(value: Any, name: str) -> str:
    if isinstance(value, bool):
        raise ConfigurationError(f"crontab {name} must be a number, text or a set, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return "".join(value.split())
    if isinstance(value, set | frozenset | list | tuple) and value:
        return ",".join(str(v) for v in sorted(value, key=str))
    raise ConfigurationError(f"crontab {name} must be a number, text or a set, got {value!r}")


def schedule_options(
    name: str, entry: Mapping[str, Any], timezone: str | None
) -> tuple[str, dict[str, Any]]:
    """One ``beat_schedule`` entry as (the task name, `Queue.schedule` keywords)."""
    if not isinstance(entry, Mapping) or "task" not in entry or "schedule" not in entry:
        raise ConfigurationError(
            f"beat_schedule[{name!r}] must be a dict with 'task' and 'schedule'"
        )
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ConfigurationError(
            f"beat_schedule[{name!r}]: unknown keys {', '.join(sorted(unknown))}"
        )
    if entry.get("options"):
        raise NotSupported(f"beat_schedule[{name!r}]['options']", "set priority on the task")
    if entry.get("relative"):
        raise NotSupported(
            f"beat_schedule[{name!r}]['relative']", "slots are whole multiples of the interval"
        )
    timing = entry["schedule"]
    options: dict[str, Any] = {
        "name": name,
        "payload": {
            "args": list(entry.get("args") or ()),
            "kwargs": dict(entry.get("kwargs") or {}),
        },
    }
    if isinstance(timing, crontab):
        options["cron"] = timing.expression
        options["tz"] = timezone or "UTC"
    elif isinstance(timing, timedelta):
        options["every"] = timing.total_seconds()
    elif isinstance(timing, int | float) and not isinstance(timing, bool):
        options["every"] = float(timing)
    else:
        raise NotSupported(
            f"beat_schedule[{name!r}] schedule of type {type(timing).__name__} "
            "(solar, custom schedules)",
            "use crontab(), a timedelta or a number of seconds",
        )
    return str(entry["task"]), options
