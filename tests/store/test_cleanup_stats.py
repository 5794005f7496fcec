"""Cleanup (terminal jobs only, in bounded batches, journal rows with them) and stats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import Probe
from venturi.models import CleanupCriteria, NewJob
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore

FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


def _one_of_each(store: PostgresStore, kind: str = "k") -> None:
    """A job in every status: pending, scheduled, claimed, completed, dead, cancelled."""
    now = store.now()
    store.enqueue_many(
        [NewJob(kind, {"n": i}, at=now - timedelta(seconds=60 - i)) for i in range(4)]
        + [NewJob(kind, {"n": 9}, delay=3600)]
    )
    cancelled = store.enqueue(NewJob(kind, {"n": 10}, delay=3600))
    assert store.cancel(cancelled)
    done, dead, _claimed = store.claim("w", {kind: 30}, 3)
    assert store.settle(Claim.of(done), Settlement.complete({"r": 1}))
    assert store.settle(Claim.of(dead), Settlement.dead())


def test_cleanup_deletes_only_terminal_jobs_and_their_journal(
    store: PostgresStore, probe: Probe
) -> None:
    _one_of_each(store)
    assert probe.count("journal") == 3
    assert store.cleanup(CleanupCriteria(finished_before=FUTURE)) == 3
    assert sorted(r[0] for r in probe.rows("SELECT status FROM {jobs}")) == [
        "claimed",
        "pending",
        "pending",
    ]
    assert probe.count("journal") == 0
    assert store.cleanup(CleanupCriteria(finished_before=FUTURE)) == 0


def test_cleanup_respects_finished_before_kind_and_status(
    store: PostgresStore, probe: Probe
) -> None:
    _one_of_each(store, "a")
    _one_of_each(store, "b")
    now = store.now()
    assert store.cleanup(CleanupCriteria(finished_before=now - timedelta(hours=1))) == 0
    assert store.cleanup(CleanupCriteria(FUTURE, kind="a", status="dead")) == 1
    assert store.cleanup(CleanupCriteria(FUTURE, status="completed")) == 2
    assert store.cleanup(CleanupCriteria(FUTURE, kind="b")) == 2
    assert sorted(r[0] for r in probe.rows("SELECT kind || ':' || status FROM {jobs}")) == [
        "a:cancelled",
        "a:claimed",
        "a:pending",
        "a:pending",
        "b:claimed",
        "b:pending",
        "b:pending",
    ]


def test_cleanup_works_in_bounded_batches(
    store: PostgresStore, probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = store.enqueue_many([NewJob("k") for _ in range(25)] + [NewJob("live")])
    for job_id in ids[:25]:
        assert store.cancel(job_id)
    deleted_per_statement: list[int] = []
    run = store._run

    def counting(
        name: str, params: dict[str, Any] | None = None, conn: Any = None
    ) -> list[tuple[Any, ...]]:
        rows = run(name, params, conn)
        if name == "cleanup":
            deleted_per_statement.append(int(rows[0][0]))
        return rows

    monkeypatch.setattr(store, "_run", counting)
    assert store.cleanup(CleanupCriteria(FUTURE), batch=10) == 25
    assert deleted_per_statement == [10, 10, 5]
    assert probe.count("jobs") == 1


@pytest.mark.parametrize("batch", [0, -1])
def test_cleanup_refuses_a_batch_that_could_never_finish(store: PostgresStore, batch: int) -> None:
    with pytest.raises(ValueError, match="batch"):
        store.cleanup(CleanupCriteria(FUTURE), batch=batch)


def test_stats_counts_every_status_per_kind(store: PostgresStore) -> None:
    _one_of_each(store, "a")
    store.enqueue(NewJob("b"))
    snapshot = store.reads.stats()
    a, b = snapshot.kinds
    assert (a.kind, a.pending, a.scheduled, a.claimed, a.completed, a.dead, a.cancelled) == (
        "a",
        1,
        1,
        1,
        1,
        1,
        1,
    )
    assert (b.kind, b.pending, b.scheduled, b.claimed, b.completed, b.dead, b.cancelled) == (
        "b",
        1,
        0,
        0,
        0,
        0,
        0,
    )
    assert a.oldest_pending_seconds is not None and a.oldest_pending_seconds >= 56
    assert b.oldest_pending_seconds is not None and b.oldest_pending_seconds < 30
    assert snapshot.total("pending") == 2 and snapshot.total("claimed") == 1
    assert abs((store.now() - snapshot.taken_at).total_seconds()) < 60


def test_stats_of_an_empty_queue(store: PostgresStore) -> None:
    snapshot = store.reads.stats()
    assert snapshot.kinds == ()
    assert snapshot.taken_at.tzinfo is not None
