"""The threaded worker: a dispatcher, handler threads, heartbeat, reaper and completer."""

from __future__ import annotations

import enum
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from venturi.context import JobContext
from venturi.errors import (
    ConfigurationError,
    ForkedError,
    StoreUnavailable,
    WorkerFailed,
    first_line,
)
from venturi.events import WorkerEvents
from venturi.models import JobRecord
from venturi.observations import WorkerPresence
from venturi.registry import JobDefinition
from venturi.retention import Retention
from venturi.schedules import Schedule
from venturi.settlements import Settlement
from venturi.store.protocol import Notifier, Store
from venturi.worker.completer import Completer
from venturi.worker.deadlines import Deadlines
from venturi.worker.dispatcher import Dispatcher
from venturi.worker.flow import REFRESH_INTERVAL, FlowView
from venturi.worker.handling import HandlerLoop, stop_timed_out
from venturi.worker.heartbeat import Heartbeat
from venturi.worker.held import HeldJob, HeldJobs
from venturi.worker.interval_loop import IntervalLoop
from venturi.worker.options import check_options, heartbeat_every_for, resolve_kinds, worker_name
from venturi.worker.prefetch import Prefetch
from venturi.worker.reaper import Reaper
from venturi.worker.scheduler import scheduling_loops
from venturi.worker.settling import Settler
from venturi.worker.supervision import Supervisor, join_by, run_hooks, stop_signals
from venturi.worker.transactional import Transactions

logger = logging.getLogger("venturi.worker")

_SENTINEL: Final = None
# How long a worker that stopped itself waits for its running jobs.
FAILURE_STOP_TIMEOUT: Final = 10.0


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Worker:
    """Runs jobs of the given kinds in ``concurrency`` threads until stopped.

    `start` returns at once; `stop` stops claiming, releases prefetched jobs, sets
    ``stopping`` on running ones and waits up to ``timeout`` for them, then releases the
    rest. `run` does both around a blocking wait and stops on SIGINT/SIGTERM (a second
    signal releases running jobs at once). Usable as a context manager.

    Tuning (keywords of `Queue.worker`): ``prefetch`` jobs claimed beyond the busy
    handler threads (default: adapted to job and claim durations, 1 for jobs much slower
    than a claim round trip, up to ``max(64, 4 * concurrency)`` for quick ones; see
    `venturi.worker.prefetch`), ``heartbeat_interval`` (default a third of the shortest lease,
    and never more), ``reaper_interval`` (seconds between scans for expired leases),
    ``completion_batch`` (completions per statement). ``schedules`` are fired and
    ``retention`` pruned by every worker together (`venturi.worker.scheduler`).
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
        schedules: Sequence[Schedule] = (),
        retention: Retention | None = None,
    ) -> None:
        check_options(
            concurrency=concurrency,
            priority_floor=priority_floor,
            poll_interval=poll_interval,
            reaper_interval=reaper_interval,
            heartbeat_interval=heartbeat_interval,
            prefetch=prefetch,
        )
        # None: sized from the observed job and claim durations (see venturi.worker.prefetch).
        self.prefetch = Prefetch(concurrency, prefetch)
        self.store = store
        self.definitions = definitions
        self.requested_kinds = None if kinds is None else list(kinds)
        self.concurrency = concurrency
        self.priority_floor = priority_floor
        self.name = worker_name(name)
        self.poll_interval = float(poll_interval)
        self.heartbeat_interval = heartbeat_interval
        self.reaper_interval = float(reaper_interval)
        self.events = events or WorkerEvents()
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid
        self.held = HeldJobs()
        self.schedules, self.retention = list(schedules), retention
        # Called once when the worker has stopped (e.g. to close its metrics server).
        self.stop_hooks: list[Callable[[], None]] = []
        self._completion_batch = completion_batch
        self._state = _State.NEW
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._ready: queue.SimpleQueue[HeldJob | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        # Why the worker stopped itself (a fatal database error, a thread that kept failing).
        self.failure: BaseException | None = None
        self._supervisor = Supervisor(self._fail, self.events.thread_restarted, self._stopping)
        self._threads: list[threading.Thread] = []
        self._dispatcher: Dispatcher | None = None
        self._dispatcher_thread: threading.Thread | None = None
        self._heartbeat: Heartbeat | None = None
        self._deadlines = Deadlines(stop_timed_out)
        self._handlers: HandlerLoop | None = None
        self._loops: list[tuple[IntervalLoop, threading.Thread]] = []
        self._side_store: Store | None = None
        self._completer: Completer | None = None
        self._settler: Settler | None = None

    @property
    def capacity(self) -> int:
        """The most jobs this worker may hold claimed and unfinished (running plus the
        largest prefetch)."""
        return self.concurrency + self.prefetch.ceiling

    @property
    def listening(self) -> bool:
        """True once the listener's self-probe NOTIFY came back (False: polling)."""
        return self._dispatcher is not None and self._dispatcher.listening

    @property
    def healthy(self) -> bool:
        """Running, not failed, every one of its threads started and alive, and none of
        its interval loops failing (a scheduler whose schedules keep failing, say)."""
        running = self._state is _State.RUNNING and self.failure is None
        loops = all(loop.healthy for loop, _ in self._loops)
        return running and self._supervisor.all_running() and loops

    @property
    def notifier(self) -> Notifier | None:
        """The dedicated LISTEN connection's owner, once started (for diagnostics)."""
        return None if self._dispatcher is None else self._dispatcher.notifier

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> Worker:
        """Start the worker's threads and return at once.

        Raises `ForkedError` in a child of the process that made the queue, and
        `ConfigurationError` for kinds without a handler or a too-long heartbeat.
        """
        if os.getpid() != self.owner_pid:
            raise ForkedError(
                "this worker's queue was created before os.fork(); create the Queue and "
                "worker in the child process (e.g. gunicorn's post_fork hook)"
            )
        with self._lock:
            if self._state is not _State.NEW:
                raise ConfigurationError(f"worker already {self._state.value}; make a new one")
            leases = resolve_kinds(self.requested_kinds, self.definitions)
            heartbeat_every = heartbeat_every_for(leases, self.heartbeat_interval)
            self._state = _State.RUNNING
        flow = FlowView.of(self.store, self.name, list(leases), self.definitions)
        try:
            self.store.check_schema()
            flow.refresh()
        except StoreUnavailable as exc:
            logger.warning("database unavailable at start (%s); will keep retrying", exc)
        self._build(leases, heartbeat_every, flow)
        for thread in self._supervisor.threads:
            thread.start()
        logger.info(
            "worker %s started: kinds %s, concurrency %d",
            self.name,
            ", ".join(leases),
            self.concurrency,
        )
        return self

    def _build(self, leases: dict[str, float], heartbeat_every: float, flow: FlowView) -> None:
        # Whatever the concurrency: one pooled connection each for dispatcher and completer
        # (every settlement), a side one for heartbeat, reaper, scheduler, limits; LISTEN.
        spawn = self._supervisor.thread
        self._settler = Settler(self.store, self.held, self.events, self._force, self._fail)
        completer = self._completer = Completer(
            self.store,
            self._settler.settled,
            self._settler.let_go,
            spawn,
            self._settler.settle,
            batch_size=self._completion_batch,
        )
        # A limited run's end is announced (NOTIFY) on the completer's connection too.
        self._settler.on_run_ended = lambda job: (
            completer.post(lambda: flow.run_ended(job)) if job.kind in flow.waited else None
        )
        self._side_store = self.store.sibling(pool_size=1)
        self._transactions = Transactions(self.store, self.concurrency, self.held.mark_ended)
        presence = WorkerPresence(self.name, tuple(leases), self.concurrency, heartbeat_every)
        self._heartbeat = Heartbeat(self._side_store, self.held, self.events, presence)
        reaper = Reaper(self._side_store, self.definitions, self.events)
        side, reaper_log = self._side_store, logging.getLogger("venturi.reaper")
        loops = [
            self._heartbeat.loop(heartbeat_every),
            IntervalLoop("venturi-reaper", reaper.run_once, self.reaper_interval, reaper_log),
            IntervalLoop(
                "venturi-flow", functools.partial(flow.refresh, side), REFRESH_INTERVAL, logger
            ),
        ]
        loops += scheduling_loops(
            self.store,
            side,
            self.schedules,
            self.retention,
            stopping=self._stopping,
            events=self.events,
        )
        self._loops = [(loop, spawn(loop.name, loop.run)) for loop in loops]
        spawn("venturi-deadlines", self._deadlines.run)
        self._dispatcher = Dispatcher(
            self.store,
            self.store.notifier(),
            name=self.name,
            leases=leases,
            flow=flow,
            concurrency=self.concurrency,
            prefetch=self.prefetch,
            priority_floor=self.priority_floor,
            poll_interval=self.poll_interval,
            hold=self._hold,
            ready=self._ready,
            stopping=self._stopping,
        )
        flow.wake = self._dispatcher.notifier.wake
        self._handlers = HandlerLoop(
            ready=self._ready,
            held=self.held,
            dispatcher=self._dispatcher,
            completer=self._completer,
            settler=self._settler,
            deadlines=self._deadlines,
            events=self.events,
            stopping=self._stopping,
            transactions=self._transactions,
        )
        self._threads = [
            spawn(f"venturi-handler-{i}", self._handlers.run) for i in range(self.concurrency)
        ]
        self._dispatcher_thread = spawn("venturi-dispatcher", self._dispatcher.run)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully; idempotent, and safe before `start` and from any thread.

        Stops claiming, hands prefetched jobs back (journal ``released``), sets
        ``stopping`` on running jobs and waits up to ``timeout`` seconds for them; runs
        still going then are released (their late settlement will be fenced out).
        Completions already made are flushed before it returns.
        """
        with self._lock:
            if self._state is _State.NEW:
                self._state = _State.STOPPED
                self._stopped.set()
                self._run_stop_hooks()
                return
            if self._state is not _State.RUNNING:
                in_progress = True
            else:
                in_progress = False
                self._state = _State.STOPPING
        if in_progress:
            # Another thread is stopping it (or it stopped itself): return when that ends.
            if threading.current_thread() not in self._supervisor.threads:
                self._stopped.wait()
            return
        deadline = time.monotonic() + timeout
        self._stopping.set()
        assert self._dispatcher is not None and self._dispatcher_thread is not None
        self._dispatcher.wake()
        self._dispatcher_thread.join(max(0.0, deadline - time.monotonic()))
        self._dispatcher.notifier.close()
        assert self._handlers is not None
        released = self._handlers.release_queued()
        for held in self.held.snapshot():
            held.ctx.stopping.set()
        for _ in self._threads:
            self._ready.put(_SENTINEL)
        join_by(self._threads, deadline, self._force)
        still_running = [h for h in self.held.snapshot() if h.running and not h.lost]
        assert self._completer is not None
        for held in still_running:
            self._completer.submit(held, Settlement.release("worker stopped before the run ended"))
        self._shut_down_helpers(deadline)
        with self._lock:
            self._state = _State.STOPPED
        self._run_stop_hooks()
        self._stopped.set()
        logger.info(
            "worker %s stopped: released %d prefetched and %d running jobs",
            self.name,
            released,
            len(still_running),
        )

    def _shut_down_helpers(self, deadline: float) -> None:
        assert self._completer is not None
        # Flush settlements before the heartbeat stops, so their leases hold meanwhile.
        self._completer.stop(max(1.0, deadline - time.monotonic()))
        self._deadlines.stop()
        for loop, _ in self._loops:
            loop.stop()
        for _, thread in self._loops:
            if thread is not threading.current_thread():
                thread.join(5.0)
        if self._side_store is not None:
            if self._heartbeat is not None:
                self._heartbeat.leave()
            self._side_store.close()
            self._transactions.close()

    def _run_stop_hooks(self) -> None:
        hooks, self.stop_hooks = self.stop_hooks, []
        run_hooks(hooks, f"worker {self.name}")

    def run(self, timeout: float = 30.0) -> None:
        """Run in the foreground until SIGINT or SIGTERM, then stop gracefully.

        A second signal releases running jobs at once instead of waiting ``timeout``.
        Raises `WorkerFailed` when the worker stopped itself (see `failure`).
        Signal handlers are installed only in the main thread (elsewhere, call `stop`
        from another thread) and restored on return.
        """
        requested = threading.Event()
        with stop_signals(requested, self._force):
            self.start()
            while not requested.wait(1.0):
                if self._stopping.is_set():
                    break
            self.stop(timeout)
        if self.failure is not None:
            raise WorkerFailed(
                f"worker {self.name} stopped itself: {first_line(self.failure)}"
            ) from self.failure

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- handlers ---------------------------------------------------------------------

    def _hold(self, job: JobRecord) -> HeldJob:
        def extend() -> bool:
            assert self._heartbeat is not None
            return self._heartbeat.extend_one(held)

        parents = functools.partial(self.store.parent_results, job.id)
        context = JobContext(job, extend=extend, parents=parents)
        held = HeldJob(job, self.definitions[job.kind], context)
        self.held.add(held)
        return held

    def _fail(self, exc: BaseException) -> None:
        """Stop the worker because of ``exc`` (from any of its threads): record it,
        report it, and stop from a thread of its own (a worker thread cannot join
        itself)."""
        with self._lock:
            if self.failure is not None or self._state is not _State.RUNNING:
                return
            self.failure = exc
        logger.critical("worker %s is stopping itself: %s", self.name, first_line(exc))
        self.events.worker_failed(exc)
        threading.Thread(
            target=self.stop, args=(FAILURE_STOP_TIMEOUT,), name="venturi-failstop", daemon=True
        ).start()
