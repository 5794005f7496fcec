"""``async def`` handlers: a handler thread runs each coroutine to completion on an event
loop of its own, with the outcomes, context, leases and timeouts of a sync handler."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import venturi
from tests.support import wait_until
from venturi import Fail, JobContext, Pause, Queue, Retry, Worker
from venturi.coroutines import run_coroutine

WAIT = 30.0


def outcomes(queue: Queue, job_id: Any) -> list[tuple[str, int]]:
    return [(row.outcome.value, row.run_no) for row in queue.journal(job_id)]


def test_an_async_handler_completes_with_its_value_in_a_handler_thread(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    ran: list[tuple[str, int]] = []

    @queue.job("fetch")
    async def fetch(url: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        ran.append((threading.current_thread().name, id(loop)))
        return {"url": url, "status": 200}

    first, second = fetch.enqueue(url="a"), fetch.enqueue(url="b")
    start_worker(concurrency=2)
    wait_until(
        lambda: queue.journal(first) and queue.journal(second), timeout=WAIT, what="both runs"
    )
    (entry,) = queue.journal(first)
    assert (entry.outcome, entry.attachment) == ("completed", {"url": "a", "status": 200})
    assert all(name != threading.main_thread().name for name, _ in ran)
    assert len(ran) == 2


def test_handler_threads_run_their_coroutines_on_loops_of_their_own_at_once(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    # Each handler blocks its own loop until both runs are inside: with one shared loop
    # (or one thread) the barrier would never fill.
    both_in = threading.Barrier(2, timeout=WAIT)
    loops: list[int] = []

    @queue.job("meet")
    async def meet() -> None:
        loops.append(id(asyncio.get_running_loop()))
        both_in.wait()

    ids = [meet.enqueue(), meet.enqueue()]
    start_worker(concurrency=2)
    wait_until(lambda: all(queue.journal(j) for j in ids), timeout=WAIT, what="both runs")
    assert [outcomes(queue, j) for j in ids] == [[("completed", 1)], [("completed", 1)]]
    assert len(set(loops)) == 2


def test_retry_pause_and_fail_raised_in_a_coroutine_steer_the_job(queue: Queue) -> None:
    @queue.job("steer", context=True, max_attempts=3)
    async def steer(ctx: JobContext, how: str) -> str:
        await asyncio.sleep(0)
        if ctx.attempt == 1:
            if how == "retry":
                raise Retry(after=0, carry={"step": 1}, note="again")
            if how == "pause":
                raise Pause(after=0, carry={"step": 1})
            raise Fail("poison")
        return f"{how} resumed from {ctx.carry}"

    retried = steer.enqueue(how="retry")
    paused = steer.enqueue(how="pause")
    failed = steer.enqueue(how="fail")
    queue.drain()
    assert outcomes(queue, retried) == [("retried", 1), ("completed", 2)]
    assert queue.journal(retried)[0].note == "again"
    assert queue.journal(retried)[1].attachment == "retry resumed from {'step': 1}"
    assert outcomes(queue, paused) == [("paused", 1), ("completed", 2)]
    job = queue.get(paused)
    assert job is not None and job.failure_count == 0
    assert outcomes(queue, failed) == [("dead", 1)]
    assert queue.journal(failed)[0].note == "poison"


def test_an_exception_in_a_coroutine_is_retried_with_its_traceback(queue: Queue) -> None:
    @queue.job("boom", max_attempts=1)
    async def boom() -> None:
        await asyncio.sleep(0)
        raise LookupError("no such row")

    job_id = boom.enqueue()
    queue.drain()
    (entry,) = queue.journal(job_id)
    assert entry.outcome == "dead"
    assert entry.note is not None
    assert "LookupError: no such row" in entry.note and "in boom" in entry.note


def test_a_coroutine_sees_its_context_and_current_job(queue: Queue) -> None:
    @queue.job("whoami", context=True)
    async def whoami(ctx: JobContext) -> bool:
        ctx.note("inside")
        ctx.attach({"attempt": ctx.attempt})
        current = venturi.current_job()
        return current is ctx

    job_id = whoami.enqueue()
    queue.drain()
    (entry,) = queue.journal(job_id)
    assert (entry.note, entry.attachment) == ("inside", True)


def test_a_timed_out_coroutine_is_told_to_stop_and_its_lease_lapses(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    told: list[bool] = []
    let_go = threading.Event()

    @queue.job("slowpoke", lease=1.0, timeout=0.3, backoff=venturi.constant(0), context=True)
    async def slowpoke(ctx: JobContext) -> str:
        if ctx.attempt == 1:
            while not ctx.stopping.is_set():
                await asyncio.sleep(0.01)
            told.append(True)
            let_go.wait(WAIT)  # ignore the request: the lease must lapse anyway
            return "first run, too late"
        return "second run"

    job_id = slowpoke.enqueue()
    start_worker(concurrency=2, reaper_interval=0.1)
    wait_until(
        lambda: outcomes(queue, job_id) == [("recovered", 1), ("completed", 2)],
        timeout=WAIT,
        what="the lapsed run to be recovered and run again, as for a sync handler",
    )
    assert told == [True]
    let_go.set()
    job = queue.get(job_id)
    assert job is not None
    assert (job.status, job.run_count, job.failure_count) == ("completed", 2, 1)


def test_an_async_handler_payload_is_checked_against_its_signature(queue: Queue) -> None:
    @queue.job("typed")
    async def typed(order_id: int) -> None:
        await asyncio.sleep(0)

    with pytest.raises(venturi.InvalidJob, match="missing required keys 'order_id'"):
        typed.enqueue()
    assert queue.history() == []


def test_a_coroutine_cannot_be_run_inside_a_running_loop() -> None:
    async def work() -> int:
        return 1

    async def inside_a_loop() -> None:
        coroutine = work()
        with pytest.raises(RuntimeError, match="event loop is running"):
            run_coroutine(coroutine)
        # Closed, not left "never awaited": a closed coroutine refuses to start.
        with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
            coroutine.send(None)

    asyncio.run(inside_a_loop())
    assert run_coroutine(work()) == 1
