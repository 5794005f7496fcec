"""When a worker process is recycled: after a number of runs, or above a memory size."""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from venturi.errors import ConfigurationError
from venturi.processes.channel import Report

_UNITS: Final = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_SIZE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in ``512MB``, ``1.5GB``, ``800M``, ``64KiB`` or a bare number of bytes (units
    are powers of 1024). Raises `ConfigurationError` for anything else."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ConfigurationError(f"{text!r} is not a size; write e.g. 512MB, 2GB or 800M")
    size = int(float(match[1]) * _UNITS[match[2].lower()])
    if size < 1:
        raise ConfigurationError(f"{text!r} is not a size above zero")
    return size


def _positive_or_none(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        name = f"{attribute.name}_per_child"
        raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")


@attrs.frozen
class RecyclePolicy:
    """Recycle a worker process once it ended ``max_jobs`` runs or its resident memory
    passed ``max_memory`` bytes (None: never for that reason)."""

    max_jobs: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_memory: int | None = attrs.field(default=None, validator=_positive_or_none)

    def reason(self, report: Report, rss_at_start: int = 0) -> str | None:
        """Why the process that sent ``report`` is due for recycling, or None.

        A process already above ``max_memory`` when it began (``rss_at_start``) is not
        recycled for memory: its replacement would be too, over and over.
        """
        if self.max_jobs is not None and report.jobs >= self.max_jobs:
            return f"ran {report.jobs} jobs (--max-jobs-per-child {self.max_jobs})"
        if self.over_memory(rss_at_start):
            return None
        if self.max_memory is not None and report.rss > self.max_memory:
            return (
                f"uses {report.rss / 1024**2:.0f} MiB "
                f"(--max-memory-per-child {self.max_memory / 1024**2:.0f} MiB)"
            )
        return None

    def over_memory(self, rss: int) -> bool:
        return self.max_memory is not None and rss > self.max_memory
