"""Enqueueing through PgBouncer in transaction mode: every job lands once, from many
threads at a time, because no statement relies on a server-side prepared statement."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psycopg
from ulid import ULID

import venturi
from tests.support import Probe, postgres_store
from venturi.store.connections import leads_to_pooling_proxy

THREADS = 16
PER_THREAD = 200


def _from_threads(work: Callable[[int], list[ULID]]) -> tuple[list[ULID], list[str]]:
    """Run ``work(thread_number)`` on ``THREADS`` threads at once; the ids it returned
    and the errors it raised."""
    ids: list[ULID] = []
    errors: list[str] = []

    def guarded(number: int) -> None:
        try:
            ids.extend(work(number))
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(guarded, range(THREADS)))
    return ids, errors


def _enqueue_each(queue: venturi.Queue) -> Callable[[int], list[ULID]]:
    def work(thread: int) -> list[ULID]:
        ids = []
        for i in range(PER_THREAD):
            n = thread * PER_THREAD + i
            # Every tenth job carries a dedup key, so the dedup statements run here too.
            key = f"key-{n}" if n % 10 == 0 else None
            ids.append(queue.enqueue("pooled", {"n": n}, dedup_key=key))
        return ids

    return work


def _assert_each_job_landed_once(probe: Probe, ids: list[ULID]) -> None:
    total = THREADS * PER_THREAD
    assert len(ids) == len(set(ids)) == total
    rows = probe.rows("SELECT id, (payload->>'n')::int FROM {jobs} WHERE status = 'pending'")
    assert {ULID.from_uuid(row[0]) for row in rows} == set(ids)
    assert sorted(row[1] for row in rows) == list(range(total)), "a job lost or doubled"


def test_enqueues_from_16_threads_all_land_once(pooled_queue: venturi.Queue, probe: Probe) -> None:
    ids, errors = _from_threads(_enqueue_each(pooled_queue))
    assert errors == []
    _assert_each_job_landed_once(probe, ids)


def test_enqueue_many_from_16_threads_all_land_once(
    pooled_queue: venturi.Queue, probe: Probe
) -> None:
    batch = 20

    def work(thread: int) -> list[ULID]:
        ids = []
        for first in range(thread * PER_THREAD, (thread + 1) * PER_THREAD, batch):
            jobs = [venturi.NewJob("pooled", {"n": n}) for n in range(first, first + batch)]
            ids.extend(pooled_queue.enqueue_many(jobs))
        return ids

    ids, errors = _from_threads(work)
    assert errors == []
    _assert_each_job_landed_once(probe, ids)


def test_prepared_statements_break_behind_the_pooler(pooled_dsn: str, prefix: str) -> None:
    """The failure "auto" avoids, staged: with psycopg's server-side preparation on,
    the same enqueues fail through the pooler (the prepared statement is missing on the
    server connection the next transaction gets, or stands for another query)."""
    with venturi.Queue(pooled_dsn, prefix=prefix, pool_size=16, prepared_statements=True) as queue:
        queue.migrate()
        _, errors = _from_threads(_enqueue_each(queue))
    assert errors, "every enqueue succeeded with prepared statements through the pooler"
    assert any("prepared statement" in error for error in errors), errors[:3]


def test_auto_preparation_finds_the_pooler_and_prepares_nothing_through_it(
    pooled_dsn: str, database_dsn: str, prefix: str
) -> None:
    """The default, ``prepared_statements="auto"``: each new pooled connection asks
    whether a pooling proxy stands in between, and one through PgBouncer never prepares
    (the failure above cannot happen), while one straight to the server does."""
    with (
        psycopg.connect(pooled_dsn, autocommit=True) as through,
        psycopg.connect(database_dsn, autocommit=True) as straight,
    ):
        assert leads_to_pooling_proxy(through)
        assert not leads_to_pooling_proxy(straight)
    with venturi.Queue(pooled_dsn, prefix=prefix, pool_size=16) as queue:
        queue.migrate()
        ids, errors = _from_threads(_enqueue_each(queue))
        with postgres_store(queue).connection() as conn:
            assert conn.prepare_threshold is None
    assert errors == []
    assert len(ids) == len(set(ids)) > 0
