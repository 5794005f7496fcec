"""``read_dsn`` to a real hot standby: the queue writes on the primary, its reads come
from the standby once it has replayed them, and the standby takes no write."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import venturi
from tests.faults.server import ThrowawayServer, running_throwaway_server
from tests.scaling.standby import StandbyServer
from tests.support import backends, fresh_prefix, wait_until
from venturi.store.postgres import PostgresStore
from venturi.store.reads import READ_APPLICATION_NAME

pytestmark = pytest.mark.slow  # starts a primary and a standby of its own


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[ThrowawayServer, StandbyServer]]:
    with running_throwaway_server() as primary:
        standby = StandbyServer(primary)
        try:
            standby.start()
            yield primary, standby
        finally:
            standby.destroy()


def _wal_position(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def test_reads_come_from_the_standby_and_writes_from_the_primary(
    replicated: tuple[ThrowawayServer, StandbyServer],
) -> None:
    primary, standby = replicated
    queue = venturi.Queue(primary.dsn, prefix=fresh_prefix("replica"), read_dsn=standby.dsn)
    try:
        queue.migrate()  # on the primary; the standby gets the tables by replay

        @queue.job("k")
        def k(n: int) -> int:
            return n + 1

        done = [k.enqueue(n=n) for n in range(5)]
        assert queue.drain() == 5
        assert queue.result(done[0], timeout=10) == 1  # waiting reads the primary
        # Every run is completed on the primary when drain returns.
        with psycopg.connect(primary.dsn) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {queue.store.prefix.jobs} WHERE status = 'completed'"
            ).fetchone()
        assert row is not None and row[0] == 5
        position = _wal_position(primary.dsn)
        wait_until(lambda: standby.replayed(position), what="the standby replayed the drain")

        assert {r.id for r in queue.history()} == set(done)
        wait_until(
            lambda: {s.kind: s.completed for s in queue.stats().kinds} == {"k": 5},
            what="the standby's stats to count the drain",
        )
        record = queue.get(done[0])
        assert record is not None and record.status is venturi.JobStatus.COMPLETED
        assert (
            backends(standby.dsn, READ_APPLICATION_NAME) >= 1
            and backends(primary.dsn, READ_APPLICATION_NAME) == 0
        )

        # A job enqueued now is on the primary at once, and read from the standby only
        # once replayed there.
        later = k.enqueue(n=9)
        assert queue.store.reads.get(later) is not None
        wait_until(lambda: queue.get(later) is not None, what="the standby replayed the enqueue")

        assert queue.reads is not queue.store.reads
        writer = PostgresStore(queue.reads.connections, queue.reads.prefix)  # a write sent there
        with pytest.raises(venturi.StoreError, match="read-only transaction"):
            writer.enqueue(queue.new_job("k", {"n": 0}))
        assert queue.cancel(later)  # writes go to the primary
    finally:
        queue.close()
