"""Transactional handlers (``transactional=True``): writes on ``ctx.conn`` commit with the
job's fenced completion or not at all; every other ending rolls them back and settles as
any run; the lease keeps being renewed while the transaction is open."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest
from psycopg import sql

import venturi
from tests.support import Probe, wait_until
from venturi import JobContext, JobRecord, Queue, Worker
from venturi.errors import ConfigurationError
from venturi.settlements import Settlement

WAIT = 30.0


class Settled(venturi.WorkerEvents):
    def __init__(self) -> None:
        self.fenced: list[JobRecord] = []
        self.lost: list[JobRecord] = []

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Any, duration: float
    ) -> None:
        if outcome is None:
            self.fenced.append(job)

    def lease_lost(self, job: JobRecord) -> None:
        self.lost.append(job)


@pytest.fixture
def charges(database_dsn: str, queue: Queue) -> Iterator[sql.Identifier]:
    """The handlers' own table, beside the prefix's."""
    name = sql.Identifier(f"{queue.prefix}_charges")
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (order_id int, run_no int)").format(name))
    yield name
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(name))


def charge(ctx: JobContext, table: sql.Identifier, order_id: int) -> None:
    ctx.conn.execute(
        sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(table), [order_id, ctx.attempt]
    )


def rows(probe: Probe, table: sql.Identifier) -> list[tuple[Any, ...]]:
    return probe.conn.execute(
        sql.SQL("SELECT order_id, run_no FROM {} ORDER BY 1, 2").format(table)
    ).fetchall()


def outcomes(queue: Queue, job_id: object) -> list[str]:
    return [e.outcome.value for e in queue.journal(str(job_id))]


def settled(queue: Queue, job_id: object) -> list[str]:
    return wait_until(lambda: outcomes(queue, job_id), timeout=WAIT, what=f"job {job_id} to settle")


def test_writes_and_completion_commit_together(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    @queue.job("billing.charge", transactional=True, context=True)
    def charge_order(ctx: JobContext, order_id: int) -> dict[str, int]:
        charge(ctx, charges, order_id)
        return {"charged": order_id}

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=2)
    assert settled(queue, job_id) == ["completed"]
    assert rows(probe, charges) == [(7, 1)]
    [entry] = queue.journal(str(job_id))
    assert entry.attachment == {"charged": 7}


def raise_error() -> None:
    raise ValueError("card declined")


def raise_retry() -> None:
    raise venturi.Retry(after=3600, note="later")


def raise_pause() -> None:
    raise venturi.Pause(after=3600)


def raise_fail() -> None:
    raise venturi.Fail("poison")


@pytest.mark.parametrize(
    ("ending", "outcome"),
    [
        (raise_error, "retried"),
        (raise_retry, "retried"),
        (raise_pause, "paused"),
        (raise_fail, "dead"),
    ],
)
def test_any_other_ending_rolls_the_writes_back_and_settles_as_today(
    queue: Queue,
    start_worker: Callable[..., Worker],
    probe: Probe,
    charges: sql.Identifier,
    *,
    ending: Callable[[], None],
    outcome: str,
) -> None:
    @queue.job("billing.charge", transactional=True, context=True, backoff=lambda n: 3600)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        ending()

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1)
    assert settled(queue, job_id) == [outcome]
    assert rows(probe, charges) == []


def test_a_database_error_in_the_handler_rolls_back_and_retries(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    @queue.job("billing.charge", transactional=True, context=True, backoff=lambda n: 3600)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        ctx.conn.execute("SELECT 1/0")

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1)
    assert settled(queue, job_id) == ["retried"]
    assert rows(probe, charges) == []
    assert "DivisionByZero" in (queue.journal(str(job_id))[0].note or "")


def test_a_run_cancelled_while_it_runs_commits_nothing(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    events = Settled()
    wrote = threading.Event()

    @queue.job("billing.charge", transactional=True, context=True, lease=1.0)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        wrote.set()
        ctx.stopping.wait(WAIT)  # the heartbeat sees the lease gone and says so

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1, events=events)
    assert wrote.wait(WAIT)
    assert queue.cancel(str(job_id))
    wait_until(lambda: events.fenced, timeout=WAIT, what="the late completion to be fenced")
    assert rows(probe, charges) == []
    assert outcomes(queue, job_id) == ["cancelled"]


def test_a_transaction_outliving_its_lease_is_fenced_at_commit(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    events = Settled()

    # The timeout stops the renewals; the reaper is too slow to take the job first, so
    # only the lease itself fences the commit.
    @queue.job("billing.charge", transactional=True, context=True, lease=1.0, timeout=0.2)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        wait_until(
            lambda: probe.scalar(
                "SELECT claim_expires_at < clock_timestamp() FROM {jobs} WHERE id = %s",
                ctx.job.id.to_uuid(),
            ),
            timeout=WAIT,
            what="the lease to lapse",
        )

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1, events=events, reaper_interval=3600)
    wait_until(lambda: events.fenced, timeout=WAIT, what="the late completion to be fenced")
    assert rows(probe, charges) == []
    job = queue.get(str(job_id))
    assert job is not None and job.status == "claimed"  # left to the reaper


def test_the_heartbeat_renews_the_lease_while_the_transaction_is_open(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    events = Settled()
    renewals: list[bool] = []

    @queue.job("billing.charge", transactional=True, context=True, lease=1.0)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        # The handler also touches the job's row as a reader; no lock is held on it.
        first = lease_of(probe, ctx)
        wait_until(lambda: lease_of(probe, ctx) > first, timeout=WAIT, what="a heartbeat renewal")
        renewals.append(ctx.extend_lease())
        wait_until(
            lambda: (lease_of(probe, ctx) - first).total_seconds() > 2.0,
            timeout=WAIT,
            what="three lease lengths of renewals",
        )

    job_id = charge_order.enqueue(order_id=7)
    # The worker's own reaper scans every 0.1 s: a missed renewal would be taken back.
    start_worker(concurrency=1, events=events, reaper_interval=0.1)
    assert settled(queue, job_id) == ["completed"]
    assert renewals == [True]
    assert rows(probe, charges) == [(7, 1)]
    assert events.fenced == [] and events.lost == []


def lease_of(probe: Probe, ctx: JobContext) -> Any:
    return probe.scalar("SELECT claim_expires_at FROM {jobs} WHERE id = %s", ctx.job.id.to_uuid())


def test_a_commit_that_fails_lets_the_run_go_and_the_fence_decides(
    queue: Queue,
    start_worker: Callable[..., Worker],
    probe: Probe,
    charges: sql.Identifier,
    database_dsn: str,
) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD UNIQUE (order_id) DEFERRABLE INITIALLY DEFERRED").format(
                charges
            )
        )

    @queue.job("billing.charge", transactional=True, context=True, lease=1.0, max_attempts=1)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        charge(ctx, charges, order_id)  # refused only at commit

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1, reaper_interval=0.1)
    # Let go, its lease lapses and the reaper takes it back: out of attempts, dead.
    assert settled(queue, job_id) == ["dead"]
    assert rows(probe, charges) == []


def test_a_transaction_the_handler_left_aborted_is_a_failed_run(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    @queue.job("billing.charge", transactional=True, context=True, backoff=lambda n: 3600)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        with contextlib.suppress(psycopg.errors.DivisionByZero):
            ctx.conn.execute("SELECT 1/0")  # swallowed, but the transaction is aborted

    job_id = charge_order.enqueue(order_id=7)
    start_worker(concurrency=1)
    assert settled(queue, job_id) == ["retried"]
    assert rows(probe, charges) == []
    assert "InFailedSqlTransaction" in (queue.journal(str(job_id))[0].note or "")


def test_ctx_conn_belongs_to_transactional_runs_only(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    seen: list[str] = []

    @queue.job("plain", context=True)
    def plain(ctx: JobContext) -> None:
        with pytest.raises(ConfigurationError, match="transactional=True"):
            _ = ctx.conn
        seen.append("refused")

    job_id = plain.enqueue()
    start_worker(concurrency=1)
    assert settled(queue, job_id) == ["completed"]
    assert seen == ["refused"]


def test_current_job_gives_a_handler_without_context_its_transaction(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    @queue.job("billing.charge", transactional=True)
    def charge_order(order_id: int) -> None:
        ctx = venturi.current_job()
        assert ctx is not None
        charge(ctx, charges, order_id)

    job_id = charge_order.enqueue(order_id=3)
    start_worker(concurrency=1)
    assert settled(queue, job_id) == ["completed"]
    assert rows(probe, charges) == [(3, 1)]


def never_opened() -> AbstractContextManager[psycopg.Connection[Any]]:
    raise AssertionError("a refused registration opens no transaction")


def test_bad_transactional_options_are_refused_at_registration(queue: Queue) -> None:
    def handler() -> None: ...

    with pytest.raises(ConfigurationError, match="transactional of 'a' must be True or False"):
        queue.job("a", transactional="yes")(handler)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs transactional=True"):
        queue.job("b", transaction=never_opened)(handler)
    with pytest.raises(ConfigurationError, match="transaction of 'c' must be callable"):
        queue.job("c", transactional=True, transaction=1)(handler)  # type: ignore[arg-type]
    assert queue.definitions == {}


def test_drain_runs_a_transactional_kind_in_its_transaction(
    queue: Queue, probe: Probe, charges: sql.Identifier
) -> None:
    @queue.job("billing.charge", transactional=True, context=True, backoff=lambda n: 3600)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)
        if order_id < 0:
            raise ValueError("refund, not a charge")

    done, refused = charge_order.enqueue(order_id=1), charge_order.enqueue(order_id=-1)
    assert queue.drain() == 2
    assert outcomes(queue, done) == ["completed"]
    assert outcomes(queue, refused) == ["retried"]
    assert rows(probe, charges) == [(1, 1)]


def test_a_transactional_kind_with_a_concurrency_limit_completes_once(
    queue: Queue, start_worker: Callable[..., Worker], probe: Probe, charges: sql.Identifier
) -> None:
    """Its completion is written in its own transaction; passing the place on (which
    completes a run of a limited kind) must not write it again and report it fenced."""
    events = Settled()

    @queue.job("billing.limited", transactional=True, context=True, concurrency=1)
    def charge_order(ctx: JobContext, order_id: int) -> None:
        charge(ctx, charges, order_id)

    ids = [charge_order.enqueue(order_id=n) for n in range(6)]
    start_worker(concurrency=4, events=events)
    for job_id in ids:
        assert settled(queue, job_id) == ["completed"]
    assert rows(probe, charges) == [(n, 1) for n in range(6)]
    assert events.fenced == []
