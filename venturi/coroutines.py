"""Running an ``async def`` handler: a sync worker that can run coroutines.

A handler thread that calls an ``async def`` handler gets a coroutine back; it runs that
coroutine to completion on an event loop of its own, created for the run and closed
after it, in the same thread. So an async handler runs exactly where a sync one would:
one run per handler thread at a time, under the same lease, timeout, ``ctx.stopping``
and outcomes (`Retry`, `Pause` and `Fail` raised in the coroutine steer the job as
from a function). This is not an asyncio worker: coroutines of different runs never
share a loop, and a handler thread waits for its coroutine as for a blocking call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on a new event loop in this thread.

    The coroutine sees this thread's context variables (`venturi.current_job`, a
    framework's app context). Raises `RuntimeError` if an event loop is already running
    in this thread: a coroutine cannot be waited for there without blocking that loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner() as runner:
            return runner.run(coroutine)
    coroutine.close()
    name = getattr(coroutine, "__qualname__", repr(coroutine))
    raise RuntimeError(
        f"cannot run the coroutine {name} in a thread whose event loop is running "
        "(call drain() from sync code, or run a worker)"
    )


def finish(result: Any) -> Any:
    """A handler's return value, with a coroutine (from an ``async def``) run first."""
    if inspect.iscoroutine(result):
        return run_coroutine(result)
    return result
