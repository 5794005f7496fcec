"""The exceptions venturi raises. Every one derives from `VenturiError`."""

from __future__ import annotations


class VenturiError(Exception):
    """Base class of every error venturi raises on purpose."""


class InvalidPrefix(VenturiError, ValueError):
    """A table-name prefix broke the naming rule; nothing was written."""


class InvalidJob(VenturiError, ValueError):
    """A job's kind, priority, timing or options broke a rule; nothing was written."""


class InvalidPayload(InvalidJob):
    """A payload is not a JSON object PostgreSQL can store exactly; nothing was written."""


class UnknownKind(VenturiError, LookupError):
    """A strict queue was asked to enqueue a kind that no handler is registered for."""


class ConfigurationError(VenturiError, ValueError):
    """A queue or worker option is out of range (pool size, concurrency, lease, ...)."""


class StoreError(VenturiError):
    """A database statement failed. Retrying cannot fix it unless it is the subclass
    `StoreUnavailable` (a permission was revoked, the schema was dropped, ...)."""


class StoreUnavailable(StoreError):
    """The database could not be reached, did not answer in time, or refused a statement
    for a passing reason (deadlock, lock or statement timeout, serialization failure):
    trying again later may succeed. Raised after venturi's own bounded retries."""


class SchemaError(StoreError):
    """The database schema does not match what this version of venturi expects."""


class MigrationLockTimeout(SchemaError):
    """Another session held the prefix's migration lock for longer than allowed."""


class DuplicateJob(VenturiError):
    """A transition would create a second pending job with the same dedup key."""


class WorkerFailed(VenturiError):
    """A worker stopped itself: a permanent database error, or one of its threads kept
    failing. The original error is the ``__cause__``."""


class UnknownJob(VenturiError, LookupError):
    """No job has this id (never enqueued, or deleted since by retention or cleanup)."""


class JobFailed(VenturiError):
    """The job waited for ended dead; ``note`` is its last journal note."""

    def __init__(self, job_id: object, note: str | None) -> None:
        super().__init__(f"job {job_id} is dead: {note or 'no note'}")
        self.job_id = job_id
        self.note = note


class JobCancelled(VenturiError):
    """The job waited for was cancelled; ``note`` is its last journal note."""

    def __init__(self, job_id: object, note: str | None) -> None:
        super().__init__(f"job {job_id} was cancelled: {note or 'no note'}")
        self.job_id = job_id
        self.note = note


class ForkedError(VenturiError):
    """A queue or worker created before `os.fork()` was used in the child process."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name if it has none), for
    one-line log records and error messages."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


class ListenerPolling(VenturiError):
    """The queue's LISTEN connection cannot hear notifications (it leads to a
    transaction-pooling proxy, or no NOTIFY came back): workers would poll."""
