"""A worker meets database errors that are not outages: a settlement the database
refuses lets its run go (never held without a settlement on its way), a fatal error
stops the worker loudly, timeouts fire on time, and an enqueue whose answer was lost is
recognised rather than written twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from ulid import ULID

from tests.support import Probe, wait_until
from venturi import JobContext, Pause, Queue, Worker
from venturi.errors import SchemaError, StoreUnavailable, WorkerFailed
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store.enqueueing import Enqueuer
from venturi.store.postgres import PostgresStore

WAIT = 30.0
POISON = "poison"


@pytest.fixture
def poisoned_journal(probe: Probe) -> Iterator[None]:
    """The journal refuses the note 'poison': a real error from the server (23514) for
    exactly the settlements that carry it."""
    probe.rows(
        "ALTER TABLE {journal} ADD CONSTRAINT venturi_test_poison "
        "CHECK (note IS NULL OR note <> 'poison')"
    )
    yield


def outcomes(queue: Queue, job_id: object) -> list[str]:
    return [e.outcome.value for e in queue.journal(str(job_id))]


@pytest.mark.usefixtures("poisoned_journal")
def test_a_settlement_the_database_refuses_lets_the_run_go(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    runs: list[int] = []

    @queue.job("refused", lease=1.0, max_attempts=5, context=True)
    def refused(ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Pause(after=0, note=POISON)

    job_id = refused.enqueue()
    worker = start_worker(concurrency=2, reaper_interval=0.1)
    # The pause cannot be written: the run leaves the held set at once (no heartbeat
    # keeps its lease), the lease lapses and the reaper takes the job back.
    wait_until(
        lambda: outcomes(queue, job_id) == ["recovered", "completed"],
        timeout=WAIT,
        what="the refused run to be recovered and the job to complete",
    )
    assert runs == [1, 2]
    assert len(worker.held) == 0
    assert worker.healthy


@pytest.mark.usefixtures("poisoned_journal")
def test_one_refused_completion_does_not_drop_its_batch(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    gate = threading.Event()

    @queue.job("batched", lease=2.0, context=True)
    def batched(ctx: JobContext, n: int) -> None:
        gate.wait(WAIT)
        if n == 0 and ctx.attempt == 1:
            ctx.note(POISON)

    ids = [batched.enqueue(n=n) for n in range(20)]
    worker = start_worker(concurrency=20, reaper_interval=0.1)
    wait_until(
        lambda: probe.count("jobs", "status = 'claimed'") == 20,
        timeout=WAIT,
        what="all 20 jobs to be running",
    )
    gate.set()  # 20 completions reach the completer together
    wait_until(
        lambda: probe.count("jobs", "status = 'completed'") == 20,
        timeout=WAIT,
        what="every job to complete",
    )
    assert outcomes(queue, ids[0]) == ["recovered", "completed"]
    for job_id in ids[1:]:
        assert outcomes(queue, job_id) == ["completed"]
    assert worker.healthy


def test_a_fatal_error_stops_the_worker_and_run_raises(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("k")
    def k() -> None: ...

    worker = queue.worker(poll_interval=0.2, reaper_interval=0.2)
    dropped = threading.Event()

    def drop_tables() -> None:
        wait_until(lambda: worker.healthy, timeout=WAIT, what="the worker to start")
        probe.rows("DROP TABLE {journal}, {jobs} CASCADE")
        dropped.set()

    threading.Thread(target=drop_tables, daemon=True).start()
    with pytest.raises(WorkerFailed, match="stopped itself") as caught:
        worker.run(timeout=5)
    assert dropped.is_set()
    assert isinstance(caught.value.__cause__, SchemaError)
    assert isinstance(worker.failure, SchemaError)
    assert not worker.healthy
    worker.stop()  # idempotent after a failure


def test_a_timeout_fires_on_time_whatever_the_lease(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    told: list[float] = []

    @queue.job("slow", timeout=0.5, context=True)  # lease: the default 60 s
    def slow(ctx: JobContext) -> None:
        started = time.monotonic()
        ctx.stopping.wait(WAIT)
        told.append(time.monotonic() - started)

    slow.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: told, timeout=WAIT, what="the timed-out run to be told to stop")
    # A heartbeat tick (20 s at this lease) would be far later; this is not a speed claim.
    # The deadline counts from the worker's start of the run, a moment before the
    # handler's own clock reading: the lower bound allows for that moment.
    assert 0.4 <= told[0] < 2.5, told


class LosingEnqueuer(Enqueuer):
    """Commits the first write, then loses its answer: the server ends the session
    before the client hears back (as when a connection drops right after COMMIT).
    ``writes`` counts the calls of the store's entry points."""

    def __init__(self, prefix: Prefix, max_payload_bytes: int, dsn: str) -> None:
        super().__init__(prefix, max_payload_bytes)
        self.dsn = dsn
        self.writes = 0
        self._inside = False

    def _lose_first_answer(self, conn: psycopg.Connection[Any]) -> None:
        if self.writes == 1:
            with psycopg.connect(self.dsn, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
            conn.execute("SELECT 1")  # raises: the session is gone

    def enqueue(self, conn: psycopg.Connection[Any], job: NewJob, job_id: ULID) -> ULID:
        if self._inside:  # a deduplicated job of enqueue_many's batch
            return super().enqueue(conn, job, job_id)
        self.writes += 1
        result = super().enqueue(conn, job, job_id)
        self._lose_first_answer(conn)
        return result

    def enqueue_many(self, conn: psycopg.Connection[Any], jobs: Any, ids: Any) -> list[ULID]:
        self.writes += 1
        self._inside = True
        try:
            result = super().enqueue_many(conn, jobs, ids)
        finally:
            self._inside = False
        self._lose_first_answer(conn)
        return result


@pytest.fixture
def losing_store(database_dsn: str, queue: Queue) -> Iterator[tuple[PostgresStore, LosingEnqueuer]]:
    store = PostgresStore.from_dsn(database_dsn, Prefix(queue.prefix), pool_size=2)
    enqueuer = LosingEnqueuer(store.prefix, store.max_payload_bytes, database_dsn)
    store._enqueuer = enqueuer
    yield store, enqueuer
    store.close()


def test_an_enqueue_whose_answer_was_lost_is_recognised_not_doubled(
    losing_store: tuple[PostgresStore, LosingEnqueuer], probe: Probe
) -> None:
    store, enqueuer = losing_store
    job_id = store.enqueue(NewJob("lost"))
    assert enqueuer.writes == 1  # the retry found the first write and wrote nothing
    assert probe.rows("SELECT id FROM {jobs}") == [(job_id.to_uuid(),)]
    ids = store.enqueue_many([NewJob("lost"), NewJob("lost")])
    assert enqueuer.writes == 2  # one write: only the first answer is lost
    assert probe.count("jobs") == 3 and len(set(ids)) == 2


def test_a_lost_batch_answer_is_recognised_not_doubled(
    losing_store: tuple[PostgresStore, LosingEnqueuer], probe: Probe
) -> None:
    store, enqueuer = losing_store
    ids = store.enqueue_many([NewJob("lost"), NewJob("lost"), NewJob("lost", dedup_key="d")])
    assert enqueuer.writes == 1
    assert sorted(r[0] for r in probe.rows("SELECT id FROM {jobs}")) == sorted(
        i.to_uuid() for i in ids
    )


def test_a_lost_merge_answer_is_not_retried(
    losing_store: tuple[PostgresStore, LosingEnqueuer], probe: Probe
) -> None:
    store, _ = losing_store
    job = NewJob("lost", {"n": 1}, dedup_key="m", on_duplicate=lambda old, new: new)
    with pytest.raises(StoreUnavailable):
        store.enqueue(job)
    # It did commit; the caller is told the outcome is unknown instead of merging twice.
    assert probe.count("jobs") == 1
