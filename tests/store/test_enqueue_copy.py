"""enqueue_many through binary COPY: which jobs take it, ids in order, one notification
per kind, the caller's transaction, and a bad row anywhere in the batch writing nothing.

A statement trigger records the text of every statement that inserts jobs, so each test
sees which path a batch took (COPY fires statement triggers like an INSERT does).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import pq, sql
from ulid import ULID

from tests.support import Listener, Probe
from venturi.errors import InvalidPayload, StoreError
from venturi.models import JobStatus, NewJob
from venturi.store.copying import COPY_MIN_JOBS
from venturi.store.enqueueing import Enqueuer
from venturi.store.ids import new_ids
from venturi.store.postgres import PostgresStore

BATCH = COPY_MIN_JOBS + 36


class Statements:
    """The statements that inserted jobs, as the server saw them, by their first word:
    COPY, or WITH for enqueue_many.sql's INSERT, or INSERT for enqueue.sql's."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        name = probe.prefix.name
        self.names = {
            "log": sql.Identifier(f"{name}_statements"),
            "record": sql.Identifier(f"{name}_record_statement"),
            "jobs": sql.Identifier(probe.prefix.jobs),
        }
        for statement in (
            "CREATE TABLE {log} (n serial, query text)",
            "CREATE FUNCTION {record}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO {log} (query) VALUES (current_query()); RETURN NULL; END $$",
            "CREATE TRIGGER record AFTER INSERT ON {jobs} "
            "FOR EACH STATEMENT EXECUTE FUNCTION {record}()",
        ):
            probe.conn.execute(sql.SQL(statement).format(**self.names))

    def taken(self) -> list[str]:
        """The first word of each statement since the last call, in order."""
        return [_first_word(query) for query in self.texts()]

    def texts(self) -> list[str]:
        """The text of each statement since the last call, in order."""
        with self.probe.conn.cursor() as cur:
            cur.execute(sql.SQL("DELETE FROM {log} RETURNING n, query").format(**self.names))
            return [query for _, query in sorted(cur.fetchall())]

    def drop(self) -> None:
        self.probe.conn.execute(
            sql.SQL("DROP TRIGGER IF EXISTS record ON {jobs}").format(**self.names)
        )
        self.probe.conn.execute(sql.SQL("DROP TABLE {log}").format(**self.names))
        self.probe.conn.execute(sql.SQL("DROP FUNCTION {record}").format(**self.names))


def _first_word(query: str) -> str:
    """The statement's first word, after the SQL file's header comments."""
    lines = [line for line in query.splitlines() if not line.lstrip().startswith("--")]
    return " ".join(lines).split(None, 1)[0].upper()


@pytest.fixture
def statements(probe: Probe) -> Iterator[Statements]:
    instance = Statements(probe)
    yield instance
    instance.drop()


def _status(conn: psycopg.Connection[Any]) -> pq.TransactionStatus:
    return conn.info.transaction_status


def _batch(count: int = BATCH, kinds: tuple[str, ...] = ("copy.a",)) -> list[NewJob]:
    kind = itertools.cycle(kinds)
    return [NewJob(next(kind), {"n": n}, priority=n % 5) for n in range(count)]


def test_a_batch_due_now_is_copied_and_keeps_every_field_and_the_order(
    store: PostgresStore, probe: Probe, statements: Statements
) -> None:
    jobs = [
        NewJob(
            "copy.a",
            {"n": n, "text": "é✓" * (n % 3)},
            priority=n % 7 - 3,
            max_attempts=1 + n % 4,
            concurrency_key=f"key:{n}" if n % 10 == 0 else None,
            trace_context={"traceparent": f"00-{n:032x}-{n:016x}-01"} if n % 9 == 0 else None,
        )
        for n in range(BATCH)
    ]
    ids = store.enqueue_many(jobs)
    assert statements.taken() == ["COPY"]
    assert ids == sorted(ids) and len(set(ids)) == BATCH
    for job, job_id in zip(jobs, ids, strict=True):
        record = store.reads.get(job_id)
        assert record is not None
        assert (record.kind, record.payload, record.priority) == (
            job.kind,
            job.payload,
            job.priority,
        )
        assert (record.max_attempts, record.concurrency_key) == (
            job.max_attempts,
            job.concurrency_key,
        )
        assert record.trace_context == job.trace_context
        assert record.status == JobStatus.PENDING and record.run_count == 0
        assert record.visible_at == record.created_at  # due now, in database time
    assert probe.count("jobs") == BATCH
    claimed = store.claim("w", {"copy.a": 30}, BATCH)
    assert len(claimed) == BATCH


def test_a_batch_of_defaults_copies_three_columns_and_the_table_fills_in_the_rest(
    store: PostgresStore, probe: Probe, statements: Statements
) -> None:
    plain = [NewJob("copy.a", {"n": n}) for n in range(BATCH)]
    ids = store.enqueue_many(plain)
    assert [text.count("(id, kind, payload)\nFROM") for text in statements.texts()] == [1]
    for job_id in ids:
        record = store.reads.get(job_id)
        assert record is not None
        default = NewJob("copy.a", record.payload)
        assert (record.priority, record.max_attempts) == (default.priority, default.max_attempts)
        assert (record.concurrency_key, record.trace_context) == (None, None)
    assert probe.rows("SELECT count(*) FROM {jobs} WHERE fair_tag IS NOT NULL") == [(0,)]
    # One job off the defaults anywhere in the batch: every column is copied.
    for odd in (
        {"priority": 1},
        {"max_attempts": 6},
        {"concurrency_key": "k"},
        {"trace_context": {"traceparent": f"00-{1:032x}-{1:016x}-01"}},
    ):
        batch = [*plain[:-1], NewJob("copy.a", {"n": -1}, **odd)]
        store.enqueue_many(batch)
        assert [text.count("(id, kind, payload)\nFROM") for text in statements.texts()] == [0]


def test_a_plain_batch_over_several_buffers_stores_every_id_kind_and_payload_exactly(
    store: PostgresStore, probe: Probe, statements: Statements
) -> None:
    # The COPY data of a plain batch is formatted by venturi, a buffer per
    # _COPY_WRITE_BYTES or so: rows on both sides of each boundary, kinds taking
    # turns, rows larger than a buffer, and payloads whose text is not ASCII or needs
    # escaping.
    texts = ["", "é", "日本語", "\U0001f600", 'quote " and \\ back', "line\nbreak", "\u2028"]
    jobs = [
        NewJob(
            ("copy.a", "copy.b", "copy.c/long.kind-name")[n % 3],
            {"n": n, "text": texts[n % len(texts)], "nested": {"list": [n, None, 1.5, True]}}
            if n % 5
            else {"long": "é" * (n % 700)},
        )
        for n in range(2_500)
    ]
    ids = store.enqueue_many(jobs)
    assert statements.taken() == ["COPY"]
    stored = dict(probe.rows("SELECT id, jsonb_build_array(kind, payload) FROM {jobs} ORDER BY id"))
    assert len(stored) == len(jobs)
    for job_id, job in zip(ids, jobs, strict=True):
        assert stored[job_id.to_uuid()] == [job.kind, job.payload]


def test_a_small_batch_takes_one_insert_statement(
    store: PostgresStore, statements: Statements
) -> None:
    ids = store.enqueue_many(_batch(COPY_MIN_JOBS - 1))
    assert statements.taken() == ["WITH"]
    assert len(ids) == COPY_MIN_JOBS - 1
    store.enqueue_many(_batch(COPY_MIN_JOBS))
    assert statements.taken() == ["COPY"]


def test_a_copied_batch_notifies_each_kind_once(
    store: PostgresStore, listener: Listener, statements: Statements
) -> None:
    store.enqueue_many(_batch(kinds=("copy.a", "copy.b", "copy.a", "copy.c")))
    assert statements.taken() == ["COPY"]
    assert sorted(listener.until_marker()) == ["copy.a", "copy.b", "copy.c"]


def test_copy_joins_the_callers_transaction_and_rolls_back_with_it(
    store: PostgresStore,
    database_dsn: str,
    listener: Listener,
    probe: Probe,
    statements: Statements,
) -> None:
    with psycopg.connect(database_dsn) as conn:
        ids = store.enqueue_many(_batch(), conn=conn)
        assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
        assert probe.count("jobs") == 0, "the caller's transaction was committed"
        assert listener.until_marker() == []
        conn.rollback()
        assert probe.count("jobs") == 0
        assert listener.until_marker() == []

        again = store.enqueue_many(_batch(), conn=conn)
        conn.execute("SELECT 1")  # the caller's own work, in the same transaction
        assert probe.count("jobs") == 0
        conn.commit()
    assert statements.taken() == ["COPY"]  # the rolled-back one's record went with it
    assert listener.receive(1) == ["copy.a"]
    assert probe.count("jobs") == BATCH
    assert all(store.reads.get(i) is not None for i in again)
    assert all(store.reads.get(i) is None for i in ids)


def test_copy_on_an_autocommit_connection_commits_at_once_or_joins_a_begun_transaction(
    store: PostgresStore, database_dsn: str, listener: Listener, probe: Probe
) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        store.enqueue_many(_batch(), conn=conn)
        assert _status(conn) == pq.TransactionStatus.IDLE
        assert probe.count("jobs") == BATCH
        assert listener.receive(1) == ["copy.a"]

        conn.execute("BEGIN")  # the caller's own transaction, begun by hand
        store.enqueue_many(_batch(), conn=conn)
        assert _status(conn) == pq.TransactionStatus.INTRANS
        conn.execute("ROLLBACK")
    assert probe.count("jobs") == BATCH
    assert listener.until_marker() == []


def test_copy_works_on_a_connection_that_binds_on_the_client(
    store: PostgresStore, database_dsn: str, probe: Probe, statements: Statements
) -> None:
    # Django's psycopg connections make ClientCursors unless told to bind on the server.
    with psycopg.connect(database_dsn, cursor_factory=psycopg.ClientCursor) as conn:
        ids = store.enqueue_many(_batch(), conn=conn)
        conn.commit()
    assert statements.taken() == ["COPY"]
    assert probe.count("jobs") == len(set(ids)) == BATCH


def test_a_connection_in_pipeline_mode_gets_the_insert_statement(
    store: PostgresStore, database_dsn: str, probe: Probe, statements: Statements
) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn, conn.pipeline():
        ids = store.enqueue_many(_batch(), conn=conn)
    assert statements.taken() == ["WITH"]
    assert probe.count("jobs") == len(set(ids)) == BATCH


# --- a bad row writes nothing -----------------------------------------------------------


def test_a_row_the_server_refuses_mid_copy_writes_nothing(
    store: PostgresStore, probe: Probe, listener: Listener, statements: Statements
) -> None:
    probe.rows(
        "ALTER TABLE {jobs} ADD CONSTRAINT refuse_13 CHECK (payload ->> 'n' IS DISTINCT FROM '13')"
    )
    with pytest.raises(StoreError, match="refuse_13"):
        store.enqueue_many(_batch())
    assert statements.taken() == []  # the statement never completed
    assert probe.count("jobs") == 0
    assert listener.until_marker() == []


def test_a_duplicate_id_fails_the_copy_on_the_server_and_writes_nothing(
    store: PostgresStore, database_dsn: str, probe: Probe, listener: Listener
) -> None:
    [taken] = store.enqueue_many([NewJob("copy.a")])
    assert listener.receive(1) == ["copy.a"]
    enqueuer = Enqueuer(store.prefix, store.max_payload_bytes)
    ids = [*new_ids(BATCH - 1), taken]  # the last row repeats a stored id
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            enqueuer.enqueue_many(conn, _batch(), ids)
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE  # rolled back
    assert probe.count("jobs") == 1
    assert listener.until_marker() == []


def test_an_error_while_the_rows_stream_writes_nothing(
    store: PostgresStore, database_dsn: str, probe: Probe, listener: Listener
) -> None:
    # A trace context that cannot be encoded passes NewJob and fails row 50 of the COPY:
    # the COPY is abandoned and its transaction rolled back.
    jobs = _batch()
    jobs[50] = NewJob("copy.a", trace_context={"traceparent": object()})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not JSON serializable"):
        store.enqueue_many(jobs)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        with pytest.raises(TypeError, match="not JSON serializable"):
            store.enqueue_many(jobs, conn=conn)
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE  # rolled back
    assert probe.count("jobs") == 0
    assert listener.until_marker() == []
    assert len(store.enqueue_many(_batch())) == BATCH  # the pool's connection still works


def test_a_payload_over_the_limit_is_refused_before_anything_is_written(
    make_store: Any, prefix: str, listener: Listener, statements: Statements, probe: Probe
) -> None:
    small = make_store(prefix, max_payload_bytes=100)
    jobs = [*_batch(), NewJob("copy.a", {"text": "x" * 100})]
    with pytest.raises(InvalidPayload, match="max_payload_bytes"):
        small.enqueue_many(jobs)
    assert statements.taken() == []
    assert probe.count("jobs") == 0
    assert listener.until_marker() == []


# --- mixed batches ----------------------------------------------------------------------


def test_a_mixed_batch_copies_what_it_can_and_inserts_the_rest_in_one_transaction(
    store: PostgresStore, probe: Probe, listener: Listener, statements: Statements
) -> None:
    held = store.enqueue(NewJob("copy.a", {"held": True}, dedup_key="k"))
    at = datetime.now(UTC) + timedelta(hours=1)
    listener.receive(1)
    jobs = _batch()
    jobs[3] = NewJob("copy.a", {"merged": 1}, dedup_key="k", on_duplicate="replace")
    jobs[7] = NewJob("copy.a", {"new": 1}, dedup_key="fresh")
    jobs[8] = NewJob("copy.a", {"new": 2}, dedup_key="fresh")
    jobs[10] = NewJob("copy.b", {"later": 1}, delay=60)
    jobs[11] = NewJob("copy.b", {"at": 1}, at=at)
    statements.taken()
    ids = store.enqueue_many(jobs)
    # The copy, one INSERT of the delayed jobs, then the deduplicated ones one by one
    # (the replace merges into the held job and inserts nothing).
    assert statements.taken()[:2] == ["COPY", "WITH"]
    assert ids[3] == held and ids[8] == ids[7] != held
    plain = [i for n, i in enumerate(ids) if n not in (3, 7, 8)]
    assert len(set(plain)) == len(plain) and plain == sorted(plain)
    replaced = store.reads.get(held)
    assert replaced is not None and replaced.payload == {"merged": 1}
    later, fixed = store.reads.get(ids[10]), store.reads.get(ids[11])
    assert later is not None and later.visible_at > later.created_at + timedelta(seconds=59)
    assert fixed is not None and fixed.visible_at == at
    assert probe.count("jobs") == 1 + BATCH - 2  # the held job; two merged into others
    assert sorted(listener.until_marker()) == ["copy.a", "copy.b"]


def test_a_mixed_batch_with_a_bad_row_writes_nothing(
    store: PostgresStore, probe: Probe, listener: Listener
) -> None:
    probe.rows("ALTER TABLE {jobs} ADD CONSTRAINT refuse_late CHECK (payload ->> 'late' IS NULL)")
    jobs = [*_batch(), NewJob("copy.a", {"late": 1}, delay=5), NewJob("copy.a", dedup_key="d")]
    with pytest.raises(StoreError, match="refuse_late"):
        store.enqueue_many(jobs)
    assert probe.count("jobs") == 0
    assert listener.until_marker() == []


def test_ids_returned_are_those_stored_in_batch_order(store: PostgresStore, probe: Probe) -> None:
    ids = store.enqueue_many(_batch())
    stored = probe.rows("SELECT id, (payload ->> 'n')::int FROM {jobs} ORDER BY id")
    assert [ULID.from_uuid(row[0]) for row in stored] == ids
    assert [row[1] for row in stored] == list(range(BATCH))


def test_a_mixed_batch_on_the_callers_connection_commits_or_rolls_back_with_it(
    store: PostgresStore, database_dsn: str, probe: Probe, listener: Listener
) -> None:
    jobs = [*_batch(), NewJob("copy.a", dedup_key="d"), NewJob("copy.b", delay=30)]
    with psycopg.connect(database_dsn) as conn:
        store.enqueue_many(jobs, conn=conn)
        assert _status(conn) == pq.TransactionStatus.INTRANS
        assert probe.count("jobs") == 0
        conn.rollback()
        assert probe.count("jobs") == 0
        assert listener.until_marker() == []
        store.enqueue_many(jobs, conn=conn)
        conn.commit()
    assert probe.count("jobs") == BATCH + 2
    assert sorted(listener.until_marker()) == ["copy.a", "copy.b"]
