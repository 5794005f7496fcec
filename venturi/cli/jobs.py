"""Sub-commands that enqueue and read jobs: enqueue, job, workflow, history, dead."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import attrs
import click
from rich.table import Table
from ulid import ULID

from venturi.cli.render import (
    console,
    echo_json,
    journal_table,
    show_json,
    show_time,
    summary,
    table,
)
from venturi.cli.support import DURATION, JOB_ID, CliState, pass_state, require_job
from venturi.client import Queue
from venturi.errors import first_line
from venturi.models import DurableState, JobRecord, JobStatus, JournalRecord
from venturi.payload import MAX_DEPTH

_STATUSES = [s.value for s in JobStatus]


def _parse_payload(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    source = sys.stdin.read() if text == "-" else text
    try:
        value = json.loads(source)
    except RecursionError:
        # Python's parser recurses once per level; a venturi payload nests at most
        # MAX_DEPTH levels anyway.
        raise click.BadParameter(
            f"nests deeper than {MAX_DEPTH} levels (the most a payload may)",
            param_hint="'JSON'",
        ) from None
    except ValueError as exc:  # malformed, or an integer past Python's digit limit
        raise click.BadParameter(
            f"not valid JSON: {first_line(exc)}", param_hint="'JSON'"
        ) from None
    if not isinstance(value, dict):
        raise click.BadParameter(
            f"must be a JSON object (the job's keyword arguments), got {type(value).__name__}",
            param_hint="'JSON'",
        )
    return value


def _parse_at(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO 8601 time such as 2030-01-31T09:00:00+00:00",
            param_hint="'--at'",
        ) from None


@click.command()
@click.argument("kind")
@click.argument("payload", required=False, metavar="[JSON]")
@click.option("--delay", type=DURATION, help="Run no sooner than this from now (30s, 5m, ...).")
@click.option("--at", "at_text", metavar="TIME", help="Run at this ISO 8601 time (with offset).")
@click.option("--priority", type=int, help="Higher runs first (smallint; default 0).")
@click.option("--dedup-key", help="At most one pending job of KIND holds this key.")
@click.option(
    "--on-duplicate",
    type=click.Choice(["keep", "replace"]),
    default="keep",
    show_default=True,
    help="With --dedup-key: keep the pending job's payload, or replace it with this one.",
)
@click.option("--max-attempts", type=click.IntRange(min=1), help="Runs before it goes dead.")
@click.option("--concurrency-key", help="For a kind with key_concurrency: the job's key.")
@click.option(
    "--depends-on",
    multiple=True,
    type=JOB_ID,
    metavar="ID",
    help="Run once this job completed (repeatable).",
)
@click.option(
    "--on-parent-failure",
    type=click.Choice(["cancel", "run"]),
    default="cancel",
    show_default=True,
    help="With --depends-on: what a dead or cancelled parent does to this job.",
)
@pass_state
def enqueue(
    state: CliState,
    *,
    kind: str,
    payload: str | None,
    delay: float | None,
    at_text: str | None,
    priority: int | None,
    dedup_key: str | None,
    on_duplicate: str,
    max_attempts: int | None,
    concurrency_key: str | None,
    depends_on: tuple[str, ...],
    on_parent_failure: str,
) -> None:
    """Enqueue one job; prints its id.

    KIND is the job kind; JSON its payload, an object of the handler's keyword arguments
    (`-` reads it from stdin; default {}).
    """
    data = _parse_payload(payload)
    options: dict[str, Any] = {
        "priority": priority,
        "delay": delay,
        "at": _parse_at(at_text),
        "dedup_key": dedup_key,
        "max_attempts": max_attempts,
        "concurrency_key": concurrency_key,
        "depends_on": list(depends_on) or None,
        "on_parent_failure": on_parent_failure if depends_on else None,
    }
    chosen = {name: value for name, value in options.items() if value is not None}
    job_id = state.queue().enqueue(kind, data, on_duplicate=on_duplicate, **chosen)
    click.echo(str(job_id))


def _jsonable(_record: Any, _field: Any, value: Any) -> Any:
    """An attrs value serializer: ids and statuses as text, times in ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value) if isinstance(value, ULID | JobStatus) else value


def _record_json(record: JobRecord) -> dict[str, Any]:
    """Every field of the record, as JSON values (its durable state apart)."""
    return attrs.asdict(
        record,
        recurse=False,
        value_serializer=_jsonable,
        filter=lambda field, _: field.name != "durable",
    )


def _durable_json(state: DurableState | None) -> dict[str, Any]:
    """A job's steps, signals and wait as JSON values (empty for a job without them)."""
    if state is None:
        return {"steps": [], "signals": [], "waiting": None}
    return attrs.asdict(state, value_serializer=_jsonable)


def _durable_rows(state: DurableState | None) -> Table | None:
    """A table of the job's recorded steps and what it waits for, or None."""
    if state is None or (not state.steps and not state.signals and state.waiting is None):
        return None
    grid = table("step", "name", "run", "recorded", "result bytes")
    for step in state.steps:
        grid.add_row(
            str(step.seq), step.name, str(step.run_no), show_time(step.recorded_at), str(step.size)
        )
    for sent in state.signals:
        grid.add_row("signal", sent.name, "", show_time(sent.sent_at), "")
    if state.waiting is not None:
        wait = state.waiting
        grid.add_row(
            "waiting", f"{wait.what} {wait.name}", "", f"until {show_time(wait.until)}", ""
        )
    return grid


def _journal_json(entry: JournalRecord) -> dict[str, Any]:
    return {
        "run": entry.run_no,
        "outcome": entry.outcome.value,
        "recorded_at": entry.recorded_at.isoformat(),
        "note": entry.note,
        "attachment": entry.attachment,
    }


@click.command("job")
@click.argument("job_id", type=JOB_ID, metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, notes in full.")
@pass_state
def job(state: CliState, job_id: str, as_json: bool) -> None:
    """Show one job, the steps its durable runs recorded, what it waits for, and its
    journal (every run and transition)."""
    queue = state.queue()
    record = require_job(queue, job_id)
    entries = queue.journal(record.id)
    if as_json:
        echo_json(
            {
                **_record_json(record),
                **_durable_json(record.durable),
                "journal": [_journal_json(e) for e in entries],
            }
        )
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    rows = [
        ("id", str(record.id)),
        ("kind", record.kind),
        ("status", record.status.value),
        ("priority", str(record.priority)),
        ("runs", str(record.run_count)),
        ("failures", f"{record.failure_count} (dead at {record.max_attempts})"),
        ("created", show_time(record.created_at)),
        ("visible at", show_time(record.visible_at)),
        ("finished", show_time(record.finished_at)),
        ("claimed by", record.claimed_by or ""),
        ("lease until", show_time(record.claim_expires_at)),
        ("dedup key", record.dedup_key or ""),
        ("concurrency key", record.concurrency_key or ""),
        ("payload", show_json(record.payload)),
        ("carry", show_json(record.carry)),
    ]
    for name, value in rows:
        grid.add_row(name, value)
    out = console()
    out.print(grid)
    durable = _durable_rows(record.durable)
    if durable is not None:
        out.print(durable)
    out.print(journal_table(entries))


@click.command("workflow")
@click.argument("workflow_id", type=JOB_ID, metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def workflow(state: CliState, workflow_id: str, as_json: bool) -> None:
    """Show every job of a workflow (`Queue.workflow`) with its parents and state."""
    status = state.queue().workflow_status(workflow_id)
    if not status.jobs:
        raise click.ClickException(f"no workflow {workflow_id} (or its jobs were deleted)")
    if as_json:
        jobs = [
            {**_record_json(j.record), "parents": [str(p) for p in j.parents]} for j in status.jobs
        ]
        echo_json({"id": str(status.id), "counts": status.counts(), "jobs": jobs})
        return
    grid = table("id", "kind", "status", "depends on", "runs", "finished")
    for j in status.jobs:
        parents = ", ".join(str(p) for p in j.parents)
        record = j.record
        finished = show_time(record.finished_at)
        grid.add_row(
            str(record.id),
            record.kind,
            record.status.value,
            parents,
            str(record.run_count),
            finished,
        )
    console().print(grid)
    click.echo(", ".join(f"{n} {s}" for s, n in sorted(status.counts().items())))


def _jobs_table(records: list[JobRecord]) -> Table:
    grid = table("id", "kind", "status", "priority", "runs", "created", "finished")
    for r in records:
        grid.add_row(
            str(r.id),
            r.kind,
            r.status.value,
            str(r.priority),
            str(r.run_count),
            show_time(r.created_at),
            show_time(r.finished_at),
        )
    return grid


def _page(
    queue: Queue, kind: str | None, status: str | None, limit: int, before: str | None
) -> list[JobRecord]:
    cursor = None
    if before is not None:
        after = queue.get(before)
        if after is None:
            raise click.BadParameter(
                f"no job {before}; pass the last id of the previous page", param_hint="'--before'"
            )
        cursor = after.cursor
    return queue.history(kind=kind, status=status, before=cursor, limit=limit)


def _next_page_hint(records: list[JobRecord], limit: int, command: str) -> None:
    if len(records) == limit:
        click.echo(f"next page: {command} --before {records[-1].id}", err=True)


_PAGE_OPTIONS = [
    click.option("--kind", help="Only this kind."),
    click.option(
        "--limit", type=click.IntRange(1, 10_000), default=20, show_default=True, help="Page size."
    ),
    click.option(
        "--before",
        type=JOB_ID,
        metavar="CURSOR",
        help="The last id of the previous page (printed after a full page).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print JSON."),
]


def _page_options(func: Any) -> Any:
    for option in reversed(_PAGE_OPTIONS):
        func = option(func)
    return func


@click.command()
@_page_options
@click.option("--status", type=click.Choice(_STATUSES), help="Only jobs in this status.")
@pass_state
def history(
    state: CliState,
    *,
    kind: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
    status: str | None,
) -> None:
    """List jobs, newest first, a page at a time.

    After a full page the command for the next one is printed on stderr.
    """
    records = _page(state.queue(), kind, status, limit, before)
    if as_json:
        echo_json([_record_json(r) for r in records])
    elif records:
        console().print(_jobs_table(records))
    else:
        click.echo("no jobs match")
    _next_page_hint(records, limit, "venturi history")


@click.command()
@_page_options
@pass_state
def dead(state: CliState, kind: str | None, limit: int, before: str | None, as_json: bool) -> None:
    """List dead jobs with why each died.

    The dead-letter list, newest first; requeue them with `venturi requeue`.
    """
    queue = state.queue()
    records = _page(queue, kind, JobStatus.DEAD.value, limit, before)
    reasons = queue.reads.last_notes([r.id for r in records])
    if as_json:
        echo_json([{**_record_json(r), "reason": reasons.get(r.id)} for r in records])
        _next_page_hint(records, limit, "venturi dead")
        return
    if not records:
        click.echo("no dead jobs")
        return
    grid = table("id", "kind", "failures", "died", "reason")
    for r in records:
        reason = summary(reasons.get(r.id))
        grid.add_row(str(r.id), r.kind, str(r.failure_count), show_time(r.finished_at), reason)
    console().print(grid)
    _next_page_hint(records, limit, "venturi dead")
    click.echo("requeue: venturi requeue ID, or venturi requeue --all-dead [--kind K]", err=True)


def job_commands() -> list[click.Command]:
    """The sub-commands that enqueue and read jobs."""
    return [enqueue, job, workflow, history, dead]
