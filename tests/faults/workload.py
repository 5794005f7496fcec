"""A mixed workload for in-process workers under injected faults, and the worker's threads.

The ``fault.mix`` kind ends each run as its payload says (complete, retry once, pause
once, fail), optionally after ``ms`` of work, and records every execution in the ledger,
so one batch makes a worker run every settlement statement, its heartbeat and its
completer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Final

from psycopg import sql
from ulid import ULID

import venturi
from tests.faults.scenario import Watch
from tests.support import ledger

MIX_KIND: Final = "fault.mix"
STATEMENT_THREADS: Final = (
    "venturi-dispatcher",
    "venturi-heartbeat",
    "venturi-reaper",
    "venturi-settler",
)


def register_mix(
    queue: venturi.Queue, book: ledger.Ledger, *, lease: float, **options: object
) -> None:
    """Register ``fault.mix`` on ``queue`` (more job options as keywords)."""

    @queue.job(
        MIX_KIND,
        lease=lease,
        max_attempts=5,
        context=True,
        backoff=venturi.constant(0.05),
        **options,  # type: ignore[arg-type]
    )
    def mix(
        ctx: venturi.JobContext, outcome: str = "complete", ms: int = 0, cooperative: bool = True
    ) -> int:
        token = book.started(ctx)
        if cooperative:
            ctx.stopping.wait(ms / 1000)
        elif ms:
            threading.Event().wait(ms / 1000)  # deaf to `stopping`: a run stop cannot end
        book.finished(ctx, token)
        first = ctx.attempt == 1
        if outcome == "retry" and first:
            raise venturi.Retry(after=0.05, note="retry once")
        if outcome == "pause" and first:
            raise venturi.Pause(after=0.05, note="pause once")
        if outcome == "fail":
            raise venturi.Fail("fail at once")
        return ctx.attempt


# One batch runs every settlement: completions (some long enough for heartbeats), a
# retry, a pause and a failure per two jobs.
BATCH: Final = (
    [("complete", 0)] * 12
    + [("complete", 600)] * 4
    + [("retry", 0)] * 2
    + [("pause", 0)] * 2
    + [("fail", 0)] * 2
)


def enqueue_mix(queue: venturi.Queue, batch: Iterable[tuple[str, int]] = BATCH) -> list[ULID]:
    return queue.enqueue_many(
        [venturi.NewJob(MIX_KIND, {"outcome": o, "ms": ms}) for o, ms in batch]
    )


def threads_before() -> set[int | None]:
    """The threads alive now, to tell a worker's threads from older ones."""
    return {t.ident for t in threading.enumerate()}


def missing_threads(before: set[int | None], concurrency: int) -> set[str]:
    """The worker threads (by their documented names) not alive among those started
    since ``before``: empty for a whole worker."""
    expected = {f"venturi-handler-{i}" for i in range(concurrency)} | set(STATEMENT_THREADS)
    alive = {t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()}
    return expected - alive


def settled(watch: Watch, ids: Iterable[ULID]) -> bool:
    """True once every job of ``ids`` is completed, dead or cancelled."""
    query = sql.SQL(
        "SELECT count(*) FROM {} WHERE id = ANY(%s)"
        " AND status NOT IN ('completed', 'dead', 'cancelled')"
    ).format(watch.jobs)
    rows = watch.rows(query, ([i.to_uuid() for i in ids],))
    return int(rows[0][0]) == 0
