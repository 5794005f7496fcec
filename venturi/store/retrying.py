"""The error policy: which database errors pass (retry them) and which do not, and the
one backoff-and-retry helper every loop and every enqueue uses.

Transient errors say nothing about the statement itself: the server went away, a lock
or the statement timed out, two transactions deadlocked, a standby refused a write after
a failover. The same statement may succeed a moment later, and a statement that failed
with one of them changed nothing. Fatal errors say the queue cannot work here at all
(its tables are gone, a permission was revoked): a worker stops on them, loudly. Any
other error belongs to the one statement that raised it.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

import attrs
import psycopg

from venturi.errors import SchemaError, StoreError, StoreUnavailable, first_line

T = TypeVar("T")


class ErrorClass(enum.Enum):
    TRANSIENT = "transient"  # retry with backoff: it changed nothing and may pass
    FATAL = "fatal"  # the queue cannot work on this database: stop the worker
    STATEMENT = "statement"  # this statement's own failure: give up on it


# SQLSTATEs (or whole classes, two characters) after which the same statement may pass.
_TRANSIENT: Final = {
    "08": "connection failure",
    "40001": "serialization failure",
    "40003": "statement completion unknown",
    "40P01": "deadlock",
    "55P03": "lock not available",
    "57014": "statement timeout or cancel",
    "57P01": "server shutting down",
    "57P02": "server crashed",
    "57P03": "server not accepting connections yet",
    "57P05": "idle session timeout",
    "25P03": "idle-in-transaction timeout",
    "25006": "read-only server (a standby after failover?)",
    "53000": "insufficient resources",
    "53200": "server out of memory",
    "53300": "too many connections",
    "58030": "server I/O error",
}
# SQLSTATEs (or classes) after which nothing this queue does can work.
_FATAL: Final = {
    "42P01": "a queue table is missing (run `venturi migrate` or queue.migrate())",
    "3F000": "schema missing",
    "42703": "a queue column is missing (schema out of date?)",
    "42883": "a function is missing",
    "42501": "permission denied",
    "28": "authorization failed",
    "3D000": "database does not exist",
}
_SCHEMA_STATES: Final = ("42P01", "3F000", "42703", "42883")


def _lookup(table: dict[str, str], state: str) -> str | None:
    return table.get(state) or table.get(state[:2])


def classify(exc: BaseException) -> ErrorClass:
    """What an error from the database means for the statement that raised it."""
    if isinstance(exc, StoreError):
        cause = exc.__cause__
        if isinstance(cause, psycopg.Error):
            return classify(cause)
        if isinstance(exc, StoreUnavailable):
            return ErrorClass.TRANSIENT
        return ErrorClass.FATAL if isinstance(exc, SchemaError) else ErrorClass.STATEMENT
    if not isinstance(exc, psycopg.Error):
        return ErrorClass.STATEMENT
    state = exc.sqlstate
    if state is None:
        # No answer from the server: libpq lost the connection, or the pool had none.
        return (
            ErrorClass.TRANSIENT
            if isinstance(exc, psycopg.OperationalError)
            else (ErrorClass.STATEMENT)
        )
    if _lookup(_TRANSIENT, state):
        return ErrorClass.TRANSIENT
    if _lookup(_FATAL, state):
        return ErrorClass.FATAL
    return ErrorClass.STATEMENT


# SQLSTATEs (or classes) with which the server refuses a value a statement carries (text it
# cannot encode, a time or number out of range, a value too large for an index row). The
# statement changed nothing; the same values would be refused again, other values not.
_REFUSED_VALUE: Final = {
    "22": "data exception",
    "54000": "program limit exceeded",
}


def refusal(exc: BaseException) -> str | None:
    """What was refused, when ``exc`` is the database (or psycopg, before sending it)
    refusing a value of the statement; None for any other error. Text psycopg cannot
    encode for the server raises `UnicodeEncodeError`, a NUL in text a `psycopg.DataError`
    without a SQLSTATE."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    if isinstance(cause, UnicodeError):
        return f"{type(cause).__name__}: {first_line(cause)}"
    if not isinstance(cause, psycopg.Error):
        return None
    state = cause.sqlstate
    if state is None:
        return f"DataError: {first_line(cause)}" if isinstance(cause, psycopg.DataError) else None
    return f"{state}: {first_line(cause)}" if _lookup(_REFUSED_VALUE, state) else None


def outcome_unknown(exc: BaseException) -> bool:
    """True when the statement may have committed although it raised: the connection
    broke before the answer came (no SQLSTATE from the server, or class 08). Every other
    error was the server's answer, so the statement changed nothing."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    if not isinstance(cause, psycopg.Error):
        return False
    state = cause.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02")


def store_error(exc: psycopg.Error) -> StoreError:
    """The venturi error for a psycopg error (raise it ``from exc``)."""
    state = exc.sqlstate
    line = first_line(exc)
    kind = classify(exc)
    if kind is ErrorClass.TRANSIENT:
        reason = _lookup(_TRANSIENT, state) if state else None
        if reason is None or state is None or state.startswith("08") or state in ("57P01",):
            return StoreUnavailable(f"database unavailable: {line}")
        return StoreUnavailable(f"{reason} ({state}): {line}")
    if kind is ErrorClass.FATAL:
        assert state is not None
        reason = _lookup(_FATAL, state)
        message = f"{reason} ({state}): {line}"
        return SchemaError(message) if state in _SCHEMA_STATES else StoreError(message)
    return StoreError(f"statement failed ({state or type(exc).__name__}): {line}")


@attrs.frozen
class RetryDelays:
    """Exponential delays with full jitter: the n-th consecutive failure waits a random
    time up to ``min(cap, base * 2**(n-1))``, so many clients failing together (a
    deadlock victim and its peers, every worker after a restart) do not retry in step."""

    base: float = 0.05
    cap: float = 5.0

    def delay(self, failures: int) -> float:
        if failures < 1:
            return 0.0
        ceiling = min(self.cap, self.base * 2.0 ** min(failures - 1, 30))
        return random.uniform(ceiling / 2, ceiling)


DEFAULT_BACKOFF: Final = RetryDelays()


def retry(
    operation: Callable[[], T],
    *,
    what: str,
    logger: logging.Logger,
    deadline: float | None = None,
    stop: threading.Event | None = None,
    backoff: RetryDelays = DEFAULT_BACKOFF,
    retry_unknown_outcome: bool = True,
) -> T:
    """Run ``operation``, retrying transient database errors with ``backoff``.

    Gives up, raising the last error, when the error is not transient, when
    ``deadline`` (a `time.monotonic` value) would pass during the next wait, when
    ``stop`` is set, or (``retry_unknown_outcome=False``) when the failed attempt may
    have committed. The first retry of a run is logged at INFO, later ones at WARNING
    every tenth attempt, so a long outage does not flood the log.
    """
    failures = 0
    while True:
        try:
            return operation()
        except (StoreError, psycopg.Error) as exc:
            if classify(exc) is not ErrorClass.TRANSIENT:
                raise
            if not retry_unknown_outcome and outcome_unknown(exc):
                raise
            failures += 1
            wait = backoff.delay(failures)
            if deadline is not None and time.monotonic() + wait > deadline:
                raise
            if failures == 1 or failures % 10 == 0:
                level = logging.INFO if failures == 1 else logging.WARNING
                logger.log(level, "%s failed (%s); retrying", what, first_line(exc))
            if stop is None:
                time.sleep(wait)
            elif stop.wait(wait):
                raise
