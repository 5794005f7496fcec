"""One worker run of a task: its ``request``, the parents' results put first (a canvas
step), and the function's outcome mapped onto venturi's.

Celery's rules decide the outcome: `Retry` (``self.retry``) runs the task again after
its countdown; an exception in ``autoretry_for`` retries with the task's backoff until
``max_retries``; any other exception fails the task at once (venturi's ``Fail``), with
a journal note whose first line names the exception's type for ``AsyncResult.get``.
"""

from __future__ import annotations

import contextvars
import json
import random
import traceback
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs
from ulid import ULID

from venturi.context import JobContext
from venturi.outcomes import Fail, Pause
from venturi.outcomes import Retry as VenturiRetry

from .exceptions import Retry, TaskRevokedError
from .results import error_line

if TYPE_CHECKING:
    from .tasks import Task


@attrs.frozen
class Request:
    """What ``self.request`` tells a bound task about its run."""

    id: str | None = None
    retries: int = 0
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    task: str | None = None
    hostname: str | None = None
    called_directly: bool = True
    is_eager: bool = False
    delivery_info: Mapping[str, Any] = attrs.field(factory=dict)
    eta: str | None = None
    expires: str | None = None


current_request: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "venturi_celery_request", default=None
)


def run_task(
    task: Task,
    ctx: JobContext,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    feed: str | None,
    parents: Sequence[str],
    expires: str | None,
) -> Any:
    """Run ``task`` for the job of ``ctx`` (see the module docstring)."""
    if expires is not None and datetime.now(UTC) >= datetime.fromisoformat(expires):
        raise Fail(error_line(TaskRevokedError(f"task expired at {expires}")))
    if feed == "one":
        args.insert(0, ctx.parents.get(ULID.from_str(parents[0])))
    elif feed == "list":
        args.insert(0, [ctx.parents.get(ULID.from_str(p)) for p in parents])
    request = Request(
        id=str(ctx.job.id),
        retries=ctx.failures,
        args=tuple(args),
        kwargs=kwargs,
        task=task.name,
        hostname=ctx.job.claimed_by,
        called_directly=False,
        expires=expires,
    )
    token = current_request.set(request)
    try:
        return _json_result(task(*args, **kwargs))
    except Retry as exc:
        raise VenturiRetry(after=exc.when, note=str(exc)) from exc
    except (VenturiRetry, Pause, Fail):
        raise
    except Exception as exc:
        if isinstance(exc, task.autoretry_for) and not isinstance(exc, task.dont_autoretry_for):
            try:
                task.retry(
                    exc=exc,
                    countdown=autoretry_countdown(task, request.retries),
                    max_retries=task.retry_kwargs.get("max_retries"),
                )
            except Retry as retry:
                raise VenturiRetry(after=retry.when, note=_failure_note(exc)) from exc
            except Exception as final:
                raise Fail(_failure_note(final)) from final
        raise Fail(_failure_note(exc)) from exc
    finally:
        current_request.reset(token)


def autoretry_countdown(task: Task, retries: int) -> float:
    """Seconds before an autoretry: Celery's exponential backoff with full jitter, or
    ``retry_kwargs['countdown']``, else ``default_retry_delay``."""
    if not task.retry_backoff:
        countdown = task.retry_kwargs.get("countdown")
        return task.default_retry_delay if countdown is None else float(countdown)
    longest = min(task.retry_backoff_max, task.retry_backoff * 2.0**retries)
    return random.uniform(0, longest) if task.retry_jitter else longest


def _json_result(value: Any) -> Any:
    """``value`` if JSON can hold it; else the run fails (venturi would drop the value
    with a note, where Celery's JSON result backend refuses it)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the task's return value is not JSON-serialisable: {exc}") from None
    return value


def _failure_note(exc: BaseException) -> str:
    return error_line(exc) + "\n" + "".join(traceback.format_exception(exc))
