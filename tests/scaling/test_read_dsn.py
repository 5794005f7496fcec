"""``read_dsn``: a queue's dashboard reads go to a read-only connection of their own, and
nothing that writes, or must see the queue's own writes, ever does.

The read side here is a role on the same server (``-c role=...`` in the read DSN), granted
SELECT on the prefix's tables only: revoking that grant makes every read routed there fail,
which proves where each operation goes, while writes, waiting and results carry on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import psycopg_pool
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import venturi
from tests.support import backends, wait_until
from venturi.cli.support import CliState
from venturi.contrib.django.conf import VenturiSettings
from venturi.contrib.flask import FlaskSettings
from venturi.contrib.settings import SettingsError
from venturi.store.postgres import PostgresStore
from venturi.store.reads import READ_APPLICATION_NAME, read_only_keywords


def _prefix_tables(conn: psycopg.Connection[tuple[str]], prefix: str) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE %s",
        (prefix.replace("_", r"\_") + r"\_%",),
    ).fetchall()
    return [row[0] for row in rows]


def _set_select(dsn: str, prefix: str, role: str, *, granted: bool) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = sql.SQL(", ").join(sql.Identifier(t) for t in _prefix_tables(conn, prefix))
        if granted:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(tables, sql.Identifier(role)))
        else:
            conn.execute(
                sql.SQL("REVOKE SELECT ON {} FROM {}").format(tables, sql.Identifier(role))
            )


@pytest.fixture
def reader(database_dsn: str, prefix: str) -> Iterator[str]:
    """A role that may only read (SELECT, nothing else) and whose transactions are
    read-only; dropped with its grants afterwards."""
    role = f"{prefix}_reader"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(
                sql.Identifier(role)
            )
        )
    yield role
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _read_dsn(database_dsn: str, role: str, application_name: str) -> str:
    # The session runs as ``role`` (the connecting superuser may take any role), so no
    # password or pg_hba entry is needed for it.
    return make_conninfo(database_dsn, options=f"-c role={role}", application_name=application_name)


def _one_connection_pool(dsn: str) -> psycopg_pool.ConnectionPool[psycopg.Connection[object]]:
    return psycopg_pool.ConnectionPool(dsn, min_size=1, max_size=1, open=True)


def test_reads_go_to_read_dsn_and_writes_never_do(
    database_dsn: str, prefix: str, reader: str
) -> None:
    name = f"{prefix}_read"
    queue = venturi.Queue(
        database_dsn, prefix=prefix, read_dsn=_read_dsn(database_dsn, reader, name)
    )
    try:
        queue.migrate()

        @queue.job("k")
        def k(n: int) -> int:
            return n * 2

        assert backends(database_dsn, name) == 0  # the read pool connects on demand
        with queue.workflow() as flow:
            first = flow.add(k, n=1)
            flow.add(k, n=2, depends_on=[first])
        assert queue.drain() == 2
        _set_select(database_dsn, prefix, reader, granted=True)

        record = queue.get(first)
        assert record is not None and record.status is venturi.JobStatus.COMPLETED
        assert [e.outcome for e in queue.journal(first)] == [venturi.Outcome.COMPLETED]
        assert {r.id for r in queue.history()} == set(flow.ids)
        assert {s.kind: s.completed for s in queue.stats().kinds} == {"k": 2}
        assert queue.workflow_status(flow.id).succeeded
        assert queue.kinds() == [] and queue.paused() == set()
        assert queue.schedule_rows() == []
        assert {k.kind for k in queue.overview().kinds} == {"k"}
        assert queue.workers() == [] and queue.dead_groups() == []
        assert queue.throughput().totals("k") == (2, 0)
        assert backends(database_dsn, name) >= 1

        _set_select(database_dsn, prefix, reader, granted=False)
        reads: dict[str, Callable[[], object]] = {
            "get": lambda: queue.get(first),
            "journal": lambda: queue.journal(first),
            "history": queue.history,
            "stats": queue.stats,
            "kinds": queue.kinds,
            "paused": queue.paused,
            "schedule_rows": queue.schedule_rows,
            "workflow_status": lambda: queue.workflow_status(flow.id),
            "workers": queue.workers,
            "overview": queue.overview,
            "throughput": queue.throughput,
            "dead_groups": queue.dead_groups,
        }
        for what, read in reads.items():
            with pytest.raises(venturi.StoreError, match="permission denied"):
                read()
                pytest.fail(f"{what} did not read on read_dsn")

        # Writes, and reads of the queue's own writes, stay on the queue's database.
        job_id = k.enqueue(n=21)
        assert queue.drain() == 1
        assert queue.result(job_id, timeout=10) == 42
        assert queue.cancel(k.enqueue(n=0))
        assert queue.retry_now(k.enqueue_with({"n": 1}, delay=3600))
        assert queue.requeue(job_id)
        assert queue.pause("k") == ["k"] and queue.resume("k") == ["k"]
        assert queue.cleanup(finished_before=queue.store.now()) >= 1
    finally:
        queue.close()
    wait_until(lambda: backends(database_dsn, name) == 0, what="read pool closed")


def test_read_connections_refuse_writes_whatever_the_role(database_dsn: str, prefix: str) -> None:
    # A superuser's read DSN: only the read store's own session setting stops the write.
    queue = venturi.Queue(database_dsn, prefix=prefix, read_dsn=database_dsn)
    try:
        queue.migrate()
        assert queue.reads is not queue.store.reads
        writer = PostgresStore(queue.reads.connections, queue.reads.prefix)  # a write sent there
        with pytest.raises(venturi.StoreError, match="read-only transaction"):
            writer.enqueue(queue.new_job("k"))
        assert queue.stats().kinds == ()
    finally:
        queue.close()


def test_read_only_keywords_keep_the_dsns_own_options_and_name() -> None:
    assert read_only_keywords({}) == {
        "options": "-c default_transaction_read_only=on",
        "application_name": READ_APPLICATION_NAME,
    }
    assert read_only_keywords({"options": "-c role=r", "application_name": "dash"}) == {
        "options": "-c role=r -c default_transaction_read_only=on"
    }


def test_without_read_dsn_reads_use_the_queues_own_store(
    database_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VENTURI_READ_DSN", raising=False)
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        assert queue.reads is queue.store.reads


def test_a_bad_read_dsn_is_refused_before_any_pool_opens(
    database_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(venturi.ConfigurationError, match="read_dsn is not a valid") as info:
        venturi.Queue(database_dsn, prefix=prefix, read_dsn="host=x password='s3cret")
    assert "s3cret" not in str(info.value)
    monkeypatch.setenv("VENTURI_READ_DSN", "host=x password='s3cret")
    with pytest.raises(venturi.ConfigurationError, match="read_dsn"):
        venturi.Queue(database_dsn, prefix=prefix)


def test_read_dsn_from_env_for_queue_and_cli_but_never_for_a_shared_pool(
    database_dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env = make_conninfo(database_dsn, application_name=f"{prefix}_env")
    monkeypatch.setenv("VENTURI_READ_DSN", from_env)
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        assert _read_conninfo(queue) == from_env
    pool = _one_connection_pool(database_dsn)
    try:
        with venturi.Queue.from_pool(pool, prefix=prefix) as shared:
            assert shared.reads is shared.store.reads
    finally:
        pool.close()
    given = make_conninfo(database_dsn, application_name=f"{prefix}_opt")
    state = CliState(None, database_dsn, prefix, read_dsn=given)
    try:
        assert _read_conninfo(state.queue()) == given
    finally:
        state.close()


def _read_conninfo(queue: venturi.Queue) -> str:
    assert queue.reads is not queue.store.reads
    return queue.reads.connections.target.text


def test_flask_and_django_settings_take_a_read_dsn() -> None:
    flask = FlaskSettings.from_config({"VENTURI_READ_DSN": "host=replica"})
    assert flask.queue_options()["read_dsn"] == "host=replica"
    with pytest.raises(venturi.ConfigurationError, match="VENTURI_READ_DSN must be a str"):
        FlaskSettings.from_config({"VENTURI_READ_DSN": 5432})
    assert VenturiSettings(read_dsn="host=replica").queue_options()["read_dsn"] == "host=replica"
    assert VenturiSettings().read_dsn is None
    with pytest.raises(SettingsError, match="READ_DSN"):
        VenturiSettings(read_dsn="")
