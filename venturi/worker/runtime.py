"""The threaded worker: a dispatcher, handler threads, the settler, heartbeat, reaper
and the loops of flow control and schedules, assembled once when it starts."""

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

import attrs

from venturi.durable import DurableRuns
from venturi.errors import (
    ConfigurationError,
    ForkedError,
    StoreUnavailable,
    WorkerFailed,
    first_line,
)
from venturi.events import WorkerEvents
from venturi.flow.view import REFRESH_INTERVAL, FlowView
from venturi.loops import IntervalLoop
from venturi.observations import WorkerPresence
from venturi.registry import JobDefinition
from venturi.schedules.retention import Retention
from venturi.schedules.schedule import Schedule
from venturi.schedules.scheduler import scheduling_loops
from venturi.settlements import Settlement
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore
from venturi.worker.deadlines import Deadlines
from venturi.worker.dispatcher import Dispatcher
from venturi.worker.handling import HandlerLoop, Runner, stop_timed_out
from venturi.worker.heartbeat import Heartbeat, Leases
from venturi.worker.held import HeldJob, HeldJobs
from venturi.worker.options import check_options, heartbeat_every_for, resolve_kinds, worker_name
from venturi.worker.passing import PlacePassing
from venturi.worker.prefetch import Prefetch
from venturi.worker.reaper import Reaper
from venturi.worker.settler import Settler
from venturi.worker.supervision import Supervisor, join_by, run_hooks, stop_signals
from venturi.worker.transactional import Transactions
from venturi.worker.vacuuming import JobsTableVacuum

logger = logging.getLogger("venturi.worker")

_SENTINEL: Final = None
# How long a worker that stopped itself waits for its running jobs.
FAILURE_STOP_TIMEOUT: Final = 10.0


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@attrs.frozen
class _Parts:
    """What a started worker runs, assembled once by `_assemble`: every part receives
    what it needs at construction, and none calls back into another's owner."""

    ready: queue.SimpleQueue[HeldJob | None]
    held: HeldJobs
    dispatcher: Dispatcher
    dispatcher_thread: threading.Thread
    handlers: HandlerLoop
    handler_threads: list[threading.Thread]
    settler: Settler
    heartbeat: Heartbeat
    deadlines: Deadlines
    loops: list[tuple[IntervalLoop, threading.Thread]]
    side_store: PostgresStore
    transactions: Transactions


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
    ``completion_batch`` (settlements per statement). ``schedules`` are fired and
    ``retention`` pruned by every worker together (`venturi.schedules.scheduler`).
    ``stop_hooks`` are called once when the worker has stopped (e.g. to close its
    metrics server). ``vacuum``: vacuum the jobs table between autovacuum's visits
    (`venturi.worker.vacuuming`; False leaves it to autovacuum alone).
    """

    def __init__(
        self,
        store: PostgresStore,
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
        stop_hooks: Sequence[Callable[[], None]] = (),
        vacuum: bool = True,
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
        self.schedules, self.retention = list(schedules), retention
        self.stop_hooks = list(stop_hooks)
        self.vacuum = vacuum
        self._completion_batch = completion_batch
        self._state = _State.NEW
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._stopped = threading.Event()
        # Why the worker stopped itself (a fatal database error, a thread that kept failing).
        self.failure: BaseException | None = None
        self._supervisor = Supervisor(self._fail, self.events.thread_restarted, self._stopping)
        self._parts: _Parts | None = None

    @property
    def held(self) -> list[HeldJob]:
        """The runs this worker holds claims on now: queued, running, or awaiting their
        settlement."""
        return [] if self._parts is None else self._parts.held.snapshot()

    @property
    def capacity(self) -> int:
        """The most jobs this worker may hold claimed and unfinished (running plus the
        largest prefetch)."""
        return self.concurrency + self.prefetch.ceiling

    @property
    def listening(self) -> bool:
        """True once the listener's self-probe NOTIFY came back (False: polling)."""
        return self._parts is not None and self._parts.dispatcher.listening

    @property
    def healthy(self) -> bool:
        """Running, not failed, every one of its threads started and alive, and none of
        its interval loops failing (a scheduler whose schedules keep failing, say)."""
        running = self._state is _State.RUNNING and self.failure is None
        loops = self._parts is not None and all(loop.healthy for loop, _ in self._parts.loops)
        return running and self._supervisor.all_running() and loops

    @property
    def notifier(self) -> PostgresNotifier | None:
        """The dedicated LISTEN connection's owner, once started (for diagnostics)."""
        return None if self._parts is None else self._parts.dispatcher.notifier

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
        self._parts = self._assemble(leases, heartbeat_every, flow)
        for thread in self._supervisor.threads:
            thread.start()
        logger.info(
            "worker %s started: kinds %s, concurrency %d",
            self.name,
            ", ".join(leases),
            self.concurrency,
        )
        return self

    def _assemble(self, leases: dict[str, float], heartbeat_every: float, flow: FlowView) -> _Parts:
        """Build every part once, each given what it needs, leaves first. Whatever the
        concurrency, the worker's connections stay the same: one pooled connection each
        for the dispatcher and the settler (every run's end), a side one for the
        heartbeat, reaper, scheduler and limits, and the LISTEN connection."""
        spawn = self._supervisor.thread
        side = self.store.sibling(pool_size=1)
        lease_keeper = Leases(side, self.events)
        held = HeldJobs(
            self.definitions,
            lease_keeper.extend_one,
            self.store.reads.parent_results,
            DurableRuns(self.store, self.definitions),
        )
        presence = WorkerPresence(self.name, tuple(leases), self.concurrency, heartbeat_every)
        heartbeat = Heartbeat(lease_keeper, held, presence)
        settler = Settler(
            self.store,
            held,
            self.events,
            spawn,
            self._force,
            self._fail,
            batch_size=self._completion_batch,
        )
        reaper = Reaper(side, self.definitions, self.events)
        loops = [
            heartbeat.loop(heartbeat_every),
            IntervalLoop(
                "venturi-reaper",
                reaper.run_once,
                self.reaper_interval,
                logging.getLogger("venturi.reaper"),
            ),
            IntervalLoop(
                "venturi-flow", functools.partial(flow.refresh, side), REFRESH_INTERVAL, logger
            ),
            *([JobsTableVacuum(side).loop()] if self.vacuum else []),
            *scheduling_loops(
                self.store,
                side,
                self.schedules,
                self.retention,
                stopping=self._stopping,
                events=self.events,
            ),
        ]
        started_loops = [(loop, spawn(loop.name, loop.run)) for loop in loops]
        deadlines = Deadlines(stop_timed_out)
        spawn("venturi-deadlines", deadlines.run)
        ready: queue.SimpleQueue[HeldJob | None] = queue.SimpleQueue()
        dispatcher = Dispatcher(
            self.store,
            self.store.notifier(),
            held=held,
            name=self.name,
            leases=leases,
            flow=flow,
            concurrency=self.concurrency,
            prefetch=self.prefetch,
            priority_floor=self.priority_floor,
            poll_interval=self.poll_interval,
            ready=ready,
            stopping=self._stopping,
        )
        transactions = Transactions(self.store, self.concurrency, held.mark_ended)
        handlers = HandlerLoop(
            ready=ready,
            dispatcher=dispatcher,
            runner=Runner(held, deadlines, self.events, transactions),
            settler=settler,
            passing=PlacePassing(dispatcher, settler, ready, self._stopping),
            stopping=self._stopping,
        )
        handler_threads = [
            spawn(f"venturi-handler-{i}", handlers.run) for i in range(self.concurrency)
        ]
        return _Parts(
            ready=ready,
            held=held,
            dispatcher=dispatcher,
            dispatcher_thread=spawn("venturi-dispatcher", dispatcher.run),
            handlers=handlers,
            handler_threads=handler_threads,
            settler=settler,
            heartbeat=heartbeat,
            deadlines=deadlines,
            loops=started_loops,
            side_store=side,
            transactions=transactions,
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully; idempotent, and safe before `start` and from any thread.

        Stops claiming, hands prefetched jobs back (journal ``released``), sets
        ``stopping`` on running jobs and waits up to ``timeout`` seconds for them; runs
        still going then are released (their late settlement will be fenced out).
        Settlements already made are flushed before it returns.
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
        parts = self._parts
        assert parts is not None
        deadline = time.monotonic() + timeout
        self._stopping.set()
        parts.dispatcher.wake()
        parts.dispatcher_thread.join(max(0.0, deadline - time.monotonic()))
        parts.dispatcher.notifier.close()
        released = parts.handlers.release_queued()
        for held in parts.held.snapshot():
            held.ctx.stopping.set()
        for _ in parts.handler_threads:
            parts.ready.put(_SENTINEL)
        join_by(parts.handler_threads, deadline, self._force)
        still_running = [h for h in parts.held.snapshot() if h.running and not h.lost]
        for held in still_running:
            parts.settler.submit(held, Settlement.release("worker stopped before the run ended"))
        self._shut_down_helpers(parts, deadline)
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

    @staticmethod
    def _shut_down_helpers(parts: _Parts, deadline: float) -> None:
        # Flush settlements before the heartbeat stops, so their leases hold meanwhile.
        parts.settler.stop(max(1.0, deadline - time.monotonic()))
        parts.deadlines.stop()
        for loop, _ in parts.loops:
            loop.stop()
        for _, thread in parts.loops:
            if thread is not threading.current_thread():
                thread.join(5.0)
        parts.heartbeat.leave()
        parts.side_store.close()
        parts.transactions.close()

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

    def _fail(self, exc: BaseException) -> None:
        """Stop the worker because of ``exc`` (reported by its supervisor or settler from
        any of its threads): record it, report it, and stop from a thread of its own (a
        worker thread cannot join itself)."""
        with self._lock:
            if self.failure is not None or self._state is not _State.RUNNING:
                return
            self.failure = exc
        logger.critical("worker %s is stopping itself: %s", self.name, first_line(exc))
        self.events.worker_failed(exc)
        threading.Thread(
            target=self.stop, args=(FAILURE_STOP_TIMEOUT,), name="venturi-failstop", daemon=True
        ).start()
