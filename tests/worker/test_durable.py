"""Durable handlers against the real server: steps recorded once and replayed, sleeps and
waits that end the run without holding a slot, signals, and children."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from ulid import ULID

import venturi
from tests.support import Probe, wait_until
from venturi import JobContext, JobRecord, JobStatus, Outcome, Queue, Worker
from venturi.durable import DurableRuns
from venturi.errors import InvalidJob, InvalidPayload, UnknownJob
from venturi.settlements import Claim, Settlement

Calls = dict[str, int]


def _count(calls: Calls, key: str) -> Callable[[], int]:
    def run() -> int:
        calls[key] = calls.get(key, 0) + 1
        return calls[key] * 10

    return run


def _waiting(queue: Queue, job_id: ULID) -> JobRecord | None:
    """The job's record once it is suspended in a sleep or a wait, else None."""
    job = queue.get(job_id)
    if job is None or job.durable is None or job.durable.waiting is None:
        return None
    # The job row and its wait are read by two statements: the run may still hold it.
    return job if job.status is JobStatus.PENDING else None


def _status(queue: Queue, job_id: ULID) -> JobStatus:
    job = queue.get(job_id)
    assert job is not None
    return job.status


def _journal(queue: Queue, job_id: ULID) -> list[Outcome]:
    return [r.outcome for r in queue.journal(job_id)]


def test_a_recorded_step_is_not_run_again_on_a_retry(queue: Queue) -> None:
    calls: Calls = {}

    @queue.job("flaky", context=True, backoff=venturi.constant(0))
    def flaky(ctx: JobContext) -> list[int]:
        first = ctx.step("first", _count(calls, "first"))
        second = ctx.step("second", _count(calls, "second"))
        if ctx.attempt < 3:
            raise RuntimeError("after the steps")
        return [first, second]

    job_id = flaky.enqueue()
    queue.drain(wait_for=5)
    assert calls == {"first": 1, "second": 1}
    assert queue.result(job_id) == [10, 10]
    job = queue.get(job_id)
    assert job is not None and job.durable is not None
    assert [(s.name, s.seq, s.result, s.run_no) for s in job.durable.steps] == [
        ("first", 1, 10, 1),
        ("second", 2, 10, 1),
    ]
    assert all(s.size == 2 for s in job.durable.steps)


def test_a_step_that_raised_is_not_recorded_and_runs_again(queue: Queue) -> None:
    calls: Calls = {}

    def charge() -> str:
        calls["charge"] = calls.get("charge", 0) + 1
        if calls["charge"] == 1:
            raise ConnectionError("gateway down")
        return "ch_1"

    @queue.job("charge", context=True, backoff=venturi.constant(0))
    def handler(ctx: JobContext) -> str:
        return str(ctx.step("charge", charge))

    job_id = handler.enqueue()
    queue.drain(wait_for=5)
    assert calls == {"charge": 2}
    assert queue.result(job_id) == "ch_1"


def test_step_arguments_and_json_results(queue: Queue) -> None:
    @queue.job("args", context=True)
    def handler(ctx: JobContext) -> Any:
        return ctx.step("add", lambda a, b=0: (a + b, "t"), 2, b=3)

    job_id = handler.enqueue()
    queue.drain()
    # The step returns its result as JSON reads it back, on the first run as on replays.
    assert queue.result(job_id) == [5, "t"]


def test_the_same_name_twice_in_one_run_fails_the_job(queue: Queue) -> None:
    @queue.job("twice", context=True)
    def handler(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        ctx.step("a", lambda: 2)

    job_id = handler.enqueue()
    queue.drain()
    assert _status(queue, job_id) is JobStatus.DEAD
    assert "reached twice" in (queue.journal(job_id)[-1].note or "")


def test_a_replay_whose_steps_changed_order_fails_loudly(queue: Queue) -> None:
    @queue.job("reorder", context=True, backoff=venturi.constant(0))
    def handler(ctx: JobContext) -> None:
        # A deploy between the runs swapped the two steps.
        for name in ["a", "b"] if ctx.attempt == 1 else ["b", "a"]:
            ctx.step(name, str, name)
        if ctx.attempt == 1:
            raise RuntimeError("retry me")

    job_id = handler.enqueue()
    queue.drain(wait_for=2)
    assert _status(queue, job_id) is JobStatus.DEAD
    note = queue.journal(job_id)[-1].note or ""
    assert "changed order" in note
    job = queue.get(job_id)
    assert job is not None and job.durable is not None
    assert [s.result for s in job.durable.steps] == ["a", "b"]


def test_a_replay_reaching_a_new_name_where_another_was_recorded_fails(queue: Queue) -> None:
    @queue.job("renamed", context=True, backoff=venturi.constant(0))
    def handler(ctx: JobContext) -> None:
        for name in ["a", "b"] if ctx.attempt == 1 else ["a", "c"]:
            ctx.step(name, lambda: 1)
        if ctx.attempt == 1:
            raise RuntimeError("retry me")

    job_id = handler.enqueue()
    queue.drain(wait_for=2)
    assert _status(queue, job_id) is JobStatus.DEAD
    assert "was recorded as 'b'" in (queue.journal(job_id)[-1].note or "")


def test_bad_step_input_fails_the_run_and_records_nothing(queue: Queue, probe: Probe) -> None:
    @queue.job("bad", context=True, max_attempts=1)
    def handler(ctx: JobContext, which: str) -> None:
        if which == "nul":
            ctx.step("a\x00b", lambda: 1)
        elif which == "long":
            ctx.step("x" * 201, lambda: 1)
        elif which == "json":
            ctx.step("obj", object)
        elif which == "nan":
            ctx.step("nan", lambda: float("nan"))
        else:
            ctx.sleep(-1)

    ids = [handler.enqueue(which=w) for w in ("nul", "long", "json", "nan", "negative")]
    queue.drain()
    for job_id in ids:
        assert _status(queue, job_id) is JobStatus.DEAD
    assert probe.count("steps") == 0
    notes = [queue.journal(i)[-1].note or "" for i in ids]
    assert "NUL" in notes[0]
    assert "at most 200" in notes[1]
    assert "InvalidPayload" in notes[2] and "InvalidPayload" in notes[3]
    assert "sleep(duration)" in notes[4]


def test_a_transactional_step_commits_its_writes_with_its_record(
    queue: Queue, probe: Probe
) -> None:
    table = psycopg.sql.Identifier(f"{queue.prefix}_effects")

    def write(conn: psycopg.Connection[Any], job: str, fail: bool) -> int:
        conn.execute(psycopg.sql.SQL("INSERT INTO {} VALUES (%s)").format(table), (job,))
        if fail:
            raise RuntimeError("after the write")
        return 1

    @queue.job("tx", context=True, backoff=venturi.constant(0))
    def handler(ctx: JobContext) -> int:
        return int(ctx.step("write", write, str(ctx.job.id), ctx.attempt == 1, transactional=True))

    probe.conn.execute(psycopg.sql.SQL("CREATE TABLE {} (job text PRIMARY KEY)").format(table))
    try:
        job_id = handler.enqueue()
        queue.drain(wait_for=5)
        assert queue.result(job_id) == 1
        # The first run's write rolled back with its failed step; the second's committed
        # with its record (the primary key would refuse a second write).
        count = probe.conn.execute(psycopg.sql.SQL("SELECT count(*) FROM {}").format(table))
        assert count.fetchone() == (1,)
        assert probe.count("steps") == 1
    finally:
        probe.conn.execute(psycopg.sql.SQL("DROP TABLE {}").format(table))


def test_a_zombie_run_cannot_record_a_step(queue: Queue, probe: Probe) -> None:
    store = queue.store
    job_id = queue.enqueue("zombie", {})
    [job] = store.claim("w1", {"zombie": 30}, 1)
    stale = Claim.of(job)
    # Its lease lapses and the reaper takes the job back; another worker claims it.
    probe.rows("UPDATE {jobs} SET claim_expires_at = now() - interval '1 second'")
    assert store.settle(stale, Settlement.recover("w1")) is Outcome.RECOVERED
    [again] = store.claim("w2", {"zombie": 30}, 1)
    assert again.run_count == 2
    zombie = DurableRuns(store)(stale)
    with pytest.raises(venturi.StepFenced):
        zombie.step("charge", lambda: 1, (), {})
    with pytest.raises(venturi.StepFenced):
        zombie.step("tx", lambda conn: 1, (), {}, transactional=True)
    assert probe.count("steps") == 0
    # The live run records it, and its settlement stands; the zombie's is fenced.
    live = DurableRuns(store)(Claim.of(again))
    assert live.step("charge", lambda: 2, (), {}) == 2
    assert store.settle(stale, Settlement.complete()) is None
    assert store.settle(Claim.of(again), Settlement.complete()) is Outcome.COMPLETED
    assert probe.count("steps") == 1
    assert _status(queue, job_id) is JobStatus.COMPLETED


def test_a_sleep_frees_the_slot_and_resumes_after_its_steps(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    calls: Calls = {}
    ran: list[int] = []

    @queue.job("sleeper", context=True)
    def sleeper(ctx: JobContext) -> int:
        ran.append(ctx.attempt)
        before = ctx.step("before", _count(calls, "before"))
        ctx.sleep(timedelta(seconds=0.5))
        after = ctx.step("after", _count(calls, "after"))
        return int(before) + int(after)

    @queue.job("quick")
    def quick() -> str:
        return "ok"

    job_id = sleeper.enqueue()
    start_worker(concurrency=1)
    job = wait_until(lambda: _waiting(queue, job_id), what="the job sleeping")
    assert job.status is JobStatus.PENDING and job.failure_count == 0
    assert job.durable is not None and job.durable.waiting is not None
    assert job.durable.waiting.what == "sleep"
    # The one slot is free while it sleeps.
    other = quick.enqueue()
    wait_until(lambda: _status(queue, other) is JobStatus.COMPLETED, what="quick job")
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="sleeper done")
    assert queue.result(job_id) == 20
    assert calls == {"before": 1, "after": 1}
    assert ran == [1, 2]
    journal = queue.journal(job_id)
    assert [r.outcome for r in journal] == [Outcome.PAUSED, Outcome.COMPLETED]
    assert journal[0].facts is not None and journal[0].facts["waiting"]["what"] == "sleep"
    final = queue.get(job_id)
    assert final is not None and final.durable is not None
    assert final.durable.waiting is None
    assert final.failure_count == 0


def test_sleep_until_a_past_time_returns_at_once(queue: Queue) -> None:
    @queue.job("past", context=True)
    def handler(ctx: JobContext) -> str:
        ctx.sleep(until=queue.store.now() - timedelta(seconds=1))
        return "done"

    job_id = handler.enqueue()
    queue.drain()
    assert queue.result(job_id) == "done"
    assert _journal(queue, job_id) == [Outcome.COMPLETED]


def _approval_handler(queue: Queue, seen: list[Any], timeout: float = 60) -> Any:
    @queue.job("approval", context=True)
    def approval(ctx: JobContext) -> Any:
        ctx.step("prepare", lambda: "prepared")
        payload = ctx.wait_for("approved", timeout=timeout)
        seen.append(payload)
        return payload

    return approval


def test_a_signal_sent_before_the_wait_is_kept(queue: Queue) -> None:
    seen: list[Any] = []
    approval = _approval_handler(queue, seen)
    job_id = approval.enqueue()
    assert queue.signal(job_id, "approved", {"by": "ann"}) is False
    queue.drain()
    assert queue.result(job_id) == {"by": "ann"}
    assert _journal(queue, job_id) == [Outcome.SIGNALLED, Outcome.COMPLETED]


def test_a_signal_after_the_wait_wakes_the_job_and_twice_keeps_the_first(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    seen: list[Any] = []
    approval = _approval_handler(queue, seen)
    job_id = approval.enqueue()
    start_worker(concurrency=1, poll_interval=30)
    job = wait_until(lambda: _waiting(queue, job_id), what="the job waiting")
    assert job.durable is not None and job.durable.waiting is not None
    assert (job.durable.waiting.what, job.durable.waiting.name) == ("signal", "approved")
    assert job.visible_at > queue.store.now() + timedelta(seconds=50)
    assert queue.signal(job_id, "approved", 1) is True
    queue.signal(job_id, "approved", 2)
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="woken by signal")
    assert seen == [1]
    assert queue.result(job_id) == 1
    final = queue.get(job_id)
    assert final is not None and final.durable is not None
    assert [s.payload for s in final.durable.signals] == [1, 2]
    assert _journal(queue, job_id) == [
        Outcome.PAUSED,
        Outcome.SIGNALLED,
        Outcome.COMPLETED,
    ] or _journal(queue, job_id)[:2] == [Outcome.PAUSED, Outcome.SIGNALLED]


def test_a_signal_during_the_run_before_it_suspends_still_wakes_it(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    entered = threading.Event()
    go_on = threading.Event()

    @queue.job("racing", context=True)
    def racing(ctx: JobContext) -> Any:
        ctx.step("first", lambda: 1)
        if ctx.attempt == 1:
            entered.set()
            go_on.wait(10)
        return ctx.wait_for("go", timeout=3600)

    job_id = racing.enqueue()
    start_worker(concurrency=1, poll_interval=30)
    assert entered.wait(10)
    # The run still holds the job: it has not looked for the signal yet, and will not
    # find it when it does if this commits later; it must still not wait an hour.
    queue.signal(job_id, "go", "now")
    go_on.set()
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="job completed")
    assert queue.result(job_id) == "now"


def test_a_signal_between_the_runs_last_look_and_its_settlement_still_wakes_it(
    queue: Queue, start_worker: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = queue.store
    record_wait = store.record_wait

    def then_signal(claim: Claim, what: str, name: str, until: datetime) -> bool:
        # The run looked for the signal and found none; it arrives now, while the run
        # still holds the job (so it wakes nothing), before the run's pause is written.
        recorded = record_wait(claim, what, name, until)
        if what == "signal":
            assert queue.signal(claim.job_id, name, "late") is False
        return recorded

    monkeypatch.setattr(store, "record_wait", then_signal)

    @queue.job("window", context=True)
    def window(ctx: JobContext) -> Any:
        return ctx.wait_for("go", timeout=3600)

    job_id = window.enqueue()
    start_worker(concurrency=1, poll_interval=30)
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="woken after settling")
    assert queue.result(job_id) == "late"
    assert _journal(queue, job_id) == [Outcome.SIGNALLED, Outcome.PAUSED, Outcome.COMPLETED]


def test_a_wait_times_out_and_returns_none(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    seen: list[Any] = []
    approval = _approval_handler(queue, seen, timeout=0.5)
    job_id = approval.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="timed out")
    assert seen == [None]
    # A signal that comes later changes nothing recorded.
    with pytest.raises(venturi.SignalRefused):
        queue.signal(job_id, "approved", 1)


def test_a_wait_can_raise_on_timeout(queue: Queue, start_worker: Callable[..., Worker]) -> None:
    @queue.job("strict", context=True, max_attempts=1)
    def strict(ctx: JobContext) -> None:
        ctx.wait_for("never", timeout=0.3, raise_on_timeout=True)

    job_id = strict.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: _status(queue, job_id) is JobStatus.DEAD, what="dead after timeout")
    assert "TimedOut" in (queue.journal(job_id)[-1].note or "")


def test_signals_to_finished_and_unknown_jobs_and_bad_input_write_nothing(
    queue: Queue, probe: Probe
) -> None:
    @queue.job("plain")
    def plain() -> None:
        return None

    done = plain.enqueue()
    queue.drain()
    with pytest.raises(venturi.SignalRefused, match="completed"):
        queue.signal(done, "x")
    with pytest.raises(UnknownJob):
        queue.signal(ULID(), "x")
    pending = plain.enqueue()
    with pytest.raises(InvalidJob):
        queue.signal(pending, "")
    with pytest.raises(InvalidJob):
        queue.signal(pending, "a\x00")
    with pytest.raises(InvalidPayload):
        queue.signal(pending, "x", {"bad": float("inf")})
    assert probe.count("signals") == 0
    assert _journal(queue, done) == [Outcome.COMPLETED]


def test_a_signal_in_a_rolled_back_transaction_is_not_delivered(
    queue: Queue, database_dsn: str, probe: Probe
) -> None:
    seen: list[Any] = []
    approval = _approval_handler(queue, seen, timeout=3600)
    job_id = approval.enqueue()
    queue.drain()
    with psycopg.connect(database_dsn) as conn:
        queue.signal(job_id, "approved", "lost", conn=conn)
        conn.rollback()
    assert probe.count("signals") == 0
    assert _status(queue, job_id) is JobStatus.PENDING
    with psycopg.connect(database_dsn) as conn:
        assert queue.signal(job_id, "approved", "kept", conn=conn) is True
        conn.commit()
    queue.drain()
    assert queue.result(job_id) == "kept"


def test_spawn_enqueues_once_and_wait_for_job_returns_its_result(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    spawned: list[ULID] = []

    @queue.job("child")
    def child(n: int) -> int:
        return n * 2

    @queue.job("parent", context=True, backoff=venturi.constant(0))
    def parent(ctx: JobContext) -> Any:
        child_id = ctx.spawn("child", child, {"n": 21})
        spawned.append(child_id)
        if ctx.attempt == 1:
            raise RuntimeError("replay the spawn")
        return ctx.wait_for_job(child_id, timeout=60)

    job_id = parent.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: _status(queue, job_id) is JobStatus.COMPLETED, what="parent done")
    assert queue.result(job_id) == 42
    assert len(set(spawned)) == 1 and len(spawned) >= 2
    assert queue.stats().total("completed") == 2


def test_wait_for_a_dead_child_raises(queue: Queue) -> None:
    @queue.job("doomed", max_attempts=1)
    def doomed() -> None:
        raise venturi.Fail("no")

    @queue.job("watcher", context=True, max_attempts=1)
    def watcher(ctx: JobContext) -> None:
        ctx.wait_for_job(ctx.spawn("c", "doomed"))

    job_id = watcher.enqueue()
    queue.drain(kinds=["watcher"])
    queue.drain(kinds=["doomed"])
    queue.store.retry_now(job_id)
    queue.drain(kinds=["watcher"])
    assert _status(queue, job_id) is JobStatus.DEAD
    assert "JobFailed" in (queue.journal(job_id)[-1].note or "")


def test_a_transactional_kind_cannot_use_durable_calls(queue: Queue) -> None:
    @queue.job("txkind", context=True, transactional=True, max_attempts=1)
    def txkind(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)

    job_id = txkind.enqueue()
    queue.drain()
    assert _status(queue, job_id) is JobStatus.DEAD
    assert "transactional=True" in (queue.journal(job_id)[-1].note or "")


def test_deleting_a_job_deletes_its_steps_and_signals(queue: Queue, probe: Probe) -> None:
    seen: list[Any] = []
    approval = _approval_handler(queue, seen, timeout=3600)
    job_id = approval.enqueue()
    queue.drain()
    queue.signal(job_id, "approved", 1)
    queue.drain()
    assert probe.count("steps") > 0 and probe.count("signals") == 1
    assert probe.count("waits") == 1
    assert queue.cleanup(finished_before=queue.store.now() + timedelta(seconds=1)) == 1
    assert probe.count("steps") == 0 and probe.count("signals") == 0
    assert probe.count("waits") == 0


@pytest.mark.slow
def test_one_worker_at_concurrency_one_carries_a_hundred_suspended_jobs(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    calls: Calls = {}
    lock = threading.Lock()

    def once(key: str) -> Callable[[], int]:
        def run() -> int:
            with lock:
                calls[key] = calls.get(key, 0) + 1
            return 1

        return run

    @queue.job("carried", context=True)
    def carried(ctx: JobContext, n: int) -> int:
        ctx.step("start", once(f"{n}:start"))
        if n % 2:
            ctx.sleep(2 + n / 50)
        else:
            ctx.wait_for("go", timeout=60)
        ctx.step("end", once(f"{n}:end"))
        return n

    ids = [carried.enqueue(n=n) for n in range(100)]
    start_worker(concurrency=1)

    def suspended() -> bool:
        waiting = 0
        for job_id in ids:
            job = queue.get(job_id)
            assert job is not None
            if job.durable is not None and job.durable.waiting is not None:
                waiting += 1
        return waiting == 100

    wait_until(suspended, timeout=60, interval=0.05, what="all 100 jobs suspended at once")
    for job_id, n in zip(ids, range(100), strict=True):
        if n % 2 == 0:
            queue.signal(job_id, "go", n)
    wait_until(
        lambda: all(_status(queue, i) is JobStatus.COMPLETED for i in ids),
        timeout=120,
        interval=0.2,
        what="all 100 jobs completed",
    )
    assert sorted(queue.result(i) for i in ids) == list(range(100))
    assert all(count == 1 for count in calls.values()) and len(calls) == 200
