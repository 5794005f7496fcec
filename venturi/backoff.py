"""Retry delays: how long a failed job waits before its next attempt."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

from venturi.durations import Duration, delay_seconds
from venturi.errors import ConfigurationError

Backoff = Callable[[int], Duration]
"""A policy: the number of failures so far (1 for the first) -> delay before the next run."""


@attrs.frozen
class Exponential:
    """``base * 2 ** (failures - 1)`` seconds, capped at ``cap``, spread by ±``jitter``."""

    base: float = 1.0
    cap: float = 3600.0
    jitter: float = 0.1

    def __attrs_post_init__(self) -> None:
        if not (self.base >= 0 and self.cap >= 0):
            raise ConfigurationError(
                f"exponential backoff needs base >= 0 and cap >= 0, got base={self.base}, "
                f"cap={self.cap}"
            )
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"jitter must be within [0, 1], got {self.jitter}")

    def __call__(self, failures: int) -> float:
        raw = self.base * 2.0 ** min(max(failures, 1) - 1, 62)
        delay = min(self.cap, raw)
        if self.jitter:
            delay *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(0.0, min(self.cap, delay))


@attrs.frozen
class Constant:
    """The same delay after every failure."""

    delay: float

    def __attrs_post_init__(self) -> None:
        if not self.delay >= 0:
            raise ConfigurationError(f"constant backoff delay must be >= 0, got {self.delay}")

    def __call__(self, failures: int) -> float:
        return self.delay


def exponential(base: Duration = 1.0, cap: Duration = 3600.0, jitter: float = 0.1) -> Exponential:
    """Exponential backoff with a cap and jitter; the default policy."""
    return Exponential(delay_seconds(base, "base"), delay_seconds(cap, "cap"), jitter)


def constant(delay: Duration) -> Constant:
    """The same delay after every failure."""
    return Constant(delay_seconds(delay, "delay"))


def delay_for(policy: Backoff, failures: int) -> float:
    """Seconds the policy gives after ``failures`` failures, checked like any delay (at
    most `MAX_DELAY_SECONDS`); raises `InvalidJob` otherwise."""
    return delay_seconds(policy(failures), "backoff delay")
