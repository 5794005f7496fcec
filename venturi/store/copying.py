"""Binary COPY of new jobs: `enqueue_many`'s path for a batch of jobs due now.

COPY streams the rows in PostgreSQL's binary format: no statement to parse or plan, no
arrays to build and unpack, and the server starts writing rows while the client still
formats the later ones. It cannot compute a value (a delay in database time) nor notify,
so it takes only jobs due now without a dedup key or parents (`copyable`), and the
notification of each kind follows in the same transaction (notify_kinds.sql). The jobs of
a fair kind carry their tags in the COPY data, computed here from what fair_bases.sql
returns, in one more round trip for a batch with a fair kind.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import psycopg
from psycopg import pq, sql
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format
from psycopg.rows import tuple_row
from ulid import ULID

from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store import sqlfiles

# Below this many copyable jobs one INSERT statement (one round trip) is as fast as a
# COPY with its notification (four round trips: BEGIN with the NOTIFY, the COPY's two,
# COMMIT). Side by side on a busy 2-core machine, client and server CPU together broke
# even at 64 jobs and the COPY took 10% less at 128; wall time broke even near 128.
COPY_MIN_JOBS: Final = 128

# The PostgreSQL types of the columns of copy_jobs.sql, in its order.
_COLUMN_TYPES: Final = ("uuid", "text", "jsonb", "int2", "int4", "text", "jsonb", "float8")
# copy_plain_jobs.sql writes the first three; the table's defaults are the rest's values
# for a job of the default priority and attempts, no key, no trace and no fair tag.
_DEFAULT_PRIORITY: Final = 0
_DEFAULT_MAX_ATTEMPTS: Final = 5

# PostgreSQL's binary COPY format, which `plain_copy_data` writes itself: the signature,
# the flags and the header extension's length (both zero), and after the last row a
# field count of -1.
_COPY_HEADER: Final = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER: Final = b"\xff\xff"
# A plain row up to its kind: three fields, then the id's length (16) and bytes.
_PLAIN_ROW_START: Final = struct.Struct(">hi16s")
_FIELD_LENGTH: Final = struct.Struct(">i")
# Bytes of rows per buffer handed to the COPY (a row larger than this goes alone).
# libpq sends what it holds every 8 KB, so the server parses and inserts the first rows
# while later ones are formatted; and small buffers stay in the interpreter's own
# allocator and the caches. Side by side on a 2-core machine, batches of 1,000 jobs took
# 5-11% less time than with one buffer per batch (payloads of a dozen bytes) and 15% less
# (payloads of 1 KB); 4 KB buffers gained 4% and 11%.
_COPY_WRITE_BYTES: Final = 256

_UUID_OID: Final = 2950
_JSONB_OID: Final = 3802
_BEGIN: Final = sql.SQL("BEGIN")
# The version byte that opens jsonb's binary form; the JSON text follows.
_JSONB_VERSION: Final = b"\x01"
# A plain row's bytes besides its kind and payload: its start, the payload's length and
# jsonb's version byte.
_PLAIN_ROW_FIXED: Final = _PLAIN_ROW_START.size + _FIELD_LENGTH.size + len(_JSONB_VERSION)


class _UlidDumper(Dumper):
    """A ULID as a binary uuid: its 16 bytes, in the order they sort."""

    format = Format.BINARY
    oid = _UUID_OID

    def dump(self, obj: ULID) -> Buffer:
        return obj.bytes


class _JsonTextDumper(Dumper):
    """JSON text already checked and encoded (`NewJob.payload_json`) as binary jsonb."""

    format = Format.BINARY
    oid = _JSONB_OID

    def dump(self, obj: str) -> Buffer:
        return _JSONB_VERSION + obj.encode()


def copyable(job: NewJob) -> bool:
    """True if COPY can write ``job``: due now, no dedup key, no parents."""
    return (
        job.dedup_key is None
        and job.delay_seconds is None
        and job.at is None
        and not job.depends_on
    )


def copy_possible(conn: psycopg.Connection[Any]) -> bool:
    """False on a connection in pipeline mode, where psycopg cannot COPY."""
    return conn.pgconn.pipeline_status == pq.PipelineStatus.OFF


def copy_jobs(
    conn: psycopg.Connection[Any],
    prefix: Prefix,
    ids: Sequence[ULID],
    jobs: Sequence[NewJob],
    *,
    own_transaction: bool,
) -> None:
    """Write ``jobs`` (each `copyable`) under ``ids`` and notify each of their kinds.

    With ``own_transaction`` (for an idle autocommit connection) the writes run in a
    transaction of their own; otherwise in the one ``conn`` is in or, on a connection
    that does not autocommit, the one psycopg begins. A row the server refuses fails the
    whole COPY and the transaction with it: nothing is written, nothing is notified.
    """
    kinds = list(dict.fromkeys(job.kind for job in jobs))
    with conn.cursor(row_factory=tuple_row) as cur:
        # The lock and the notification first, pipelined with the BEGIN: one round trip
        # for all three, and like every notification it is delivered only if the
        # transaction commits. (psycopg's transaction() would keep the pipeline open,
        # and a pipeline has no COPY, so this transaction is begun and ended by hand.)
        with conn.pipeline():
            if own_transaction:
                cur.execute(_BEGIN)
            cur.execute(sqlfiles.statement("copy_lock", prefix))
            notified = conn.cursor(row_factory=tuple_row)
            notified.execute(sqlfiles.statement("notify_kinds", prefix), {"kinds": kinds})
        try:
            fair = {kind for kind, is_fair, _ in notified.fetchall() if is_fair}
            if not fair and all(map(_plain, jobs)):
                _copy_plain_rows(cur, prefix, ids, jobs)
            else:
                _copy_rows(cur, prefix, ids, jobs, _fair_tags(cur, prefix, jobs, fair))
        except BaseException:
            if own_transaction and not conn.closed:
                conn.rollback()
            raise
        if own_transaction:
            conn.commit()


def _distinct_keys(jobs: Sequence[NewJob]) -> dict[str, list[Any]]:
    """The batch's distinct (kind, priority, concurrency key), as fair_bases.sql takes them."""
    triples = list(dict.fromkeys((job.kind, job.priority, job.concurrency_key) for job in jobs))
    return {
        "kinds": [kind for kind, _, _ in triples],
        "priorities": [priority for _, priority, _ in triples],
        "keys": [key for _, _, key in triples],
    }


def _fair_tags(
    cur: psycopg.Cursor[Any], prefix: Prefix, jobs: Sequence[NewJob], fair: set[str]
) -> list[float | None]:
    """Each job's fair-share tag (None for a kind that is not in ``fair``): its key's
    first tag, then one step more for each earlier job of the key in the batch (fragment
    fair_tags). A batch with no fair kind runs no query here: planning fair_bases.sql
    took about a millisecond, more than the COPY's other statements together."""
    if not fair:
        return [None] * len(jobs)
    cur.execute(
        sqlfiles.statement("fair_bases", prefix),
        _distinct_keys([job for job in jobs if job.kind in fair]),
    )
    following = {
        (kind, priority, key): [first, step] for kind, priority, key, first, step in cur.fetchall()
    }
    tags: list[float | None] = []
    for job in jobs:
        base = following.get((job.kind, job.priority, job.concurrency_key))
        if base is None:
            tags.append(None)
            continue
        tags.append(float(base[0]))
        base[0] += base[1]
    return tags


def _copy_plain_rows(
    cur: psycopg.Cursor[Any], prefix: Prefix, ids: Sequence[ULID], jobs: Sequence[NewJob]
) -> None:
    """COPY a batch whose jobs all take the defaults and no fair tag: a third fewer bytes
    to format, send and parse per row (the common batch), formatted here in one pass
    rather than field by field through dumpers."""
    with cur.copy(sqlfiles.statement("copy_plain_jobs", prefix)) as copy:
        for data in plain_copy_data(ids, jobs):
            copy.write(data)


def _copy_rows(
    cur: psycopg.Cursor[Any],
    prefix: Prefix,
    ids: Sequence[ULID],
    jobs: Sequence[NewJob],
    tags: Sequence[float | None],
) -> None:
    """COPY every column of copy_jobs.sql, fair tags included, through psycopg's dumpers."""
    # On this cursor only: by type oid, used by COPY's set_types and nowhere else.
    cur.adapters.register_dumper(None, _UlidDumper)
    cur.adapters.register_dumper(None, _JsonTextDumper)
    with cur.copy(sqlfiles.statement("copy_jobs", prefix)) as copy:
        copy.set_types(_COLUMN_TYPES)
        write = copy.write_row
        for job_id, job, tag in zip(ids, jobs, tags, strict=True):
            write(
                (
                    job_id,
                    job.kind,
                    job.payload_json,
                    job.priority,
                    job.max_attempts,
                    job.concurrency_key,
                    job.trace_context_json,
                    tag,
                )
            )


def plain_copy_data(ids: Iterable[ULID], jobs: Iterable[NewJob]) -> Iterator[bytes]:
    """The binary COPY data of copy_plain_jobs.sql for ``jobs`` under ``ids``: each row's
    id as a uuid, its kind as text and its payload as jsonb (version 1, then the JSON
    text), in buffers of `_COPY_WRITE_BYTES` or a little more, the first opening with
    the format's header and the last closed by its trailer. Text is UTF-8, as the rest of
    the store sends it."""
    kinds: dict[str, bytes] = {}
    start, length = _PLAIN_ROW_START.pack, _FIELD_LENGTH.pack
    parts = [_COPY_HEADER]
    size = 0
    for job_id, job in zip(ids, jobs, strict=True):
        kind = kinds.get(job.kind)
        if kind is None:
            encoded = job.kind.encode()
            kind = kinds[job.kind] = length(len(encoded)) + encoded
        payload = job.payload_json.encode()
        parts += (
            start(3, 16, job_id.bytes),
            kind,
            length(len(payload) + 1),
            _JSONB_VERSION,
            payload,
        )
        size += len(payload) + len(kind) + _PLAIN_ROW_FIXED
        if size >= _COPY_WRITE_BYTES:
            yield b"".join(parts)
            parts = []
            size = 0
    parts.append(_COPY_TRAILER)
    yield b"".join(parts)


def _plain(job: NewJob) -> bool:
    """True if the table's defaults hold ``job``'s values beyond its id, kind and payload."""
    return (
        job.priority == _DEFAULT_PRIORITY
        and job.max_attempts == _DEFAULT_MAX_ATTEMPTS
        and job.concurrency_key is None
        and job.trace_context is None
    )
