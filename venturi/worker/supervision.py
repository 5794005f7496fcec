"""Supervised threads: a worker thread that raises is logged and restarted, never lost."""

from __future__ import annotations

import collections
import logging
import signal
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import attrs

from venturi.errors import WorkerFailed
from venturi.store import retrying

logger = logging.getLogger("venturi.worker")

# More restarts than this within RESTART_WINDOW seconds and the worker gives up.
RESTART_LIMIT: Final = 5
RESTART_WINDOW: Final = 60.0
_RESTART_BACKOFF: Final = retrying.RetryDelays(base=0.1, cap=5.0)


@attrs.define(eq=False)
class Supervisor:
    """Makes the worker's threads. Each runs its body; if the body raises, the error is
    logged with its traceback, reported to ``on_restart`` and the body runs again after
    a short backoff. A fatal database error, or more than `RESTART_LIMIT` restarts of
    one thread within `RESTART_WINDOW` seconds, goes to ``on_failure`` instead and the
    thread ends: the worker then stops itself.
    """

    on_failure: Callable[[BaseException], None]
    on_restart: Callable[[str], None]
    stopping: threading.Event
    threads: list[threading.Thread] = attrs.field(init=False, factory=list)

    def thread(self, name: str, body: Callable[[], object]) -> threading.Thread:
        """A new (unstarted) daemon thread running ``body`` under supervision."""
        thread = threading.Thread(target=self._supervise, args=(name, body), name=name)
        thread.daemon = True
        self.threads.append(thread)
        return thread

    def dead(self) -> list[str]:
        """Names of started threads that are no longer running."""
        return [t.name for t in self.threads if t.ident is not None and not t.is_alive()]

    def all_running(self) -> bool:
        """Every thread started (none is still waiting for its start) and none ended."""
        return bool(self.threads) and all(t.is_alive() for t in self.threads)

    def _supervise(self, name: str, body: Callable[[], object]) -> None:
        restarts: collections.deque[float] = collections.deque()
        while True:
            try:
                body()
                return
            except BaseException as exc:  # a thread must not end silently, whatever ended it
                now = time.monotonic()
                restarts.append(now)
                while restarts and restarts[0] < now - RESTART_WINDOW:
                    restarts.popleft()
                if retrying.classify(exc) is retrying.ErrorClass.FATAL:
                    logger.critical("thread %s hit a fatal database error", name, exc_info=exc)
                    self.on_failure(exc)
                    return
                if len(restarts) > RESTART_LIMIT:
                    logger.critical("thread %s keeps failing; giving up", name, exc_info=exc)
                    failure = WorkerFailed(
                        f"thread {name} failed {len(restarts)} times within {RESTART_WINDOW:g}s"
                    )
                    failure.__cause__ = exc
                    self.on_failure(failure)
                    return
                logger.exception("thread %s failed; restarting it", name)
                self.on_restart(name)
                # A stopping worker restarts at once: the body may still have work to finish.
                if not self.stopping.is_set():
                    self.stopping.wait(_RESTART_BACKOFF.delay(len(restarts)))


def join_by(threads: Sequence[threading.Thread], deadline: float, force: threading.Event) -> None:
    """Join ``threads`` until the monotonic ``deadline``, or until ``force`` is set."""
    for thread in threads:
        while thread.is_alive() and not force.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            thread.join(min(remaining, 0.1))


def run_hooks(hooks: Sequence[Callable[[], None]], owner: str) -> None:
    """Call each hook once; a hook that raises is logged and the rest still run."""
    for hook in hooks:
        try:
            hook()
        except Exception:
            logger.exception("stop hook %r of %s failed", hook, owner)


@contextmanager
def stop_signals(requested: threading.Event, force: threading.Event) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM set ``requested``, and a second one ``force``.

    Installed only in the main thread (elsewhere a caller stops the worker itself), and
    the previous handlers are restored on the way out.
    """

    def on_signal(signum: int, frame: types.FrameType | None) -> None:
        if requested.is_set():
            logger.warning("second signal: releasing running jobs now")
            force.set()
        else:
            logger.info("signal %d: stopping gracefully", signum)
            requested.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
