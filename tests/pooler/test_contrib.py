"""The Flask and Django integrations configured through PgBouncer in transaction mode,
with their LISTEN connection straight to the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from flask import Flask
from psycopg import sql

from tests.contrib.flask_app import create_app, publish, venturi
from tests.contrib.test_flask import _notes
from tests.support import wait_until
from venturi import JobStatus

SHOP = Path(__file__).with_name("django_shop.py")
NOTES = 20


@pytest.fixture
def pooled_app(
    pooled_dsn: str, database_dsn: str, prefix: str, notes_table: str
) -> Iterator[Flask]:
    app = create_app(
        pooled_dsn,
        prefix,
        notes_table,
        VENTURI_LISTEN_DSN=database_dsn,
        VENTURI_WORKER=True,
        VENTURI_WORKER_CONCURRENCY=4,
        VENTURI_WORKER_POLL_INTERVAL=60,
        VENTURI_WORKER_STOP_TIMEOUT=10,
    )
    venturi.queue_for(app).migrate()
    yield app
    venturi.close(app)
    app.extensions["notes_engine"].dispose()


def test_flask_through_the_pooler(pooled_app: Flask, database_dsn: str, notes_table: str) -> None:
    client = pooled_app.test_client()
    # Each request enqueues on the app's own connection, in its transaction. (Not the
    # SQLAlchemy route: its engine keeps psycopg's preparation on, which an application
    # turns off itself behind this pooler.)
    for n in range(NOTES):
        assert client.post("/notes", data={"body": f"note {n}"}).status_code == 200
    with psycopg.connect(database_dsn) as conn:
        query = sql.SQL("INSERT INTO {} (body) SELECT 'more ' || i FROM generate_series(1, %s) i")
        conn.execute(query.format(sql.Identifier(notes_table)), [NOTES])
    with pooled_app.app_context():  # and these on the extension's own pool
        ids = [publish.enqueue(note_id=n) for n in range(NOTES + 1, 2 * NOTES + 1)]
    wait_until(
        lambda: [p for _, p in _notes(database_dsn, notes_table)] == [True] * 2 * NOTES,
        timeout=60,
        what="every note published by the in-process worker",
    )
    queue = venturi.queue_for(pooled_app)
    # A handler's writes commit before its batched completion does: wait for those too.
    wait_until(
        lambda: (
            [getattr(queue.get(i), "status", None) for i in ids] == [JobStatus.COMPLETED] * NOTES
        ),
        timeout=10,
        what="every publish job's completion",
    )
    worker = venturi.worker(pooled_app)
    assert worker is not None and worker.listening


def test_django_through_the_pooler(pooled_dsn: str, database_dsn: str, prefix: str) -> None:
    env = {
        **os.environ,
        "SHOP_DSN": pooled_dsn,
        "SHOP_LISTEN_DSN": database_dsn,
        "SHOP_TABLE": f"shop_orders_{uuid.uuid4().hex[:10]}",
        "SHOP_PREFIX": prefix,
        "SHOP_ORDERS": str(NOTES),
    }
    done = subprocess.run(
        [sys.executable, str(SHOP)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"fulfilled": NOTES, "listening": True}
