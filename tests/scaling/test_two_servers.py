"""Prefixes placed on separate servers, routed as the README's "Scaling" recipe says: one
`Queue` per database, each kind registered on the queue of the database it lives in, and
a worker per database. Jobs enqueued to each are drained by that database's worker alone,
and nothing crosses: no row lands in, and no run comes from, the other database."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

import venturi
from tests.faults.server import ThrowawayServer, running_throwaway_server
from tests.support import drop_prefix, wait_until

pytestmark = pytest.mark.slow  # starts a PostgreSQL server of its own


@pytest.fixture(scope="module")
def second_server() -> Iterator[ThrowawayServer]:
    with running_throwaway_server() as server:
        yield server


@pytest.fixture
def second_prefix(second_server: ThrowawayServer, prefix: str) -> Iterator[str]:
    # The same prefix on both servers: only the database keeps the two queues apart.
    yield prefix
    drop_prefix(second_server.dsn, prefix)


def _kinds_stored(dsn: str, prefix: str) -> dict[str, int]:
    query = sql.SQL("SELECT kind, count(*) FROM {} GROUP BY kind").format(
        sql.Identifier(f"{prefix}_jobs")
    )
    with psycopg.connect(dsn) as conn:
        return {kind: int(count) for kind, count in conn.execute(query).fetchall()}


def test_prefixes_on_two_servers_each_drained_by_its_own_worker(
    database_dsn: str, second_server: ThrowawayServer, second_prefix: str
) -> None:
    orders = venturi.Queue(database_dsn, prefix=second_prefix, strict=True)
    reports = venturi.Queue(second_server.dsn, prefix=second_prefix, strict=True)
    ran: dict[str, list[tuple[str, int]]] = {"orders": [], "reports": []}
    lock = threading.Lock()

    @orders.job("orders.confirm")
    def confirm(n: int) -> None:
        with lock:
            ran["orders"].append(("orders.confirm", n))

    @reports.job("reports.render")
    def render(n: int) -> None:
        with lock:
            ran["reports"].append(("reports.render", n))

    try:
        for queue in (orders, reports):
            queue.migrate()
        routes = {kind: q for q in (orders, reports) for kind in q.definitions}
        # A misrouted enqueue is refused by the strict queue, and writes nothing.
        with pytest.raises(venturi.UnknownKind):
            orders.enqueue("reports.render", {"n": 0})
        for n in range(20):
            confirm.enqueue(n=n)  # a job function enqueues on its own queue
            routes["reports.render"].enqueue("reports.render", {"n": n})
        with orders.worker(concurrency=4), reports.worker(concurrency=4):
            wait_until(
                lambda: len(ran["orders"]) == 20 and len(ran["reports"]) == 20,
                what="both workers drained their own database",
            )
        assert sorted(ran["orders"]) == [("orders.confirm", n) for n in range(20)]
        assert sorted(ran["reports"]) == [("reports.render", n) for n in range(20)]
        assert _kinds_stored(database_dsn, second_prefix) == {"orders.confirm": 20}
        assert _kinds_stored(second_server.dsn, second_prefix) == {"reports.render": 20}
        assert {s.kind: s.completed for s in orders.stats().kinds} == {"orders.confirm": 20}
        assert {s.kind: s.completed for s in reports.stats().kinds} == {"reports.render": 20}
    finally:
        orders.close()
        reports.close()
