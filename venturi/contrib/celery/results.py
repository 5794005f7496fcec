"""`AsyncResult` and `GroupResult`: a task's state and return value, read from the jobs
table and journal of the app's queue (results live in PostgreSQL)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from ulid import ULID

from venturi.errors import JobCancelled, JobFailed
from venturi.models import JobId

from . import states
from .current import current_app
from .exceptions import NotSupported, TaskRevokedError
from .exceptions import TimeoutError as ResultTimeout

if TYPE_CHECKING:
    from .app import Celery

# The line the compatible task runner writes into a failed job's journal note: the
# exception's importable type and its message, so `get()` can raise that type again.
ERROR_LINE: Final = "task raised "
_ERROR_PATTERN: Final = re.compile(r"task raised ([A-Za-z_][\w.]*): ?(.*)")
# `get(timeout=None)` waits for ever, in slices a queue's `result` accepts.
_WAIT_SLICE: Final = 3600.0


def error_line(exc: BaseException) -> str:
    """The note line that names ``exc``'s type and message (see `error_from_note`)."""
    cls = type(exc)
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{ERROR_LINE}{cls.__module__}.{cls.__qualname__}: {message}"


def error_from_note(note: str | None) -> BaseException | None:
    """The exception a failed task raised, rebuilt from its journal note: its type when
    importable (an Exception subclass taking a message), else None."""
    for line in (note or "").splitlines():
        match = _ERROR_PATTERN.fullmatch(line)
        if match is None:
            continue
        path, message = match.groups()
        module_name, _, name = path.rpartition(".")
        try:
            found: Any = importlib.import_module(module_name)
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError, ValueError):
            return None
        if not (isinstance(found, type) and issubclass(found, Exception)):
            return None
        try:
            return found(message) if message else found()
        except Exception:
            return None
    return None


class AsyncResult:
    """A task's result: ``AsyncResult(task_id)`` or what ``delay``/``apply_async`` return.

    ``state``/``status`` read the job's record each time (PENDING for an id no job has,
    as Celery reports it). ``get`` waits through the queue's LISTEN connection.
    """

    def __init__(
        self, id: JobId, app: Celery | None = None, parent: AsyncResult | None = None
    ) -> None:
        self.id = str(id)
        self.app = app if app is not None else current_app()
        self.parent = parent

    @property
    def task_id(self) -> str:
        return self.id

    def _record(self) -> Any:
        return self.app.venturi_queue().get(self.id)

    @property
    def state(self) -> str:
        """PENDING, STARTED, RETRY, FAILURE, SUCCESS or REVOKED, read now."""
        return states.state_of(self._record())

    status = state

    def ready(self) -> bool:
        """True once the task has finished (SUCCESS, FAILURE or REVOKED)."""
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    @property
    def result(self) -> Any:
        """The return value once SUCCESS, the exception once FAILURE or REVOKED, else None."""
        if not self.ready():
            return None
        return self.get(timeout=1.0, propagate=False)

    info = result

    @property
    def traceback(self) -> str | None:
        """The failed run's journal note (its traceback), or None."""
        if self.state != states.FAILURE:
            return None
        journal = self.app.venturi_queue().journal(self.id)
        notes = [row.note for row in journal if row.note]
        return notes[-1] if notes else None

    def get(
        self,
        timeout: float | None = None,
        propagate: bool = True,
        interval: float = 0.5,
        disable_sync_subtasks: bool = True,
        **options: Any,
    ) -> Any:
        """The return value, waiting up to ``timeout`` seconds (None: for ever).

        A failed task raises its own exception type again when that is importable (else
        `venturi.JobFailed`), a revoked one `TaskRevokedError`, and the wait
        `TimeoutError` (a subclass of the builtin); with ``propagate=False`` the
        exception is returned instead of raised. ``interval`` is accepted and unused:
        the wait is woken by a notification, not by polling.
        """
        for name in ("callback", "on_message", "on_interval"):
            if options.get(name) is not None:
                raise NotSupported(f"AsyncResult.get({name}=...)", "read .state in a loop")
        queue = self.app.venturi_queue()
        try:
            if timeout is None:
                while True:
                    try:
                        return queue.result(self.id, _WAIT_SLICE)
                    except TimeoutError:
                        continue
            return queue.result(self.id, timeout)
        except JobFailed as exc:
            error: BaseException = error_from_note(exc.note) or exc
        except JobCancelled as exc:
            error = TaskRevokedError(f"task {self.id} was revoked: {exc.note or 'cancelled'}")
        except TimeoutError:
            raise ResultTimeout(f"task {self.id} did not finish within {timeout:g}s") from None
        if propagate:
            raise error
        return error

    wait = get

    def revoke(self, terminate: bool = False, signal: str | None = None, **_: Any) -> bool:
        """Cancel the task (venturi's ``cancel``): a pending one never runs, a running
        one sees ``stopping`` set (nothing is killed; ``terminate`` is accepted and has
        no other effect). True if it was cancelled now."""
        return self.app.venturi_queue().cancel(self.id)

    def forget(self) -> None:
        raise NotSupported(
            "AsyncResult.forget()", "results are deleted with their job by the retention"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AsyncResult) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"

    def __str__(self) -> str:
        return self.id


class GroupResult:
    """The results of a group's tasks, in the group's order."""

    def __init__(self, id: JobId | None, results: Iterable[AsyncResult]) -> None:
        self.id = str(id) if id is not None else str(ULID())
        self.results = list(results)

    def __iter__(self) -> Iterator[AsyncResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> AsyncResult:
        return self.results[index]

    def get(
        self, timeout: float | None = None, propagate: bool = True, **options: Any
    ) -> list[Any]:
        """Every task's return value, in order (each waited for as `AsyncResult.get`)."""
        return [r.get(timeout=timeout, propagate=propagate, **options) for r in self.results]

    join = get

    def ready(self) -> bool:
        return all(r.ready() for r in self.results)

    def successful(self) -> bool:
        return all(r.successful() for r in self.results)

    def failed(self) -> bool:
        return any(r.failed() for r in self.results)

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(1 for r in self.results if r.successful())

    def revoke(self, terminate: bool = False, **options: Any) -> None:
        for r in self.results:
            r.revoke(terminate=terminate, **options)

    def save(self) -> None:
        raise NotSupported("GroupResult.save()", "keep the task ids and rebuild the results")

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self.results)}]>"
