"""The ledger itself: a handler that records its run after the ledger was closed (its
worker's stop timed out) leaves no connection open behind it."""

from __future__ import annotations

import gc
import threading
import uuid
import warnings
from typing import Any

import psycopg
from psycopg import sql

from tests.support import ledger


class _Ctx:
    """The two things the ledger reads from a job context."""

    def __init__(self) -> None:
        self.job = type("Job", (), {"id": type("Id", (), {"to_uuid": staticmethod(uuid.uuid4)})})
        self.attempt = 1


def _in_thread(book: ledger.Ledger) -> None:
    ctx: Any = _Ctx()
    worker = threading.Thread(target=book.started, args=(ctx,))
    worker.start()
    worker.join(30)


def test_a_write_after_close_leaves_no_connection_open(
    database_dsn: str, shared_prefix: str
) -> None:
    ledger.create(database_dsn, shared_prefix)
    book = ledger.Ledger(database_dsn, shared_prefix, "late")
    _in_thread(book)
    book.close()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        _in_thread(book)  # late handlers: their runs are recorded all the same
        _in_thread(book)
        del book
        gc.collect()
    leaked = [w for w in seen if issubclass(w.category, ResourceWarning)]
    assert not leaked, [str(w.message) for w in leaked]
    with psycopg.connect(database_dsn) as conn:
        query = sql.SQL("SELECT count(*) FROM {}").format(ledger.table(shared_prefix))
        assert conn.execute(query).fetchone() == (3,)
