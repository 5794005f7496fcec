"""Running one claimed job: call its handler and turn what happened into a settlement."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from typing import Any

from venturi.backoff import delay_for
from venturi.context import JobContext, activate, deactivate
from venturi.coroutines import finish
from venturi.errors import InvalidJob, InvalidPayload
from venturi.models import JobRecord
from venturi.outcomes import Fail, Pause, Retry
from venturi.registry import JobDefinition
from venturi.schedules.schedule import SLOT_PARAMETER, with_slot_time
from venturi.settlements import Settlement, error_facts, storable_text

logger = logging.getLogger("venturi.worker")


def job_extra(job: JobRecord) -> dict[str, Any]:
    """Log-record fields for a job (``extra=``): its id, kind and run number (``attempt``
    is the run number too, under the name earlier releases used)."""
    return {"job_id": str(job.id), "kind": job.kind, "run": job.run_count, "attempt": job.run_count}


def execute(definition: JobDefinition, ctx: JobContext) -> Settlement:
    """Run the handler for ``ctx.job`` and return a settlement the store can apply."""
    settlement = _run_handler(definition, ctx)
    try:
        _ = settlement.attachment_json
        _check_size(settlement.carry_json, "carry", definition.max_result_bytes)
        _ = settlement.facts_json
    except InvalidPayload as exc:
        note = _join(settlement.note, f"run outcome not storable: {exc}")
        return Settlement.retry(
            _backoff(definition, ctx.job), note=note, facts=_storable(settlement)
        )
    return settlement


def _run_handler(definition: JobDefinition, ctx: JobContext) -> Settlement:
    """Call the handler in this thread and map what happened to a settlement.

    An ``async def`` handler's coroutine runs to completion here, on an event loop of
    its own (`venturi.coroutines`). Never raises for what the handler does;
    `BaseException`s that are not `Exception`s (KeyboardInterrupt, SystemExit) propagate.
    """
    job = ctx.job
    try:
        definition.check_payload(job.payload)
    except InvalidJob as exc:
        return Settlement.dead(note=str(exc))
    arguments: Mapping[str, Any] = job.payload
    if SLOT_PARAMETER in definition.signature.parameters:
        arguments = with_slot_time(arguments)  # a schedule's slot, sent as ISO text
    token = activate(ctx)
    try:
        if definition.context:
            result = finish(definition.func(ctx, **arguments))
        else:
            result = finish(definition.func(**arguments))
    except Retry as exc:
        after = exc.after if exc.after is not None else _backoff(definition, job)
        return Settlement.retry(
            after, carry=exc.carry, note=_note(ctx, exc.note), facts=_facts(ctx)
        )
    except Pause as exc:
        note = _note(ctx, exc.note)
        return Settlement.pause(exc.after, exc.until, carry=exc.carry, note=note, facts=_facts(ctx))
    except Fail as exc:
        return Settlement.dead(note=_note(ctx, exc.note), facts=_facts(ctx))
    except Exception as exc:
        return failed(definition, ctx, exc)
    finally:
        deactivate(token)
    return _completed(definition, ctx, result)


def failed(definition: JobDefinition, ctx: JobContext, exc: BaseException) -> Settlement:
    """A retry (dead past max_attempts) noting the exception's type, message, traceback."""
    job = ctx.job
    message = _message(exc)
    logger.warning(
        "job %s (%s) attempt %d raised %s: %s",
        job.id,
        job.kind,
        job.run_count,
        type(exc).__name__,
        storable_text(message),  # one line of the log, cut as the journal's note is
        extra=job_extra(job),
    )
    text = "".join(traceback.format_exception(exc))
    facts = {**ctx.facts, **error_facts(exc, message)}
    return Settlement.retry(_backoff(definition, job), note=_note(ctx, text), facts=facts)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a handler's exception whose __str__ itself fails
        return f"<{type(exc).__name__}: str() failed>"


def _backoff(definition: JobDefinition, job: JobRecord) -> float:
    try:
        return delay_for(definition.backoff, job.failure_count + 1)
    except Exception:
        logger.exception("backoff of %s failed; retrying at once", job.kind, extra=job_extra(job))
        return 0.0


def _completed(definition: JobDefinition, ctx: JobContext, result: Any) -> Settlement:
    attachment = result if result is not None else ctx.attachment
    facts = _facts(ctx)
    settlement = Settlement.complete(attachment=attachment, note=_note(ctx, None), facts=facts)
    try:
        text = settlement.attachment_json  # encoded once here, reused by the store
    except InvalidPayload as exc:
        note = _join(settlement.note, f"return value not kept: not JSON-serialisable ({exc})")
        return Settlement.complete(note=note, facts=facts)
    try:
        _check_size(text, "result", definition.max_result_bytes)
    except InvalidPayload as exc:
        # Dead, as Fail would be: the same input would make the same result again.
        note = _join(settlement.note, f"{exc}; the job is dead")
        return Settlement.dead(note=note, facts=facts)
    return settlement


def _check_size(text: str | None, field: str, limit: int) -> None:
    """Raise `InvalidPayload` if the JSON ``text`` is more than ``limit`` bytes."""
    if text is None or len(text) * 4 <= limit:  # UTF-8 spends at most 4 bytes a character
        return
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidPayload(
            f"{field} is {size} bytes of JSON, {size - limit} over the limit "
            f"(max_result_bytes={limit}); not kept"
        )


def _facts(ctx: JobContext) -> dict[str, Any] | None:
    return dict(ctx.facts) if ctx.facts else None


def _storable(settlement: Settlement) -> dict[str, Any] | None:
    """The settlement's facts if they encode as JSON, else None (they were what failed)."""
    try:
        _ = settlement.facts_json
    except InvalidPayload:
        return None
    return None if settlement.facts is None else dict(settlement.facts)


def _note(ctx: JobContext, text: str | None) -> str | None:
    # Cut and made storable by the settlement (`storable_text`).
    return _join("\n".join(ctx.notes) or None, text)


def _join(first: str | None, second: str | None) -> str | None:
    if first and second:
        return f"{first}\n{second}"
    return first or second
