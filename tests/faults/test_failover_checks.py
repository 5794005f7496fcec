"""Each check of the failover scenarios (`tests.faults.failover`) fails when its promise is
broken: the violation is staged in SQL (or in a log), and the check must count it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ulid import ULID

from tests.faults.failover import (
    STUCK_AFTER,
    Reader,
    double_completed,
    missing,
    stuck_claims,
    thread_deaths,
)
from tests.support import Probe
from venturi import Queue


@pytest.fixture
def scene(database_dsn: str, prefix: str) -> Iterator[tuple[Queue, Probe, Reader]]:
    """Three jobs enqueued under the test's prefix, SQL behind the queue's back, and the
    scenarios' reader."""
    queue = Queue(database_dsn, prefix=prefix)
    queue.migrate()
    for _ in range(3):
        queue.enqueue("k", {})
    probe = Probe(database_dsn, prefix)
    reader = Reader(database_dsn, prefix)
    yield queue, probe, reader
    reader.close()
    probe.close()
    queue.close()


def _ids(probe: Probe) -> list[ULID]:
    return [ULID.from_uuid(row[0]) for row in probe.rows("SELECT id FROM {jobs} ORDER BY id")]


def test_missing_counts_acknowledged_ids_the_table_lacks(
    scene: tuple[Queue, Probe, Reader],
) -> None:
    _, probe, reader = scene
    present = _ids(probe)
    assert missing(reader, present) == 0
    assert missing(reader, [*present, ULID(), ULID()]) == 2


def test_double_completed_counts_every_job_without_one_completing_row(
    scene: tuple[Queue, Probe, Reader],
) -> None:
    _, probe, reader = scene
    first, second, third = _ids(probe)
    assert double_completed(reader) == 0
    complete = (
        "UPDATE {jobs} SET status = 'completed', finished_at = now(), run_count = 1 WHERE id = %s"
    )
    journal = "INSERT INTO {journal} (job_id, kind, run_no, outcome) VALUES (%s, 'k', 1, %s)"
    probe.rows(complete, first.to_uuid())
    probe.rows(journal, first.to_uuid(), "completed")
    assert double_completed(reader) == 0  # completed once: as it should be
    probe.rows(journal, first.to_uuid(), "completed")  # completed twice
    probe.rows(complete, second.to_uuid())  # completed with no completing row
    probe.rows(journal, third.to_uuid(), "completed")  # a completing row, still pending
    assert double_completed(reader) == 3


def test_stuck_counts_claims_expired_past_the_reaper_s_reach(
    scene: tuple[Queue, Probe, Reader],
) -> None:
    _, probe, reader = scene
    first, second, _ = _ids(probe)
    claim = (
        "UPDATE {jobs} SET status = 'claimed', claimed_by = 'w', run_count = 1,"
        " claim_expires_at = now() - make_interval(secs => %s) WHERE id = %s"
    )
    probe.rows(claim, 1.0, first.to_uuid())  # lapsed a moment ago: the reaper's to take
    assert stuck_claims(reader) == 0
    probe.rows(claim, STUCK_AFTER + 60, second.to_uuid())
    assert stuck_claims(reader) == 1


def test_thread_deaths_counts_every_way_a_worker_thread_ends() -> None:
    log = "\n".join(
        [
            "1.0 1 venturi-heartbeat venturi.worker INFO heartbeat: retrying",
            "1.1 1 venturi-reaper venturi.worker ERROR thread venturi-reaper failed; restarting it",
            "1.2 1 venturi-dispatcher venturi.worker CRITICAL thread x keeps failing; giving up",
            "1.3 1 venturi-completer venturi.worker CRITICAL thread y hit a fatal database error",
            "1.4 1 venturi-failstop venturi.worker CRITICAL worker w1 is stopping itself: boom",
        ]
    )
    assert thread_deaths(log) == 4
    assert thread_deaths("1.0 1 MainThread worker_process INFO exited cleanly") == 0
