"""The threaded worker: a dispatcher, handler threads, heartbeat, reaper and completer."""

from __future__ import annotations

import enum
import logging
import os
import queue
import signal
import socket
import threading
import time
import types
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from venturi.completer import Completer
from venturi.context import JobContext
from venturi.errors import ConfigurationError, ForkedError, StoreUnavailable
from venturi.events import WorkerEvents
from venturi.execution import execute, job_extra
from venturi.heartbeat import Heartbeat
from venturi.looping import Periodic
from venturi.models import SMALLINT_MAX, SMALLINT_MIN, JobRecord, SettleAction, Settlement
from venturi.reaper import Reaper
from venturi.registry import JobDefinition
from venturi.running import HeldJob, HeldJobs
from venturi.store import Notifier, Store

logger = logging.getLogger("venturi.worker")

PROBE_TIMEOUT: Final = 2.0
MIN_IDLE_WAIT: Final = 0.05
_SENTINEL: Final = None


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs jobs of the given kinds in ``concurrency`` threads until stopped.

    `start` returns at once; `stop` stops claiming, releases prefetched jobs, sets
    ``stopping`` on running ones and waits up to ``timeout`` for them, then releases the
    rest. `run` does both around a blocking wait and stops on SIGINT/SIGTERM (a second
    signal releases running jobs at once). Usable as a context manager.
    """

    def __init__(
        self,
        store: Store,
        definitions: Mapping[str, JobDefinition],
        *,
        kinds: Sequence[str] | None = None,
        concurrency: int = 4,
        priority_floor: int | None = None,
        name: str | None = None,
        poll_interval: float = 5.0,
        prefetch: int | None = None,
        heartbeat_interval: float | None = None,
        reaper_interval: float = 5.0,
        completion_batch: int = 256,
        events: WorkerEvents | None = None,
        owner_pid: int | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if priority_floor is not None and not SMALLINT_MIN <= priority_floor <= SMALLINT_MAX:
            raise ConfigurationError(f"priority_floor {priority_floor} is outside smallint range")
        if poll_interval <= 0 or reaper_interval <= 0:
            raise ConfigurationError("poll_interval and reaper_interval must be positive")
        self.store = store
        self.definitions = definitions
        self.requested_kinds = None if kinds is None else list(kinds)
        self.concurrency = concurrency
        self.prefetch = min(concurrency, 8) if prefetch is None else prefetch
        if self.prefetch < 0:
            raise ConfigurationError(f"prefetch must be >= 0, got {prefetch}")
        self.priority_floor = priority_floor
        self.name = name or default_name()
        self.poll_interval = float(poll_interval)
        self.heartbeat_interval = heartbeat_interval
        self.reaper_interval = float(reaper_interval)
        self.events = events or WorkerEvents()
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid
        self.held = HeldJobs()
        self.listening = False
        self._completion_batch = completion_batch
        self._state = _State.NEW
        self._lock = threading.Lock()
        self._busy = 0  # claimed and not yet finished running (queued or running)
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._slot_freed = threading.Event()
        self._ready: queue.SimpleQueue[HeldJob | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._leases: dict[str, float] = {}
        self._side_store: Store | None = None
        self._notifier: Notifier | None = None
        self._heartbeat: Periodic | None = None
        self._reaper: Periodic | None = None
        self._completer: Completer | None = None
        # Called once when the worker has stopped (e.g. to close its metrics server).
        self.stop_hooks: list[Callable[[], None]] = []

    # -- lifecycle --------------------------------------------------------------------

    def _resolve_kinds(self) -> dict[str, float]:
        kinds = self.requested_kinds or list(self.definitions)
        unknown = [k for k in kinds if k not in self.definitions]
        if unknown:
            raise ConfigurationError(f"no handler registered for kinds: {', '.join(unknown)}")
        if not kinds:
            raise ConfigurationError("the worker has no kinds to run: register a job first")
        return {k: self.definitions[k].lease for k in kinds}

    def _heartbeat_every(self) -> float:
        shortest = min(self._leases.values())
        if self.heartbeat_interval is None:
            return max(0.05, shortest / 3)
        if self.heartbeat_interval > shortest / 3:
            raise ConfigurationError(
                f"heartbeat_interval {self.heartbeat_interval}s must be at most a third of "
                f"the shortest lease ({shortest}s)"
            )
        return self.heartbeat_interval

    def start(self) -> Worker:
        """Start the worker's threads and return at once."""
        if os.getpid() != self.owner_pid:
            raise ForkedError(
                "this worker's queue was created before os.fork(); create the Queue and "
                "worker in the child process (e.g. gunicorn's post_fork hook)"
            )
        with self._lock:
            if self._state is not _State.NEW:
                raise ConfigurationError(f"worker already {self._state.value}; make a new one")
            self._leases = self._resolve_kinds()
            heartbeat_every = self._heartbeat_every()
            self._state = _State.RUNNING
        try:
            self.store.check_schema()
        except StoreUnavailable as exc:
            logger.warning("database unavailable at start (%s); will keep retrying", exc)
        self._side_store = self.store.sibling(pool_size=1)
        heartbeat = Heartbeat(self._side_store, self.held, self.events)
        self._heartbeat_step = heartbeat
        self._heartbeat = Periodic("venturi-heartbeat", heartbeat.run_once, heartbeat_every, logger)
        reaper = Reaper(self._side_store, self.definitions, self.events)
        self._reaper = Periodic(
            "venturi-reaper",
            reaper.run_once,
            self.reaper_interval,
            logging.getLogger("venturi.reaper"),
        )
        self._completer = Completer(self.store, self._after_settle, self._completion_batch)
        self._notifier = self.store.notifier()
        self._threads = [
            threading.Thread(target=self._handle_loop, name=f"venturi-handler-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        dispatcher = threading.Thread(
            target=self._dispatch_loop, name="venturi-dispatcher", daemon=True
        )
        self._dispatcher = dispatcher
        self._completer.start()
        self._heartbeat.start()
        self._reaper.start()
        for thread in self._threads:
            thread.start()
        dispatcher.start()
        logger.info(
            "worker %s started: kinds %s, concurrency %d",
            self.name,
            ", ".join(self._leases),
            self.concurrency,
        )
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully; idempotent and safe before `start`."""
        with self._lock:
            if self._state is _State.NEW:
                self._state = _State.STOPPED
                self._run_stop_hooks()
                return
            if self._state is not _State.RUNNING:
                return
            self._state = _State.STOPPING
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._slot_freed.set()
        if self._notifier is not None:
            self._notifier.wake()
        self._dispatcher.join(max(0.0, deadline - time.monotonic()))
        released = self._release_queued()
        for held in self.held.snapshot():
            held.ctx.stopping.set()
        for _ in self._threads:
            self._ready.put(_SENTINEL)
        self._join_handlers(deadline)
        late = [h for h in self.held.snapshot() if h.started_at is not None and not h.lost]
        still_running = [h for h in late if self._running(h)]
        for held in still_running:
            self._settle_now(held, Settlement.release("worker stopped before the run ended"))
        assert self._completer is not None
        self._completer.stop(max(1.0, deadline - time.monotonic()))
        for periodic in (self._heartbeat, self._reaper):
            if periodic is not None:
                periodic.stop()
        if self._side_store is not None:
            self._side_store.close()
        with self._lock:
            self._state = _State.STOPPED
        self._run_stop_hooks()
        logger.info(
            "worker %s stopped: released %d prefetched and %d running jobs",
            self.name,
            released,
            len(still_running),
        )

    def _run_stop_hooks(self) -> None:
        hooks, self.stop_hooks = self.stop_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:
                logger.exception("stop hook %r of worker %s failed", hook, self.name)

    def _running(self, held: HeldJob) -> bool:
        return self.held.get(held.job.id) is held

    def _join_handlers(self, deadline: float) -> None:
        for thread in self._threads:
            while thread.is_alive() and not self._force.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                thread.join(min(remaining, 0.1))

    def _release_queued(self) -> int:
        released = 0
        while True:
            try:
                held = self._ready.get_nowait()
            except queue.Empty:
                return released
            if held is None:
                continue
            self._finished_running()
            self._settle_now(held, Settlement.release("worker stopping; never started"))
            released += 1

    def run(self, timeout: float = 30.0) -> None:
        """Run in the foreground until SIGINT or SIGTERM, then stop gracefully."""
        requested = threading.Event()

        def on_signal(signum: int, frame: types.FrameType | None) -> None:
            if requested.is_set():
                logger.warning("second signal: releasing running jobs now")
                self._force.set()
            else:
                logger.info("signal %d: stopping gracefully", signum)
                requested.set()

        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, on_signal)
        try:
            self.start()
            while not requested.wait(1.0):
                if self._stopping.is_set():
                    break
            self.stop(timeout)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- dispatcher -------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        return self.concurrency + self.prefetch

    def _dispatch_loop(self) -> None:
        notifier = self._notifier
        assert notifier is not None
        try:
            self._probe(notifier)
            failures = 0
            while not self._stopping.is_set():
                try:
                    asked, got = self._claim_pass()
                    failures = 0
                except StoreUnavailable as exc:
                    failures += 1
                    logger.warning("claim failed: %s; retrying", exc)
                    self._stopping.wait(min(0.25 * 2**failures, 5.0))
                    continue
                except Exception:
                    failures += 1
                    logger.exception("claim pass failed; retrying")
                    self._stopping.wait(min(0.25 * 2**failures, 5.0))
                    continue
                if asked == 0:
                    self._slot_freed.wait(self.poll_interval)
                    self._slot_freed.clear()
                elif got < asked:
                    notifier.wait(self._idle_timeout())
        finally:
            notifier.close()

    def _probe(self, notifier: Notifier) -> None:
        """Prove LISTEN/NOTIFY round-trips; otherwise say once that we poll."""
        try:
            notifier.connect()
            self.store.notify(f"probe:{self.name}")
        except Exception as exc:
            logger.warning("listener not ready at start (%s); it will reconnect", exc)
            return
        deadline = time.monotonic() + PROBE_TIMEOUT
        while time.monotonic() < deadline and not self._stopping.is_set():
            if notifier.wait(deadline - time.monotonic()):
                self.listening = True
                return
        logger.warning(
            "no NOTIFY arrived within %ss of a self-probe (a transaction-pooling proxy?); "
            "falling back to polling every %ss",
            PROBE_TIMEOUT,
            self.poll_interval,
        )

    def _claim_pass(self) -> tuple[int, int]:
        with self._lock:
            free = self.capacity - self._busy
            if free <= 0 or self._stopping.is_set():
                return 0, 0
            self._busy += free  # reserve; returned below for what the claim did not fill
        try:
            jobs = self.store.claim(self.name, self._leases, free, self.priority_floor)
        except BaseException:
            self._unreserve(free)
            raise
        self._unreserve(free - len(jobs))
        for job in jobs:
            held = self._hold(job)
            self._ready.put(held)
        return free, len(jobs)

    def _unreserve(self, count: int) -> None:
        if count:
            with self._lock:
                self._busy -= count

    def _hold(self, job: JobRecord) -> HeldJob:
        definition = self.definitions[job.kind]
        ctx = JobContext(job)
        held = HeldJob(job, definition, ctx)
        ctx._extend = lambda: self._heartbeat_step.extend_one(held)
        self.held.add(held)
        return held

    def _idle_timeout(self) -> float:
        try:
            seconds = self.store.seconds_until_visible(list(self._leases), self.priority_floor)
        except StoreUnavailable:
            return min(self.poll_interval, 1.0)
        if seconds is None:
            return self.poll_interval
        # A due job we could not claim is locked by another transaction (a peer's claim in
        # flight, or a caller's open transaction); waiting a moment instead of zero keeps
        # the dispatcher from spinning until that lock goes. New work still wakes us by NOTIFY.
        return min(self.poll_interval, max(MIN_IDLE_WAIT, seconds))

    # -- handlers ---------------------------------------------------------------------

    def _finished_running(self) -> None:
        with self._lock:
            self._busy -= 1
        self._slot_freed.set()

    def _handle_loop(self) -> None:
        while True:
            held = self._ready.get()
            if held is None:
                return
            if self._stopping.is_set():
                self._finished_running()
                self._settle_now(held, Settlement.release("worker stopping; never started"))
                continue
            self.held.mark_started(held)
            job = held.job
            waited = max(0.0, time.time() - job.visible_at.timestamp())
            self.events.job_started(job, waited)
            try:
                settlement = execute(held.definition, held.ctx)
            except BaseException:
                self._finished_running()
                self._settle_now(held, Settlement.release("handler thread interrupted"))
                raise
            self._finished_running()
            if settlement.action is SettleAction.COMPLETE and self._completer_accepts():
                assert self._completer is not None
                self._completer.submit(held, settlement)
            else:
                self._settle_now(held, settlement)

    def _completer_accepts(self) -> bool:
        return self._completer is not None and self._completer.running

    def _settle_now(self, held: HeldJob, settlement: Settlement) -> None:
        failures = 0
        while True:
            try:
                applied = self.store.settle(held.claim, settlement)
                break
            except StoreUnavailable as exc:
                failures += 1
                if self._force.is_set() or held.lost or failures > 50:
                    logger.error(
                        "could not settle job %s (%s): %s; its lease will lapse",
                        held.job.id,
                        held.job.kind,
                        exc,
                        extra=job_extra(held.job),
                    )
                    self.held.remove(held)
                    return
                self._force.wait(min(0.1 * 2**failures, 5.0))
        self._after_settle(held, settlement, applied)

    def _after_settle(self, held: HeldJob, settlement: Settlement, applied: bool) -> None:
        self.held.remove(held)
        started = held.started_at if held.started_at is not None else time.monotonic()
        self.events.job_settled(held.job, settlement, applied, time.monotonic() - started)
        if not applied:
            logger.warning(
                "fenced: job %s (%s) run %d tried to settle as %s after losing its claim; "
                "nothing changed",
                held.job.id,
                held.job.kind,
                held.job.run_count,
                settlement.action.value,
                extra=job_extra(held.job),
            )
