"""A queue on a multi-host DSN follows the primary (issue 38), on a real streaming standby:
its pool, its listener, `Queue.server`, the healthcheck and the metric all move to the
promoted standby, and none stays on the old primary left up read-only. Schedules fire and
the retention prunes on the new primary."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from psycopg import sql

import venturi
from tests.faults.failover import ReplicatedPair, Switch, replicated_pair
from tests.faults.server import ThrowawayServer
from tests.support import fresh_prefix, postgres_store, wait_until
from venturi.cli.main import build_cli
from venturi.metrics import ServerCollector
from venturi.store.notifier import PostgresNotifier

pytestmark = pytest.mark.slow  # each test starts a primary and a standby of its own


@pytest.fixture
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair(synchronous=True) as made:
        yield made


def _both_hosts(pair: ReplicatedPair) -> str:
    """Both servers, without target_session_attrs: venturi asks for a writable host."""
    ports = f"{pair.primary.port},{pair.new_primary.port}"
    return f"host=127.0.0.1,127.0.0.1 port={ports} user=postgres dbname=postgres"


def _healthcheck(dsn: str, prefix: str) -> list[str]:
    result = CliRunner().invoke(
        build_cli(), ["healthcheck"], env={"VENTURI_DSN": dsn, "VENTURI_PREFIX": prefix}
    )
    return str(result.stdout).splitlines()


def _notified(notifier: PostgresNotifier, queue: venturi.Queue) -> bool:
    queue.enqueue("k", {})
    return notifier.wait(1.0)


@pytest.mark.timeout(180)
def test_a_queue_follows_the_primary_demoted_in_place(pair: ReplicatedPair) -> None:
    old, new = pair.primary, pair.new_primary
    prefix = fresh_prefix("follow")
    queue = venturi.Queue(_both_hosts(pair), prefix=prefix, pool_size=4)
    try:
        keywords = postgres_store(queue).connections.keywords()
        assert keywords["target_session_attrs"] == "read-write"
        queue.migrate()
        assert queue.server() == venturi.DatabaseServer("127.0.0.1", old.port, False, False)
        registry = CollectorRegistry()
        registry.register(ServerCollector(queue, max_age=0))
        notifier = queue.store.notifier()
        assert isinstance(notifier, PostgresNotifier)
        notifier.connect()
        wait_until(lambda: _notified(notifier, queue), 10, what="a NOTIFY before the switch")

        pair.switch(Switch.DEMOTE_IN_PLACE)
        assert _healthcheck(old.dsn, prefix)[1].startswith(
            f"FAIL read-write server: 127.0.0.1:{old.port} (read-only"
        )
        # The pool's connections are on the old primary, which refuses the write; the
        # store drops them and the retry lands on the new primary.
        job_id = queue.enqueue("k", {})
        assert queue.server() == venturi.DatabaseServer("127.0.0.1", new.port, False, False)
        with psycopg.connect(new.dsn) as conn:
            jobs = sql.Identifier(f"{prefix}_jobs")
            found = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(jobs), (job_id.to_uuid(),)
            ).fetchone()
        assert found == (1,)
        # The listener LISTENs again there (it says so by returning True), and hears it.
        wait_until(lambda: notifier.wait(0.5), 30, what="the listener to reconnect")
        wait_until(lambda: _notified(notifier, queue), 10, what="a NOTIFY from the new primary")
        assert notifier.reconnects == 1
        samples = {
            (s.labels["host"], s.labels["port"]): s.value
            for family in registry.collect()
            for s in family.samples
        }
        assert samples == {("127.0.0.1", str(new.port)): 1.0}
        assert _healthcheck(_both_hosts(pair), prefix)[1] == (
            f"ok   read-write server: 127.0.0.1:{new.port} (read-write)"
        )
        notifier.close()
    finally:
        queue.close()


@pytest.mark.timeout(180)
def test_schedules_and_the_retention_resume_on_the_new_primary(
    pair: ReplicatedPair, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = fresh_prefix("follow_sched")
    retention = venturi.Retention(completed=1, every=1)
    queue = venturi.Queue(pair.dsn, prefix=prefix, pool_size=4, retention=retention)
    caplog.set_level(logging.INFO, logger="venturi")
    ticks = sql.SQL("SELECT count(*) FROM {} WHERE kind = 'tick'").format(
        sql.Identifier(f"{prefix}_jobs")
    )

    @queue.periodic("tick", every=1)
    def tick() -> None:
        pass

    def count(server: ThrowawayServer) -> int:
        with psycopg.connect(server.dsn) as conn:
            row = conn.execute(ticks).fetchone()
        return 0 if row is None else int(row[0])

    def pruned() -> int:
        return sum(1 for r in caplog.records if r.getMessage().startswith("retention deleted"))

    try:
        queue.migrate()
        with queue.worker(concurrency=2, poll_interval=1.0) as worker:
            wait_until(lambda: count(pair.primary) >= 2 and pruned() >= 1, 30, what="a prune")
            promoted_at = pair.switch(Switch.DEMOTE_IN_PLACE)
            prunes = pruned()
            # Ticks are pruned a second after they complete: their journal says they ran.
            fired_there = sql.SQL(
                "SELECT count(*) FROM {} WHERE kind = 'tick' AND outcome = 'completed'"
                " AND recorded_at > %s"
            ).format(sql.Identifier(f"{prefix}_journal"))

            def fired_on_the_new_primary() -> bool:
                with psycopg.connect(pair.new_primary.dsn) as conn:
                    row = conn.execute(fired_there, (promoted_at,)).fetchone()
                return row is not None and row[0] >= 1

            wait_until(fired_on_the_new_primary, 30, what="the schedule to fire there")
            wait_until(lambda: pruned() > prunes, 30, what="a prune on the new primary")
            assert worker.healthy
    finally:
        queue.close()
