"""`WorkerGroup`: a supervisor that keeps N worker processes running, recycles them
with a hand-over, and stops them together."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from venturi.errors import ConfigurationError, WorkerFailed
from venturi.processes.children import ChildProcess, describe_exit
from venturi.processes.recycling import RecyclePolicy
from venturi.store.retrying import RetryDelays

logger = logging.getLogger("venturi.processes")

# This many processes in a row ending before they were ready stop the group.
START_FAILURE_LIMIT: Final = 3
# A slot whose processes keep ending waits longer before each new start.
RESTART_BACKOFF: Final = RetryDelays(base=0.5, cap=30.0)
RESTART_WINDOW: Final = 60.0
# Past a stop's timeout, children get this long to release their jobs before SIGKILL.
KILL_GRACE: Final = 15.0
_TICK: Final = 0.1


class WorkerGroupFailed(WorkerFailed):
    """The group stopped itself: its worker processes kept ending before they were ready."""


@attrs.define(eq=False)
class _Slot:
    """One of the N places: the process serving it, its replacement while that starts,
    the processes handing over, and when a new one may start."""

    current: ChildProcess | None = None
    incoming: ChildProcess | None = None
    retiring: list[ChildProcess] = attrs.Factory(list)
    next_start: float = 0.0
    endings: collections.deque[float] = attrs.Factory(collections.deque)

    def children(self) -> list[ChildProcess]:
        return [c for c in (self.current, self.incoming, *self.retiring) if c is not None]

    def back_off(self, now: float) -> float:
        """Record an unplanned end; the delay before this slot's next start."""
        self.endings.append(now)
        while self.endings and self.endings[0] < now - RESTART_WINDOW:
            self.endings.popleft()
        delay = RESTART_BACKOFF.delay(len(self.endings))
        self.next_start = now + delay
        return delay


class WorkerGroup:
    """Runs ``processes`` copies of ``command`` (a `venturi worker` command line) as
    supervised worker processes until stopped.

    Each child is a fresh interpreter that builds its own `Queue` (no pool crosses a
    fork). A child that ends is restarted after a backoff; `START_FAILURE_LIMIT`
    children in a row that end before their worker runs stop the group with
    `WorkerGroupFailed`. A child past ``max_jobs_per_child`` runs or
    ``max_memory_per_child`` bytes is recycled: its replacement starts first, and only
    once it runs is the old one stopped gracefully. `run` forwards SIGINT/SIGTERM to
    every child as a graceful stop (a second signal releases their running jobs at
    once) and returns when all ended. With ``metrics_port``, one Prometheus endpoint
    serves the children's counters summed (and ``stats_source``'s queue gauges).
    """

    def __init__(
        self,
        command: Sequence[str],
        processes: int,
        *,
        max_jobs_per_child: int | None = None,
        max_memory_per_child: int | None = None,
        stop_timeout: float = 30.0,
        metrics_port: int | None = None,
        metrics_addr: str = "127.0.0.1",
        stats_source: Any = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise ConfigurationError(f"processes must be an int >= 1, got {processes!r}")
        if not command:
            raise ConfigurationError("command must name the worker command to run")
        if not stop_timeout >= 0:
            raise ConfigurationError(f"stop_timeout must be >= 0, got {stop_timeout!r}")
        self.command = list(command)
        self.policy = RecyclePolicy(max_jobs_per_child, max_memory_per_child)
        self.stop_timeout = float(stop_timeout)
        self.metrics_port, self.metrics_addr = metrics_port, metrics_addr
        self.stats_source = stats_source
        self.env = dict(os.environ if env is None else env)
        self.failure: str | None = None
        self._slots = [_Slot() for _ in range(processes)]
        self._stop_requests = 0
        self._stops_handled = 0
        self._kill_at: float | None = None
        self._start_failures = 0
        self._selector = selectors.DefaultSelector()
        self._metrics_dir: str | None = None
        self._metrics_server: Any = None

    @classmethod
    def for_app(
        cls, app: str, processes: int, *, worker_args: Sequence[str] = (), **options: Any
    ) -> WorkerGroup:
        """A group whose children run ``venturi worker --app APP [worker_args]``, e.g.
        ``WorkerGroup.for_app("myapp.jobs:queue", 4, worker_args=["--concurrency", "8"])``."""
        command = [sys.executable, "-m", "venturi", "worker", "--app", app, *worker_args]
        return cls(command, processes, **options)

    @property
    def pids(self) -> list[int]:
        """The process ids of the children now running (for diagnostics and tests)."""
        return [c.pid for slot in self._slots for c in slot.children() if c.alive]

    def stop(self) -> None:
        """Ask the group to stop (from any thread); a second call releases running jobs."""
        self._stop_requests += 1

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> None:
        """Supervise until stopped; raises `WorkerGroupFailed` when it stopped itself."""
        with self._signals():
            try:
                self._open_metrics()
                logger.info("worker group of %d processes starting", len(self._slots))
                while not self._finished():
                    self._tick()
            finally:
                self._shut_down()
        if self.failure is not None:
            raise WorkerGroupFailed(self.failure)
        logger.info("worker group stopped")

    def _finished(self) -> bool:
        return self._stopping and not any(s.children() for s in self._slots)

    @property
    def _stopping(self) -> bool:
        return self._stops_handled > 0

    def _tick(self) -> None:
        for key, _ in self._selector.select(_TICK):
            child: ChildProcess = key.data
            if child.read():
                self._start_failures = 0
                logger.info("worker process %d is running", child.pid)
                if self.policy.over_memory(child.rss_at_start):
                    logger.warning(
                        "worker process %d uses %d MiB from the start, above "
                        "--max-memory-per-child: it is not recycled for its memory",
                        child.pid,
                        child.rss_at_start // 1024**2,
                    )
            if child.eof:
                self._selector.unregister(key.fileobj)
        self._handle_stop_requests()
        now = time.monotonic()
        for slot in self._slots:
            self._reap(slot, now)
            if not self._stopping:
                self._start_due(slot, now)
        if self._kill_at is not None and now >= self._kill_at:
            for slot in self._slots:
                for child in slot.children():
                    logger.error("worker process %d did not stop in time: killing it", child.pid)
                    child.kill()
            self._kill_at = None

    def _handle_stop_requests(self) -> None:
        requests = self._stop_requests
        if requests == self._stops_handled:
            return
        if self._stops_handled == 0:
            logger.info("stopping the worker group gracefully")
            self._kill_at = time.monotonic() + self.stop_timeout + KILL_GRACE
        else:
            logger.warning("second stop: worker processes release their running jobs now")
        self._stops_handled = requests
        wanted = min(requests, 2)
        for slot in self._slots:
            for child in slot.children():
                while child.signals_sent < wanted:
                    child.signal_stop()

    def _reap(self, slot: _Slot, now: float) -> None:
        for child in list(slot.retiring):
            code = child.exit_code()
            if code is not None:
                slot.retiring.remove(child)
                self._ended(child)
                logger.info("recycled worker process %d ended (%s)", child.pid, describe_exit(code))
        incoming = slot.incoming
        if incoming is not None:
            code = incoming.exit_code()
            if code is not None:
                slot.incoming = None
                self._ended(incoming)
                if not self._stopping:
                    self._start_failed(slot, incoming, code, now)
            elif incoming.ready or slot.current is None:
                self._hand_over(slot, incoming)
        current = slot.current
        if current is None:
            return
        code = current.exit_code()
        if code is None:
            return
        slot.current = None
        self._ended(current)
        if self._stopping:
            logger.info("worker process %d ended (%s)", current.pid, describe_exit(code))
        elif not current.ready:
            self._start_failed(slot, current, code, now)
        else:
            delay = slot.back_off(now)
            logger.warning(
                "worker process %d ended (%s); starting another in %.1fs",
                current.pid,
                describe_exit(code),
                delay,
            )

    def _hand_over(self, slot: _Slot, incoming: ChildProcess) -> None:
        """The replacement runs (or the slot is empty): it serves, the old one stops."""
        old, slot.current, slot.incoming = slot.current, incoming, None
        if old is not None:
            logger.info("worker process %d takes over from %d", incoming.pid, old.pid)
            old.signal_stop()
            slot.retiring.append(old)

    def _start_failed(self, slot: _Slot, child: ChildProcess, code: int, now: float) -> None:
        self._start_failures += 1
        what = f"worker process {child.pid} ended ({describe_exit(code)}) before its worker ran"
        if self._start_failures >= START_FAILURE_LIMIT:
            self.failure = (
                f"{what}; {self._start_failures} in a row did so: not restarting them "
                "(see their output above)"
            )
            logger.critical("%s", self.failure)
            self.stop()
            self._handle_stop_requests()
            return
        logger.warning("%s; starting another in %.1fs", what, slot.back_off(now))

    def _start_due(self, slot: _Slot, now: float) -> None:
        if slot.incoming is not None or now < slot.next_start:
            return
        if slot.current is None:
            slot.current = self._spawn()
            return
        if not slot.current.ready or slot.current.signals_sent:
            return
        reason = self.policy.reason(slot.current.report, slot.current.rss_at_start)
        if reason is not None:
            logger.info("recycling worker process %d: it %s", slot.current.pid, reason)
            slot.incoming = self._spawn()

    def _spawn(self) -> ChildProcess:
        env = self.env
        if self._metrics_dir is not None:
            env = {**env, "PROMETHEUS_MULTIPROC_DIR": self._metrics_dir}
        child = ChildProcess(
            self.command,
            env,
            max_jobs=self.policy.max_jobs,
            metrics=self._metrics_dir is not None,
        )
        assert child.fd is not None
        self._selector.register(child.fd, selectors.EVENT_READ, child)
        logger.info("worker process %d started", child.pid)
        return child

    def _ended(self, child: ChildProcess) -> None:
        if child.fd is not None and child.fd in self._selector.get_map():
            self._selector.unregister(child.fd)
        child.close()
        if self._metrics_dir is not None:
            from venturi.metrics import forget_process

            forget_process(self._metrics_dir, child.pid)

    # -- setup and teardown -----------------------------------------------------------

    def _open_metrics(self) -> None:
        if self.metrics_port is None:
            return
        try:
            from venturi.metrics import serve_group_metrics
        except ImportError as exc:
            raise ConfigurationError(f"metrics_port: {exc}") from exc
        self._metrics_dir = tempfile.mkdtemp(prefix="venturi-metrics-")
        self._metrics_server = serve_group_metrics(
            self._metrics_dir, self.metrics_port, self.metrics_addr, self.stats_source
        )

    def _shut_down(self) -> None:
        """Kill what still runs (only after an error in the loop), free everything."""
        for slot in self._slots:
            for child in slot.children():
                if child.alive:
                    logger.error("killing worker process %d", child.pid)
                    child.kill()
                    child.proc.wait(10)
                self._ended(child)
            slot.current, slot.incoming, slot.retiring = None, None, []
        self._selector.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self._metrics_dir is not None:
            shutil.rmtree(self._metrics_dir, ignore_errors=True)

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM call `stop` while `run` runs (in the main thread only)."""

        def on_signal(signum: int, frame: types.FrameType | None) -> None:
            self.stop()

        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                previous[number] = signal.signal(number, on_signal)
        try:
            yield
        finally:
            for restored, handler in previous.items():
                signal.signal(restored, handler)
