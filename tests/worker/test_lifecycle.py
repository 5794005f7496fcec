"""The worker's life: start, two-phase stop, idempotence, kinds it may claim, handler
threads that survive anything, fork safety and logging."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable

import pytest

import venturi
from tests.support import Probe, wait_until
from venturi import ConfigurationError, ForkedError, JobContext, Queue, Worker

WAIT = 30.0
GRACE = 2.0
STOP_SLACK = 5.0  # seconds a stop may take past its grace on a busy machine


def status(queue: Queue, job_id: object) -> str | None:
    job = queue.get(str(job_id))
    return None if job is None else job.status.value


def has_status(queue: Queue, job_id: object, wanted: str) -> Callable[[], bool]:
    return lambda: status(queue, job_id) == wanted


def test_stop_hands_back_prefetched_jobs_and_another_worker_runs_them(
    queue: Queue, probe: Probe, start_worker: Callable[..., Worker]
) -> None:
    running = threading.Event()

    @queue.job("block", priority=10, context=True)
    def block(ctx: JobContext) -> str:
        running.set()
        ctx.stopping.wait(WAIT)
        return "stopped politely"

    @queue.job("quick")
    def quick(n: int) -> int:
        return n

    blocker = block.enqueue()
    quick_ids = [quick.enqueue(n=n) for n in range(3)]
    first = start_worker(concurrency=1, prefetch=3)
    assert running.wait(WAIT)
    wait_until(
        lambda: probe.count("jobs", "status = 'claimed'") == 4,
        timeout=WAIT,
        what="the three quick jobs to be prefetched behind the blocker",
    )
    first.stop(timeout=WAIT)
    assert status(queue, blocker) == "completed", "the running job was let finish"
    for job_id in quick_ids:
        job = queue.get(job_id)
        assert job is not None
        assert (job.status, job.claimed_by, job.failure_count) == ("pending", None, 0)
        assert [e.outcome for e in queue.journal(job_id)] == ["released"]
    start_worker(concurrency=2)
    for job_id in quick_ids:
        wait_until(has_status(queue, job_id, "completed"), timeout=WAIT)
        assert [(e.outcome, e.run_no) for e in queue.journal(job_id)] == [
            ("released", 1),
            ("completed", 2),
        ]


def test_stop_times_out_and_releases_a_run_that_will_not_end(
    queue: Queue, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    running, let_go = threading.Event(), threading.Event()

    @queue.job("deaf")
    def deaf() -> None:
        running.set()
        let_go.wait(WAIT)

    caplog.set_level(logging.WARNING, logger="venturi")
    job_id = deaf.enqueue()
    worker = start_worker(concurrency=1)
    assert running.wait(WAIT)
    began = time.monotonic()
    worker.stop(timeout=GRACE)
    took = time.monotonic() - began
    # Seconds with generous slack for a shared machine, never a speed claim: stop waited
    # out its grace for the run that would not end, and returned soon after.
    assert GRACE <= took < GRACE + STOP_SLACK, f"stop(timeout={GRACE}) took {took:.2f}s"
    job = queue.get(job_id)
    assert job is not None and (job.status, job.failure_count) == ("pending", 0)
    assert [e.outcome for e in queue.journal(job_id)] == ["released"]
    let_go.set()
    wait_until(
        lambda: any(r.getMessage().startswith("fenced") for r in caplog.records),
        timeout=WAIT,
        what="the released run's late completion to be fenced and logged",
    )
    assert [e.outcome for e in queue.journal(job_id)] == ["released"]


def test_stop_is_idempotent_safe_before_start_and_final(queue: Queue) -> None:
    @queue.job("noop")
    def noop() -> None: ...

    never_started = queue.worker()
    never_started.stop()
    never_started.stop()
    with pytest.raises(ConfigurationError, match="already stopped"):
        never_started.start()

    before = set(threading.enumerate())
    worker = queue.worker(poll_interval=1.0).start()
    with pytest.raises(ConfigurationError, match="already running"):
        worker.start()
    stoppers = [threading.Thread(target=worker.stop, args=(5,)) for _ in range(3)]
    for thread in stoppers:
        thread.start()
    for thread in stoppers:
        thread.join(WAIT)
    worker.stop()
    # Every thread the worker started (its own and its heartbeat pool's) has ended.
    alive = [t.name for t in set(threading.enumerate()) - before]
    assert not alive, alive


def test_the_context_manager_starts_and_stops(queue: Queue) -> None:
    @queue.job("ctxmgr")
    def ctxmgr() -> str:
        return "ok"

    job_id = ctxmgr.enqueue()
    with queue.worker(poll_interval=1.0) as worker:
        wait_until(lambda: status(queue, job_id) == "completed", timeout=WAIT)
        assert worker.held is not None
    assert not any(t.name == "venturi-dispatcher" and t.is_alive() for t in threading.enumerate())


def test_kinds_without_a_handler_here_are_never_claimed(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("mine")
    def mine() -> None: ...

    @queue.job("not_in_this_worker")
    def other() -> None: ...

    orphan = queue.enqueue("no_handler_anywhere", {})
    excluded = other.enqueue()
    start_worker(kinds=["mine"])
    # Enqueued last and run: everything older that this worker could take, it took.
    last = mine.enqueue()
    wait_until(lambda: status(queue, last) == "completed", timeout=WAIT)
    for job_id in (orphan, excluded):
        job = queue.get(job_id)
        assert job is not None and (job.status, job.run_count) == ("pending", 0)


def test_a_handler_calling_sys_exit_fails_its_run_and_the_thread_lives_on(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("quitter", max_attempts=1)
    def quitter() -> None:
        sys.exit(3)

    @queue.job("after")
    def after() -> None: ...

    quit_id = quitter.enqueue()
    start_worker(concurrency=1, prefetch=0)
    wait_until(lambda: status(queue, quit_id) == "dead", timeout=WAIT)
    (entry,) = queue.journal(quit_id)
    assert entry.note is not None and "SystemExit: 3" in entry.note
    after_id = after.enqueue()
    wait_until(lambda: status(queue, after_id) == "completed", timeout=WAIT)


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_after_fork_the_parents_queue_and_worker_refuse(queue: Queue) -> None:
    @queue.job("forked")
    def forked() -> None: ...

    worker = queue.worker()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what happened through the pipe, never return
        verdicts = []
        for attempt in (lambda: queue.enqueue("forked", {}), worker.start, queue.stats):
            try:
                attempt()
                verdicts.append("ran")
            except ForkedError as exc:
                verdicts.append("refused" if "fork" in str(exc) else f"unclear: {exc}")
            except BaseException as exc:
                verdicts.append(f"other: {exc!r}")
        os.write(write, ",".join(verdicts).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, code = os.waitpid(pid, 0)
    assert code == 0
    assert report == "refused,refused,refused"
    # The parent's queue is untouched by the child's attempts.
    job_id = queue.enqueue("forked", {})
    assert queue.drain() == 1 and status(queue, job_id) == "completed"


def test_loggers_and_job_fields_in_extra(
    queue: Queue, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    root = logging.getLogger("venturi")
    assert any(isinstance(h, logging.NullHandler) for h in root.handlers)

    @queue.job("noisy", max_attempts=1)
    def noisy() -> None:
        raise ValueError("bad value")

    caplog.set_level(logging.INFO, logger="venturi")
    job_id = noisy.enqueue()
    start_worker(concurrency=1)
    wait_until(lambda: status(queue, job_id) == "dead", timeout=WAIT)
    assert {r.name for r in caplog.records} == {"venturi.worker"}
    (raised,) = [r for r in caplog.records if "raised ValueError" in r.getMessage()]
    assert raised.levelno == logging.WARNING
    fields = raised.__dict__
    assert (fields["job_id"], fields["kind"], fields["run"]) == (str(job_id), "noisy", 1)
    assert fields["attempt"] == 1  # the name earlier releases used
    for name in ("venturi.worker", "venturi.notifier", "venturi.reaper", "venturi.store"):
        assert logging.getLogger(name).parent is root


def test_reaper_logs_to_its_logger_with_job_fields(
    queue: Queue,
    probe: Probe,
    start_worker: Callable[..., Worker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    @queue.job("abandoned", backoff=venturi.constant(0))
    def abandoned() -> None: ...

    job_id = abandoned.enqueue()
    # A claim by a worker that vanished: expired lease, nobody renewing it.
    probe.rows(
        "UPDATE {jobs} SET status = 'claimed', claimed_by = 'gone', run_count = 1, "
        "claim_expires_at = now() - interval '1 second'"
    )
    caplog.set_level(logging.WARNING, logger="venturi")
    start_worker(reaper_interval=0.1)
    wait_until(lambda: status(queue, job_id) == "completed", timeout=WAIT)
    (record,) = [r for r in caplog.records if r.name == "venturi.reaper"]
    assert "recovered job" in record.getMessage() and "gone" in record.getMessage()
    assert record.__dict__["job_id"] == str(job_id)
    assert [e.outcome for e in queue.journal(job_id)] == ["recovered", "completed"]
