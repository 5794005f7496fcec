"""The jobs of the tracing tests, registered the same way in the test process and in the
worker process (`tests.contrib.otel.worker_main`)."""

from __future__ import annotations

import venturi
from venturi import JobContext, Queue


def register(queue: Queue) -> None:
    @queue.job("shop.flaky", context=True, backoff=venturi.constant(0), max_attempts=3)
    def flaky(ctx: JobContext, order: int) -> str:
        """Fails its first run, then completes: two runs of one job."""
        if ctx.attempt == 1:
            raise RuntimeError(f"order {order}: payment service timed out")
        return f"order {order} shipped"

    @queue.job("shop.pausing", context=True)
    def pausing(ctx: JobContext) -> None:
        if ctx.carry is None:
            raise venturi.Pause(after=0, carry="checkpoint")

    @queue.job("shop.poison")
    def poison() -> None:
        raise venturi.Fail("cannot be helped")

    @queue.job("shop.cancelling", context=True)
    def cancelling(ctx: JobContext) -> None:
        """Cancels its own job while running, so its settlement is fenced out."""
        assert queue.cancel(ctx.job.id)

    @queue.job("shop.noop")
    def noop() -> None:
        pass

    @queue.job("shop.transactional", context=True, transactional=True)
    def transactional(ctx: JobContext, cancel: bool = False) -> None:
        """Completes in its own transaction; cancelled meanwhile, that is fenced."""
        ctx.conn.execute("SELECT 1")
        if cancel:
            assert queue.cancel(ctx.job.id)

    @queue.job("shop.limited", concurrency=1)
    def limited(n: int) -> None:
        """One at a time: each completed run passes its place to the next."""
