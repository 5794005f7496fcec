"""History: keyset pages by id descending that cover every row once."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from psycopg.types.string import TextLoader
from ulid import ULID

from tests.support import Probe
from venturi.errors import StoreError
from venturi.models import HistoryCursor, HistoryFilter, JobRecord, NewJob
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


def _all_pages(
    store: PostgresStore, limit: int, filter: HistoryFilter | None = None
) -> list[list[JobRecord]]:
    pages: list[list[JobRecord]] = []
    cursor: HistoryCursor | None = None
    while page := store.reads.history(filter or HistoryFilter(), before=cursor, limit=limit):
        assert len(page) <= limit
        pages.append(page)
        cursor = page[-1].cursor
        assert len(pages) < 1000, "history never ends"
    return pages


def test_pages_cover_every_row_once_even_with_equal_created_at(
    store: PostgresStore, database_dsn: str, probe: Probe
) -> None:
    # Three transactions of 17 jobs each: now() is the transaction's start, so every job
    # of one transaction has the same created_at and only the id breaks the tie.
    for _ in range(3):
        with psycopg.connect(database_dsn) as conn:
            store.enqueue_many([NewJob("k", {"i": i}) for i in range(10)], conn=conn)
            for i in range(7):
                store.enqueue(NewJob("other", {"i": i}), conn=conn)
    assert probe.scalar("SELECT count(DISTINCT created_at) FROM {jobs}") == 3
    expected = [
        (row[0], ULID.from_uuid(row[1]))
        for row in probe.rows("SELECT created_at, id FROM {jobs} ORDER BY created_at DESC, id DESC")
    ]
    for limit in (1, 5, 7, 17, 50):
        pages = _all_pages(store, limit)
        seen = [(job.created_at, job.id) for page in pages for job in page]
        assert seen == expected, f"limit {limit}: pages do not cover every row once"
        print(f"history limit={limit}: {len(pages)} pages, {len(seen)} rows, all once")


def test_filters(store: PostgresStore) -> None:
    store.enqueue_many([NewJob("a") for _ in range(3)] + [NewJob("b") for _ in range(2)])
    done = store.claim("w", {"a": 30}, 2)
    for job in done:
        assert store.settle(Claim.of(job), Settlement.complete())
    finished = [store.reads.get(j.id) for j in done]
    first_done = min(j.finished_at for j in finished if j is not None and j.finished_at)

    def ids(**kwargs: object) -> set[ULID]:
        return {j.id for j in store.reads.history(HistoryFilter(**kwargs), limit=100)}  # type: ignore[arg-type]

    assert len(ids()) == 5
    assert len(ids(kind="b")) == 2
    assert ids(status="completed") == {j.id for j in done}
    assert ids(kind="b", status="completed") == set()
    assert ids(finished_since=first_done) == {j.id for j in done}
    assert ids(finished_until=first_done) == set()
    assert ids(finished_until=first_done + timedelta(days=1)) == {j.id for j in done}
    assert ids(kind="a", status="pending") == {
        j.id
        for j in store.reads.history(HistoryFilter(kind="a"), limit=100)
        if j.finished_at is None
    }


def test_newest_first(store: PostgresStore) -> None:
    ids = [store.enqueue(NewJob("k")) for _ in range(5)]
    assert [j.id for j in store.reads.history(HistoryFilter(), limit=10)] == ids[::-1]


@pytest.mark.parametrize("limit", [1, 2])
def test_a_filtered_history_pages_too(store: PostgresStore, limit: int) -> None:
    store.enqueue_many([NewJob("a" if i % 2 else "b") for i in range(9)])
    pages = _all_pages(store, limit, HistoryFilter(kind="a"))
    assert sum(len(p) for p in pages) == 4
    assert all(j.kind == "a" for p in pages for j in p)


def test_pages_follow_ids_when_created_at_disagrees(store: PostgresStore, probe: Probe) -> None:
    # Another host's clock may run behind the database's: its jobs' ids (its enqueue time)
    # then sort before jobs whose created_at is earlier. History follows the ids.
    ids = [store.enqueue(NewJob("k", {"i": i})) for i in range(9)]
    probe.rows(
        "UPDATE {jobs} SET created_at = now() - make_interval(secs => (payload->>'i')::int % 3)"
    )
    assert probe.scalar("SELECT count(DISTINCT created_at) FROM {jobs}") == 3
    for limit in (1, 2, 4, 9):
        seen = [job.id for page in _all_pages(store, limit) for job in page]
        assert seen == ids[::-1], f"limit {limit}: pages do not follow the ids once each"


def test_a_cursor_is_an_id_even_of_a_job_gone_since(store: PostgresStore, probe: Probe) -> None:
    ids = [store.enqueue(NewJob("k")) for _ in range(4)]
    probe.rows("DELETE FROM {jobs} WHERE id = %s", ids[2].to_uuid())
    for before in (
        HistoryCursor(ids[2]),
        HistoryCursor(str(ids[2])),
        HistoryCursor(ids[2].to_uuid()),
    ):
        page = store.reads.history(HistoryFilter(), before=before, limit=10)
        assert [j.id for j in page] == [ids[1], ids[0]]


def test_get_and_journal_read_inside_the_callers_uncommitted_transaction(
    store: PostgresStore, database_dsn: str
) -> None:
    with psycopg.connect(database_dsn) as conn:
        job_id = store.enqueue(NewJob("k", {"i": 1}), conn=conn)
        assert store.reads.get(job_id) is None, "the pool cannot see an uncommitted job"
        job = store.reads.get(job_id, conn=conn)
        assert job is not None and job.payload == {"i": 1}
        assert store.reads.journal(job_id, conn=conn) == []
        assert store.reads.get(ULID(), conn=conn) is None
        conn.rollback()
    assert store.reads.get(job_id) is None


def test_a_read_on_a_connection_that_loads_json_as_text_still_decodes_it(
    store: PostgresStore, database_dsn: str
) -> None:
    # As Django's connections do: jsonb arrives as text unless the read says otherwise.
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.adapters.register_loader("jsonb", TextLoader)
        job_id = store.enqueue(NewJob("k", {"i": [1, 2]}), conn=conn)
        assert conn.execute("SELECT '{}'::jsonb").fetchone() == ("{}",)
        job = store.reads.get(job_id, conn=conn)
        assert job is not None and job.payload == {"i": [1, 2]}


def test_a_read_on_an_aborted_transaction_raises_a_store_error(
    store: PostgresStore, database_dsn: str
) -> None:
    with psycopg.connect(database_dsn) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        with pytest.raises(StoreError):
            store.reads.get(ULID(), conn=conn)
        conn.rollback()
