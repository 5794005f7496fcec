"""The completer's line writes every settlement: a retry whose row a user holds locked is
set aside and written once the lock goes, and holds up no other run's settlement."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

import venturi
from tests.support import Probe, wait_until
from venturi import Queue, Worker


def _outcomes(probe: Probe, job_id: object) -> list[str]:
    rows = probe.rows("SELECT outcome FROM {journal} WHERE job_id = %s ORDER BY id", job_id)
    return [row[0] for row in rows]


def test_a_locked_retry_holds_up_no_other_settlement(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker], database_dsn: str
) -> None:
    started = threading.Event()
    go = threading.Event()

    @queue.job("line.mix", context=True)
    def mix(ctx: venturi.JobContext, outcome: str) -> None:
        if outcome == "locked":
            started.set()
            go.wait(10)
        if outcome != "complete" and ctx.attempt == 1:
            raise venturi.Retry(after=60)

    locked = queue.enqueue("line.mix", {"outcome": "locked"})
    start_worker(concurrency=4)
    assert started.wait(10), "the locked job never started"
    with psycopg.connect(database_dsn) as user:  # the user's transaction, left open
        user.execute(
            f"SELECT id FROM {queue.prefix}_jobs WHERE id = %s FOR UPDATE", (locked.to_uuid(),)
        )
        go.set()
        retried = queue.enqueue("line.mix", {"outcome": "retry"})
        completed = queue.enqueue("line.mix", {"outcome": "complete"})
        wait_until(
            lambda: (
                _outcomes(probe, retried.to_uuid()) == ["retried"]
                and _outcomes(probe, completed.to_uuid()) == ["completed"]
            ),
            10,
            what="the other runs to settle while one row is locked",
        )
        assert _outcomes(probe, locked.to_uuid()) == []
        user.rollback()
    wait_until(
        lambda: _outcomes(probe, locked.to_uuid()) == ["retried"],
        10,
        what="the locked run's retry once the lock went",
    )
