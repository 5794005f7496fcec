"""The LISTEN connection killed outright, or silently cut off: workers still start jobs."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest
from ulid import ULID

import venturi
import venturi.store.notifier
from tests.faults import invariants
from tests.faults.proxy import BlackholeProxy
from tests.faults.scenario import Watch, ledger_queue, start_latency
from tests.faults.server import ThrowawayServer
from tests.support import wait_until
from venturi.prefix import Prefix
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore

KILLS = 5
POLL_INTERVAL = 30.0  # long, so a prompt start proves a wakeup rather than a poll


def _listener(worker: venturi.Worker) -> PostgresNotifier:
    notifier = worker.notifier
    assert isinstance(notifier, PostgresNotifier)
    return notifier


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_listener_killed_repeatedly(database_dsn: str, shared_prefix: str) -> None:
    queue, book = ledger_queue(database_dsn, shared_prefix)
    watch = Watch(database_dsn, shared_prefix)
    latencies = []
    ids: list[ULID] = []
    with queue.worker(concurrency=2, poll_interval=POLL_INTERVAL) as worker:
        wait_until(lambda: worker.listening, 30, what="the worker's self-probe")
        notifier = _listener(worker)
        baseline = start_latency(queue, watch, ids=ids)
        for _ in range(KILLS):
            pid = wait_until(notifier.backend_pid, 30, what="a listener connection")
            watch.rows("SELECT pg_terminate_backend(%s)", (pid,))
            # Enqueued in the gap: its NOTIFY goes nowhere; the catch-up claim after the
            # reconnect must find it.
            latencies.append(start_latency(queue, watch, ids=ids))
            wait_until(lambda p=pid: notifier.backend_pid() not in (None, p), 30)  # type: ignore[misc]
        reconnects = notifier.reconnects
    queue.close()
    book.close()
    assert len(ids) == KILLS + 1
    figures = invariants.check(database_dsn, shared_prefix, ids)
    watch.close()
    print(
        f"\nlistener killed {KILLS}x with pg_terminate_backend: {reconnects} reconnects; jobs "
        f"enqueued in the gaps started after "
        + ", ".join(f"{s:.2f}s" for s in latencies)
        + f" (poll interval {POLL_INTERVAL:.0f}s; before the kills {baseline:.3f}s)\n"
        f"  {figures.line()}"
    )
    assert reconnects >= KILLS
    assert max(latencies) < POLL_INTERVAL / 2, "a job waited for a poll after a listener kill"


class _ListenThroughProxy(PostgresStore):
    """A store whose pool connects directly but whose listener goes through a proxy."""

    listen_conninfo = ""

    def notifier(self) -> PostgresNotifier:
        _, kwargs = (self.connections.target.text, self.connections.keywords())
        return PostgresNotifier(self.listen_conninfo, kwargs, self.prefix)


@pytest.fixture
def proxy(own_server: ThrowawayServer) -> Iterator[BlackholeProxy]:
    instance = BlackholeProxy("127.0.0.1", own_server.port)
    yield instance
    instance.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_silent_listener_loss_is_noticed_by_the_ping(
    own_server: ThrowawayServer,
    own_prefix: str,
    proxy: BlackholeProxy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ping_interval, ping_timeout, poll = 1.0, 2.0, 5.0
    monkeypatch.setattr(venturi.store.notifier, "PING_INTERVAL", ping_interval)
    monkeypatch.setattr(venturi.store.notifier, "PING_TIMEOUT", ping_timeout)
    dsn = own_server.dsn
    store = _ListenThroughProxy.from_dsn(dsn, Prefix(own_prefix), pool_size=4)
    assert isinstance(store, _ListenThroughProxy)
    store.listen_conninfo = psycopg.conninfo.make_conninfo(dsn, port=str(proxy.port))
    queue, book = ledger_queue(dsn, own_prefix, store=store)
    watch = Watch(dsn, own_prefix)
    caplog.set_level(logging.INFO, logger="venturi.notifier")
    ids: list[ULID] = []
    with queue.worker(concurrency=2, poll_interval=poll) as worker:
        wait_until(lambda: worker.listening, 30, what="the worker's self-probe")
        notifier = _listener(worker)
        before = start_latency(queue, watch, ids=ids)
        assert proxy.blackhole() == 1  # only the listener goes through the proxy
        during = start_latency(queue, watch, timeout=60, ids=ids)
        wait_until(lambda: notifier.reconnects >= 1, 60, what="the listener to reconnect")
        noticed = [r for r in caplog.records if "listener connection lost" in r.getMessage()]
        after = start_latency(queue, watch, ids=ids)
    queue.close()
    book.close()
    assert len(ids) == 3
    figures = invariants.check(dsn, own_prefix, ids)
    watch.close()
    print(
        f"\nsilent listener loss (proxy blackholes the LISTEN connection; ping every "
        f"{ping_interval}s, {ping_timeout}s deadline): jobs started {before:.3f}s after "
        f"enqueue before, {during:.2f}s during (poll interval {poll}s), {after:.3f}s after "
        f"the reconnect\n  noticed: {noticed[0].getMessage() if noticed else None}\n"
        f"  {figures.line()}"
    )
    assert noticed, "the listener never noticed it was cut off"
    assert during < poll + ping_timeout + 5, "a job waited far past the poll interval"
