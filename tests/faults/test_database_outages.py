"""The database restarting and going away, on a private server: workers ride it out."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from psycopg import sql
from ulid import ULID

import venturi
from tests.faults import invariants
from tests.faults.scenario import Watch, prepare
from tests.faults.server import ThrowawayServer
from tests.support import ledger, wait_until
from tests.support.fleet import Fleet

RESTARTS = 3
# Longer than the 30 s on purpose: psycopg_pool's doubling reconnect delay tries
# again 31 s into an outage, which would hide a slow resume; at 40 s its next try is 63 s.
OUTAGE = float(os.environ.get("VENTURI_FAULT_OUTAGE", "40"))
RESUME_BOUND = 15.0
POLL_INTERVAL = 60.0  # so a prompt start after the faults proves LISTEN is back
POOL_TIMEOUT = 3.0


class Producer:
    """Enqueues a job every few milliseconds in a thread, through outages (counting them)."""

    def __init__(self, queue: venturi.Queue) -> None:
        self.queue = queue
        self.ids: list[ULID] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.ids.append(self.queue.enqueue(ledger.WORK_KIND, {"ms": 5}))
            except venturi.StoreUnavailable:
                self.refused += 1

    def stop(self) -> list[ULID]:
        self._stop.set()
        self._thread.join(POOL_TIMEOUT * 3)
        return self.ids


def _first_start_after(watch: Watch, moment: datetime, workers: int = 1) -> float:
    """Seconds from ``moment`` until each of ``workers`` workers had started a job."""
    query = sql.SQL(
        "SELECT count(*), max(first) FROM ("
        " SELECT min(started_at) AS first FROM {} WHERE started_at > %s GROUP BY worker) AS w"
    ).format(watch.ledger)

    def started() -> tuple[float] | None:
        count, last = watch.rows(query, (moment,))[0]
        return ((last - moment).total_seconds(),) if count >= workers else None

    what = f"{workers} workers to start a job after the database came back"
    return wait_until(started, 120, what=what)[0]


def _stale_failures(lines: list[tuple[float, str]], back: list[float]) -> list[int]:
    """Claims that failed after each restart had completed (on stale pooled connections)."""
    ends = [*back[1:], float("inf")]
    return [
        sum(1 for stamp, line in lines if start < stamp < end and "claim failed" in line)
        for start, end in zip(back, ends, strict=True)
    ]


def _all_listening(queue: venturi.Queue, watch: Watch, workers: int, each: int) -> float:
    """Seconds until each of ``workers`` idle workers (``each`` jobs at a time, no
    prefetch) started one of as many long jobs as they can hold, all enqueued at once:
    each worker had to be woken by its own LISTEN."""
    wait_until(lambda: watch.unfinished() == 0, 120, 0.05, "the backlog to drain")
    enqueued = watch.clock()
    job = venturi.NewJob(ledger.WORK_KIND, {"ms": 2000, "cooperative": False})
    queue.enqueue_many([job] * (workers * each))
    query = sql.SQL(
        "SELECT count(DISTINCT worker), max(started_at) FROM {} WHERE started_at > %s"
    ).format(watch.ledger)

    def started() -> tuple[float] | None:
        count, last = watch.rows(query, (enqueued,))[0]
        return ((last - enqueued).total_seconds(),) if count == workers else None

    return wait_until(started, 120, what="every worker to be woken")[0]


def _restart_during_a_run(
    server: ThrowawayServer, watch: Watch, workers: int
) -> tuple[list[float], list[float]]:
    """Restart the server three times, each after some progress; returns the seconds
    until every worker claimed again, and the wall-clock times the server was back."""
    first_claims: list[float] = []
    back: list[float] = []
    for number in range(1, RESTARTS + 1):
        wait_until(lambda n=number: len(watch.executions()) >= 150 * n, 120, 0.05, "progress")  # type: ignore[misc]
        server.restart()
        back.append(time.time())
        first_claims.append(_first_start_after(watch, watch.clock(), workers))
    return first_claims, back


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_database_restarts_three_times_during_a_run(
    own_server: ThrowawayServer, own_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    dsn = own_server.dsn
    queue = prepare(dsn, own_prefix, pool_timeout=POOL_TIMEOUT)
    # The default pool size: after a restart every idle pooled connection is stale.
    options = {"lease": 5, "concurrency": 4, "prefetch": 0, "pool_size": 10}
    fleet = make_fleet(dsn, own_prefix, poll_interval=POLL_INTERVAL, **options)
    workers = [fleet.spawn() for _ in range(3)]
    watch = Watch(dsn, own_prefix)
    producer = Producer(queue)
    first_claims, back = _restart_during_a_run(own_server, watch, len(workers))
    ids = producer.stop()
    after = _all_listening(queue, watch, len(workers), 4)
    wait_until(lambda: watch.unfinished() == 0, 60, 0.05, "the last jobs to finish")
    assert all(w.alive for w in workers), fleet.logs()
    fleet.close()
    stale = [_stale_failures(w.log_lines(), back) for w in workers]
    queue.close()
    figures = invariants.check(dsn, own_prefix, ids, reruns={"recovered", "released"})
    watch.close()
    print(
        f"\ndatabase restart x{RESTARTS} (pg_ctl restart -m fast), 3 worker processes, "
        f"a producer enqueuing throughout ({len(ids)} enqueued, {producer.refused} refused "
        f"with StoreUnavailable while down)\n  time until every worker claimed again after "
        f"each restart: {_seconds(first_claims)}; claims failed on stale pooled connections "
        f"after each restart, per worker: {stale}\n  12 jobs enqueued at once after the "
        f"restarts started on all 3 workers within {after:.2f}s (poll interval "
        f"{POLL_INTERVAL:.0f}s: each was woken by NOTIFY)\n  {figures.line()}"
    )
    assert after < POLL_INTERVAL / 2, "the job waited for a poll: LISTEN did not come back"
    # One stale connection may fail a claim; then the store replaces the pool's others.
    assert max(max(per_restart) for per_restart in stale) <= 1, stale


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}s" for v in values)


def _lines_between(
    lines: list[tuple[float, str]], start: float, end: float, logger: str = ""
) -> int:
    """Log lines stamped within [start, end], from loggers under ``logger`` if given."""
    return sum(1 for stamp, line in lines if start <= stamp <= end and f" {logger}" in line)


def _refusals(queue: venturi.Queue) -> list[tuple[float, str]]:
    """Enqueue until the pool itself times out; (seconds, message) of each refusal.

    The first attempts take pooled connections the server just cut; later ones wait for
    the pool, which cannot connect: both end in StoreUnavailable, neither hangs."""
    refusals: list[tuple[float, str]] = []
    while len(refusals) < 10 and not any("no database connection" in m for _, m in refusals):
        began = time.monotonic()
        with pytest.raises(venturi.StoreUnavailable) as refused:
            queue.enqueue(ledger.WORK_KIND, {})
        refusals.append((time.monotonic() - began, str(refused.value)))
    return refusals


def _outage(server: ThrowawayServer, fleet: Fleet) -> tuple[float, float]:
    """Keep the server down for OUTAGE seconds, the workers alive throughout; returns
    the wall-clock times it went down and came back."""
    down_at = time.time()
    while time.time() < down_at + OUTAGE:
        assert all(w.alive for w in fleet.workers), fleet.logs()
        threading.Event().wait(1.0)
    server.start()
    return down_at, time.time()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_database_down_for_a_while(
    own_server: ThrowawayServer, own_prefix: str, make_fleet: Callable[..., Fleet]
) -> None:
    dsn = own_server.dsn
    queue = prepare(dsn, own_prefix, pool_timeout=POOL_TIMEOUT)
    fleet = make_fleet(dsn, own_prefix, poll_interval=POLL_INTERVAL, pool_timeout=POOL_TIMEOUT)
    workers = [fleet.spawn() for _ in range(2)]
    watch = Watch(dsn, own_prefix)
    ids = [queue.enqueue(ledger.WORK_KIND, {"ms": 5}) for _ in range(20)]
    wait_until(lambda: watch.unfinished() == 0, 60, 0.05, "the first jobs to run")
    own_server.stop()
    refusals = _refusals(queue)
    down_at, up_at = _outage(own_server, fleet)
    ids.append(wait_until(lambda: _try_enqueue(queue), 60, what="enqueue to work again"))
    wait_until(lambda: watch.unfinished() == 0, 120, 0.05, "the workers to resume")
    resumed = time.time() - up_at
    span = up_at - down_at
    rates = [round(_lines_between(w.log_lines(), down_at, up_at) / span, 2) for w in workers]
    own = [
        round(_lines_between(w.log_lines(), down_at, up_at, "venturi.") / span, 2) for w in workers
    ]
    fleet.close()
    logs = fleet.logs()
    queue.close()
    figures = invariants.check(dsn, own_prefix, ids)
    watch.close()
    print(
        f"\ndatabase down {span:.0f}s: enqueue raised StoreUnavailable after "
        f"{_seconds([s for s, _ in refusals])} (pool timeout {POOL_TIMEOUT}s), last: "
        f"{refusals[-1][1]}\n  worker log lines per second while down: {rates} (venturi's "
        f"own: {own}, the rest psycopg_pool's connection attempts); both workers alive; a "
        f"job enqueued after the restart started {resumed:.2f}s after the server was up\n"
        f"  {figures.line()}"
    )
    assert max(s for s, _ in refusals) < POOL_TIMEOUT + 10, "enqueue hung instead of failing"
    assert "no database connection" in refusals[-1][1], refusals
    assert max(own) <= 1.0, f"workers flood the log while the database is down:\n{logs}"
    assert max(rates) <= 2.0, f"the pool floods the log while the database is down:\n{logs}"
    assert resumed < RESUME_BOUND, f"workers took {resumed:.1f}s to resume:\n{logs}"


def _try_enqueue(queue: venturi.Queue) -> ULID | None:
    try:
        return queue.enqueue(ledger.WORK_KIND, {})
    except venturi.StoreUnavailable:
        return None
