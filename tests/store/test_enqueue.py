"""Enqueue: one job, many jobs, timing in database time, NOTIFY, and the caller's
transaction (joined, never committed or rolled back by venturi)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import pq
from ulid import ULID

from tests.support import Listener, Probe
from venturi.models import JobStatus, NewJob
from venturi.store.postgres import PostgresStore


def test_enqueue_writes_one_pending_job_and_returns_its_ulid(
    store: PostgresStore, probe: Probe
) -> None:
    payload: dict[str, Any] = {
        "to": "a@example.com",
        "n": 2**53 + 1,
        "f": 0.1,
        "nested": {"list": [1, "two", None, True], "empty": {}},
        "unicode": "héllo ✓ 日本",
    }
    job_id = store.enqueue(NewJob("emails.send", payload, priority=7, max_attempts=3))
    assert isinstance(job_id, ULID)
    job = store.reads.get(job_id)
    assert job is not None
    assert job.id == job_id
    assert job.kind == "emails.send"
    assert job.payload == payload
    assert job.priority == 7
    assert job.status is JobStatus.PENDING
    assert job.run_count == 0 and job.failure_count == 0 and job.max_attempts == 3
    assert job.carry is None and job.dedup_key is None
    assert job.claimed_by is None and job.claim_expires_at is None and job.finished_at is None
    assert job.visible_at == job.created_at
    assert probe.scalar("SELECT id FROM {jobs}") == job_id.to_uuid()
    assert probe.count("journal") == 0


def test_ids_are_time_ordered(store: PostgresStore) -> None:
    ids = [store.enqueue(NewJob("k")) for _ in range(20)]
    assert ids == sorted(ids)
    assert [i.to_uuid() for i in ids] == sorted(i.to_uuid() for i in ids)


def test_get_accepts_the_string_form(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("k"))
    job = store.reads.get(str(job_id))
    assert job is not None and job.id == job_id


@pytest.mark.parametrize("delay", [30, 30.0, timedelta(seconds=30)])
def test_delay_is_added_to_database_time(store: PostgresStore, delay: Any) -> None:
    before = store.now()
    job = store.reads.get(store.enqueue(NewJob("k", delay=delay)))
    after = store.now()
    assert job is not None
    assert before + timedelta(seconds=30) <= job.visible_at <= after + timedelta(seconds=30)
    assert store.claim("w", {"k": 30}, 10) == []


def test_at_sets_visibility_exactly(store: PostgresStore) -> None:
    at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    job = store.reads.get(store.enqueue(NewJob("k", at=at)))
    assert job is not None and job.visible_at == at


def test_at_in_another_timezone_is_the_same_instant(store: PostgresStore) -> None:
    tz = datetime.now(UTC).astimezone().tzinfo
    at = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    job = store.reads.get(store.enqueue(NewJob("k", at=at.astimezone(tz))))
    assert job is not None and job.visible_at == at


def test_enqueue_notifies_the_kind(store: PostgresStore, listener: Listener) -> None:
    store.enqueue(NewJob("emails.send"))
    assert listener.receive(1) == ["emails.send"]


def test_enqueue_many_writes_every_job_in_order(store: PostgresStore, probe: Probe) -> None:
    jobs = [NewJob("a", {"i": i}, priority=i % 3, delay=60 if i == 4 else None) for i in range(10)]
    ids = store.enqueue_many(jobs)
    assert len(ids) == 10 and len(set(ids)) == 10
    for i, job_id in enumerate(ids):
        job = store.reads.get(job_id)
        assert job is not None
        assert job.payload == {"i": i} and job.priority == i % 3
    assert probe.count("jobs") == 10
    assert probe.count("jobs", "visible_at > now()") == 1


def test_enqueue_many_notifies_once_per_kind(store: PostgresStore, listener: Listener) -> None:
    store.enqueue_many([NewJob(k) for k in ["a", "b", "a", "c", "b", "a"]])
    assert sorted(listener.until_marker()) == ["a", "b", "c"]


def test_enqueue_many_of_nothing(store: PostgresStore, probe: Probe) -> None:
    assert store.enqueue_many([]) == []
    assert probe.count("jobs") == 0


def test_enqueue_many_mixes_plain_and_dedup_jobs(store: PostgresStore, probe: Probe) -> None:
    first = store.enqueue(NewJob("a", {"v": 0}, dedup_key="k"))
    ids = store.enqueue_many(
        [
            NewJob("a", {"v": 1}),
            NewJob("a", {"v": 2}, dedup_key="k"),
            NewJob("a", {"v": 3}, dedup_key="other"),
            NewJob("a", {"v": 4}, dedup_key="other"),
        ]
    )
    assert ids[1] == first
    assert ids[3] == ids[2] != first
    assert probe.count("jobs") == 3
    assert probe.count("journal", "outcome = 'merged'") == 2


# --- on the caller's connection ---------------------------------------------------------


def test_enqueue_joins_the_callers_transaction_until_commit(
    store: PostgresStore, database_dsn: str, listener: Listener
) -> None:
    notifier = store.notifier()
    notifier.connect()
    try:
        with psycopg.connect(database_dsn) as conn:
            job_id = store.enqueue(NewJob("tx.kind", {"a": 1}), conn=conn)
            assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
            # Invisible to everyone else, and no wakeup yet: venturi's own notifier stays
            # quiet (a bounded wait), and a marker sent now reaches the raw listener first.
            assert store.reads.get(job_id) is None
            assert store.claim("w", {"tx.kind": 30}, 5) == []
            assert notifier.wait(0.3) is False
            assert listener.until_marker() == []
            conn.commit()
        assert listener.receive(1) == ["tx.kind"]
        assert notifier.wait(5) is True
        assert store.reads.get(job_id) is not None
        [claimed] = store.claim("w", {"tx.kind": 30}, 5)
        assert claimed.id == job_id
    finally:
        notifier.close()


def test_rollback_leaves_no_job_and_no_notification(
    store: PostgresStore, database_dsn: str, listener: Listener, probe: Probe
) -> None:
    with psycopg.connect(database_dsn) as conn:
        store.enqueue(NewJob("tx.kind"), conn=conn)
        store.enqueue(NewJob("tx.kind", dedup_key="d"), conn=conn)
        store.enqueue(NewJob("tx.kind", dedup_key="d", on_duplicate="replace"), conn=conn)
        store.enqueue(NewJob("tx.kind", dedup_key="m", on_duplicate=_merge), conn=conn)
        store.enqueue_many([NewJob("tx.kind"), NewJob("tx.kind", dedup_key="e")], conn=conn)
        assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
        conn.rollback()
    assert listener.until_marker() == []
    assert probe.count("jobs") == 0
    assert probe.count("journal") == 0


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {**old, **new}


FIRST_WRITES: dict[str, Callable[[PostgresStore, psycopg.Connection[Any]], object]] = {
    "plain": lambda s, c: s.enqueue(NewJob("k"), conn=c),
    "keep": lambda s, c: s.enqueue(NewJob("k", dedup_key="d"), conn=c),
    "replace": lambda s, c: s.enqueue(NewJob("k", dedup_key="d", on_duplicate="replace"), c),
    "merge": lambda s, c: s.enqueue(NewJob("k", dedup_key="d", on_duplicate=_merge), conn=c),
    "many": lambda s, c: s.enqueue_many([NewJob("k"), NewJob("k")], conn=c),
    "many with dedup": lambda s, c: s.enqueue_many([NewJob("k"), NewJob("k", dedup_key="e")], c),
}


def _status(conn: psycopg.Connection[Any]) -> pq.TransactionStatus:
    return conn.info.transaction_status


@pytest.mark.parametrize("write", list(FIRST_WRITES))
def test_an_enqueue_opening_the_callers_transaction_never_commits_it(
    store: PostgresStore, database_dsn: str, listener: Listener, probe: Probe, write: str
) -> None:
    with psycopg.connect(database_dsn) as conn:
        assert _status(conn) == pq.TransactionStatus.IDLE
        FIRST_WRITES[write](store, conn)
        assert _status(conn) == pq.TransactionStatus.INTRANS
        assert probe.count("jobs") == 0, "the caller's transaction was committed"
        conn.rollback()
    assert probe.count("jobs") == 0
    assert listener.until_marker() == []


def test_the_callers_writes_and_the_job_commit_together(
    store: PostgresStore, database_dsn: str, probe: Probe
) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TEMP TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (1)")
        job_id = store.enqueue(NewJob("orders.ship", {"order": 1}), conn=conn)
        merged_id = store.enqueue(NewJob("orders.ship", dedup_key="x", on_duplicate=_merge), conn)
        again = store.enqueue(
            NewJob("orders.ship", {"z": 1}, dedup_key="x", on_duplicate=_merge), conn
        )
        assert again == merged_id
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)
        conn.commit()
    assert store.reads.get(job_id) is not None
    merged = store.reads.get(merged_id)
    assert merged is not None and merged.payload == {"z": 1}
    assert probe.count("journal", "outcome = 'merged'") == 1


def test_enqueue_on_an_autocommit_connection_commits_at_once(
    store: PostgresStore, database_dsn: str
) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        job_id = store.enqueue(NewJob("k"), conn=conn)
        ids = store.enqueue_many([NewJob("k"), NewJob("k", dedup_key="d")], conn=conn)
        assert store.reads.get(job_id) is not None
        assert len(ids) == 2
        assert [getattr(store.reads.get(i), "dedup_key", "gone") for i in ids] == [None, "d"]
