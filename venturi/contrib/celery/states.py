"""Celery's task state names, and how a venturi job's record maps onto them."""

from __future__ import annotations

from typing import Final

from venturi.models import JobRecord, JobStatus

PENDING: Final = "PENDING"
STARTED: Final = "STARTED"
RETRY: Final = "RETRY"
FAILURE: Final = "FAILURE"
SUCCESS: Final = "SUCCESS"
REVOKED: Final = "REVOKED"

READY_STATES: Final = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES: Final = frozenset({PENDING, STARTED, RETRY})
EXCEPTION_STATES: Final = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES: Final = frozenset({FAILURE, REVOKED})
ALL_STATES: Final = READY_STATES | UNREADY_STATES

_TERMINAL: Final = {
    JobStatus.COMPLETED: SUCCESS,
    JobStatus.DEAD: FAILURE,
    JobStatus.CANCELLED: REVOKED,
}


def state_of(record: JobRecord | None) -> str:
    """The Celery state of a job: an unknown id is PENDING (as Celery reports it), a
    claimed job STARTED, a waiting or pending job that failed before RETRY."""
    if record is None:
        return PENDING
    terminal = _TERMINAL.get(record.status)
    if terminal is not None:
        return terminal
    if record.status is JobStatus.CLAIMED:
        return STARTED
    return RETRY if record.failure_count > 0 else PENDING
