"""The Flask extension against the real database: the example app end to end (in-process
worker, one transaction for a row and its job, rollback), config, CLI, exit hook."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from flask import Flask, current_app
from psycopg import sql

from tests.contrib.flask_app import create_app, publish, venturi
from tests.support import wait_until
from venturi import ConfigurationError, JobContext, JobStatus
from venturi import models as venturi_models
from venturi.contrib.flask import FlaskSettings, Venturi

ROOT = Path(__file__).resolve().parents[2]


def _create_notes(dsn: str, table: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                "body text NOT NULL, published boolean NOT NULL DEFAULT false)"
            ).format(sql.Identifier(table))
        )


def _notes(dsn: str, table: str) -> list[tuple[str, bool]]:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT body, published FROM {} ORDER BY id")
        return [(r[0], r[1]) for r in conn.execute(query.format(sql.Identifier(table)))]


@pytest.fixture
def notes_table(database_dsn: str, prefix: str) -> Iterator[str]:
    table = f"{prefix}_notes"
    _create_notes(database_dsn, table)
    yield table
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


@pytest.fixture
def app(database_dsn: str, prefix: str, notes_table: str) -> Iterator[Flask]:
    app = create_app(
        database_dsn,
        prefix,
        notes_table,
        VENTURI_WORKER=True,
        VENTURI_WORKER_CONCURRENCY=2,
        VENTURI_WORKER_POLL_INTERVAL=1,
        VENTURI_WORKER_STOP_TIMEOUT=10,
    )
    venturi.queue_for(app).migrate()
    yield app
    venturi.close(app)
    app.extensions["notes_engine"].dispose()


@pytest.mark.parametrize("route", ["/notes", "/sa/notes"])
def test_a_request_writes_a_row_and_its_job_in_one_transaction(
    app: Flask, database_dsn: str, notes_table: str, route: str
) -> None:
    response = app.test_client().post(route, data={"body": "hello"})
    assert response.status_code == 200, response.text
    queue = venturi.queue_for(app)
    wait_until(
        lambda: _notes(database_dsn, notes_table) == [("hello", True)],
        timeout=30,
        what="the in-process worker to publish the note",
    )
    body = response.get_json()
    job = queue.get(body["job"])
    assert job is not None
    wait_until(
        lambda: getattr(queue.get(job.id), "status", None) is JobStatus.COMPLETED,
        what="the job completed",
    )
    assert queue.journal(job.id)[-1].attachment == body["note"]
    assert venturi.worker(app) is not None


@pytest.mark.parametrize("route", ["/notes", "/sa/notes"])
def test_a_rolled_back_request_leaves_neither_row_nor_job(
    app: Flask, database_dsn: str, notes_table: str, route: str
) -> None:
    client = app.test_client()
    failed = client.post(route, data={"body": "lost", "fail": "1"})
    queue = venturi.queue_for(app)
    if route == "/notes":  # aborts with 500 inside the transaction
        assert failed.status_code == 500, failed.text
    else:  # the SQLAlchemy route rolls back and reports the id it rolled back
        assert failed.status_code == 200, failed.text
        assert queue.get(failed.get_json()["job"]) is None
    # A later committed request is processed; by then the lost one would have been too.
    kept = client.post(route, data={"body": "kept"})
    wait_until(
        lambda: _notes(database_dsn, notes_table) == [("kept", True)],
        what="the committed note to be published",
    )
    assert [str(j.id) for j in queue.history(kind="notes.publish")] == [kept.get_json()["job"]]


def test_jobs_run_inside_the_app_context(app: Flask) -> None:
    seen: list[str] = []
    kind = f"ctx.{app.config['VENTURI_PREFIX']}"

    @venturi.job(kind)
    def where() -> None:
        seen.append(current_app.config["VENTURI_PREFIX"])

    with app.app_context():
        venturi.enqueue(kind)
    assert venturi.queue_for(app).drain() == 1
    assert seen == [app.config["VENTURI_PREFIX"]]


def test_an_async_job_runs_inside_the_app_context(app: Flask) -> None:
    seen: list[str] = []
    kind = f"actx.{app.config['VENTURI_PREFIX']}"

    @venturi.job(kind)
    async def where() -> str:
        await asyncio.sleep(0)
        seen.append(current_app.config["VENTURI_PREFIX"])
        return "done"

    with app.app_context():
        job_id = venturi.enqueue(kind)
    queue = venturi.queue_for(app)
    assert queue.drain() == 1
    assert seen == [app.config["VENTURI_PREFIX"]]
    assert [(e.outcome, e.attachment) for e in queue.journal(job_id)] == [("completed", "done")]


def test_the_worker_starts_once_per_process(app: Flask) -> None:
    first = venturi.start_worker(app)
    assert venturi.start_worker(app) is first
    app.test_client().get("/missing")  # a request: the hook must not start another
    assert venturi.worker(app) is first
    venturi.stop_worker(app)
    assert venturi.worker(app) is None
    assert venturi.start_worker(app) is not first


def test_each_app_gets_its_own_queue_from_its_own_config(
    app: Flask, database_dsn: str, notes_table: str
) -> None:
    other = create_app(database_dsn, app.config["VENTURI_PREFIX"] + "_b", notes_table)
    try:
        assert venturi.queue_for(other).prefix == app.config["VENTURI_PREFIX"] + "_b"
        assert venturi.queue_for(app).prefix == app.config["VENTURI_PREFIX"]
        with other.app_context():
            assert venturi.queue is venturi.queue_for(other)
        assert "notes.publish" in venturi.queue_for(other).definitions
    finally:
        venturi.close(other)


def test_flask_venturi_commands_act_on_the_apps_queue(app: Flask) -> None:
    runner = app.test_cli_runner()
    with app.app_context():
        publish.enqueue(note_id=1)
    result = runner.invoke(args=["venturi", "stats"])
    assert result.exit_code == 0, result.output
    assert "notes.publish" in result.output
    # `flask venturi worker` takes its defaults from the VENTURI_WORKER_* settings.
    helped = runner.invoke(args=["venturi", "worker", "--help"])
    assert helped.exit_code == 0, helped.output
    assert "default: 2" in " ".join(helped.output.split())


def test_config_is_checked(database_dsn: str) -> None:
    with pytest.raises(ConfigurationError, match="VENTURI_WORKERS"):
        FlaskSettings.from_config({"VENTURI_WORKERS": 2})
    with pytest.raises(ConfigurationError, match="VENTURI_WORKER_CONCURRENCY"):
        FlaskSettings.from_config({"VENTURI_WORKER_CONCURRENCY": "4"})
    with pytest.raises(ConfigurationError, match="VENTURI_WORKER_POLL_INTERVAL"):
        FlaskSettings.from_config({"VENTURI_WORKER_POLL_INTERVAL": 0})
    with pytest.raises(ConfigurationError, match="VENTURI_WORKER_KINDS"):
        FlaskSettings.from_config({"VENTURI_WORKER_KINDS": "a,b"})
    settings = FlaskSettings.from_config({"VENTURI_PREFIX": "p", "SECRET_KEY": "x"})
    assert (settings.prefix, settings.worker) == ("p", False)
    with pytest.raises(RuntimeError, match="init_app"):
        Venturi().queue_for(Flask("bare"))


EXIT_SCRIPT = """
import sys, threading
from flask import Flask
from venturi.contrib.flask import Venturi

ext = Venturi()
started = threading.Event()

@ext.job("slow", context=True)
def slow(ctx):
    started.set()
    ctx.stopping.wait(60)
    return "stopped"

app = Flask("exit")
app.config.update(VENTURI_DSN=sys.argv[1], VENTURI_PREFIX=sys.argv[2],
                  VENTURI_WORKER_POLL_INTERVAL=1)
ext.init_app(app)
ext.queue_for(app).migrate()
with app.app_context():
    print(ext.enqueue("slow"), flush=True)
ext.start_worker(app)
assert started.wait(60)
sys.exit(0)   # the atexit hook must stop the worker, which lets the job finish
"""


def test_the_in_process_worker_is_stopped_at_exit(database_dsn: str, prefix: str) -> None:
    script = textwrap.dedent(EXIT_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-c", script, database_dsn, prefix],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    ext = Venturi()
    app = Flask("check")
    app.config.update(VENTURI_DSN=database_dsn, VENTURI_PREFIX=prefix)
    ext.init_app(app)
    try:
        job = ext.queue_for(app).get(job_id)
        assert job is not None
        assert job.status is JobStatus.COMPLETED
    finally:
        ext.close(app)


def test_enqueue_carries_a_concurrency_key(app: Flask) -> None:
    with app.app_context():
        job_id = venturi.enqueue("crm.sync", {}, concurrency_key="customer:42")
        [many] = venturi.enqueue_many(
            [venturi_models.NewJob("crm.sync", {}, concurrency_key="customer:7")]
        )
        queue = venturi.queue_for(app)
        assert queue.get(job_id).concurrency_key == "customer:42"  # type: ignore[union-attr]
        assert queue.get(many).concurrency_key == "customer:7"  # type: ignore[union-attr]


def test_flask_venturi_worker_runs_a_group_of_worker_processes(
    app: Flask, database_dsn: str, prefix: str, notes_table: str
) -> None:
    factory = f"tests.contrib.flask_app:create_app({database_dsn!r}, {prefix!r}, {notes_table!r})"
    command = [sys.executable, "-m", "flask", "--app", factory, "venturi", "worker"]
    group = subprocess.Popen(
        [*command, "--processes", "2", "--max-jobs-per-child", "100"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    queue = venturi.queue_for(app)
    try:
        with app.app_context():  # no request: the app's in-process worker stays off
            ids = [publish.enqueue(note_id=n) for n in range(6)]

        def all_done() -> bool:
            return all(getattr(queue.get(i), "status", None) is JobStatus.COMPLETED for i in ids)

        wait_until(all_done, 60, what="the group's processes to run the jobs")
    finally:
        group.send_signal(signal.SIGTERM)
        _, errors = group.communicate(timeout=60)
    assert group.returncode == 0, errors
    assert "worker group of 2 processes starting" in errors
    assert len(re.findall(r"worker process \d+ started", errors)) == 2, errors


def test_a_transactional_job_writes_through_a_session_on_its_transaction(
    app: Flask, database_dsn: str, notes_table: str
) -> None:
    from sqlalchemy import text

    from venturi.contrib.sqlalchemy import session_for

    kind = f"txn.{app.config['VENTURI_PREFIX']}"
    quoted = sql.Identifier(notes_table).as_string()

    @venturi.job(kind, transactional=True, context=True, backoff=lambda n: 3600)
    def write(ctx: JobContext, body: str) -> None:
        with session_for(ctx) as session:
            session.execute(text(f"INSERT INTO {quoted} (body) VALUES (:body)"), {"body": body})
        if current_app.config["VENTURI_PREFIX"] and body == "refused":
            raise ValueError("refused after writing")

    with app.app_context():
        kept, refused = (
            venturi.enqueue(kind, {"body": "kept"}),
            venturi.enqueue(kind, {"body": "refused"}),
        )
    queue = venturi.queue_for(app)
    assert queue.drain(kinds=[kind]) == 2
    assert [e.outcome for e in queue.journal(kept)] == ["completed"]
    assert [e.outcome for e in queue.journal(refused)] == ["retried"]
    assert _notes(database_dsn, notes_table) == [("kept", False)]


def test_enqueue_after_and_enqueue_and_wait_on_the_extension(app: Flask) -> None:
    kind = f"sum.{app.config['VENTURI_PREFIX']}"

    @venturi.job(kind, context=True)
    def total(ctx: JobContext, n: int) -> int:
        return n + int(sum(ctx.parents.values()))

    with app.app_context():
        first = venturi.enqueue(kind, {"n": 1})
        second = venturi.enqueue(kind, {"n": 2}, depends_on=[first])
        queue = venturi.queue_for(app)
        assert queue.get(second).status == "waiting"  # type: ignore[union-attr]
        assert queue.drain() == 2
        assert venturi.result(second, timeout=10) == 3
