"""A worker process's side of a group: count runs, report to the supervisor, stop when
orphaned."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import sys
import threading
from typing import Final

from venturi.events import WorkerEvents
from venturi.models import JobRecord, Outcome
from venturi.processes.channel import ChildSettings, Report
from venturi.settlements import Settlement
from venturi.worker.runtime import Worker

logger = logging.getLogger("venturi.processes")

# Seconds between reports while starting (the supervisor waits for `ready`) and after.
STARTING_REPORT_INTERVAL: Final = 0.05
REPORT_INTERVAL: Final = 0.5


class RunCounter(WorkerEvents):
    """Counts ended runs and passes every event on to ``inner``; sets ``limit_reached``
    at ``limit`` runs."""

    def __init__(self, inner: WorkerEvents | None = None, limit: int | None = None) -> None:
        self.inner = inner or WorkerEvents()
        self.limit = limit
        self.count = 0
        self.limit_reached = threading.Event()
        self._lock = threading.Lock()

    def job_started(self, job: JobRecord, waited: float) -> None:
        self.inner.job_started(job, waited)

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        with self._lock:
            self.count += 1
            if self.limit is not None and self.count >= self.limit:
                self.limit_reached.set()
        self.inner.job_settled(job, settlement, outcome, duration)

    def job_recovered(self, job: JobRecord, outcome: Outcome) -> None:
        self.inner.job_recovered(job, outcome)

    def lease_lost(self, job: JobRecord) -> None:
        self.inner.lease_lost(job)

    def thread_restarted(self, thread: str) -> None:
        self.inner.thread_restarted(thread)

    def worker_failed(self, error: BaseException) -> None:
        self.inner.worker_failed(error)

    def schedule_fired(self, schedule: str, jobs: int) -> None:
        self.inner.schedule_fired(schedule, jobs)

    def jobs_pruned(self, status: str, count: int) -> None:
        self.inner.jobs_pruned(status, count)


def child_events(settings: ChildSettings) -> RunCounter:
    """The events a supervised worker gets: its run counter, counting into the group's
    metrics when the group serves them."""
    inner: WorkerEvents | None = None
    if settings.metrics:
        from venturi.metrics import QueueMetrics

        inner = QueueMetrics().events
    return RunCounter(inner, settings.max_jobs)


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class Reporter:
    """Writes the worker's `Report` to the supervisor's pipe: often until the worker
    runs, then every `REPORT_INTERVAL` and at once when the run limit is reached.

    When the supervisor is gone (the pipe is broken, or the parent changed) it sends
    this process SIGTERM once, so `Worker.run` stops gracefully.
    """

    def __init__(self, settings: ChildSettings, worker: Worker, counter: RunCounter) -> None:
        self.settings, self.worker, self.counter = settings, worker, counter
        self._done = threading.Event()
        self._orphaned = False
        self._thread = threading.Thread(target=self._run, name="venturi-reporter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Send a last report and close the pipe; safe before `start`."""
        self._done.set()
        self.counter.limit_reached.set()
        if self._thread.ident is not None:
            self._thread.join(5.0)
        self.report_once()
        with contextlib.suppress(OSError):
            os.close(self.settings.fd)

    def _run(self) -> None:
        while not self._done.is_set():
            self.report_once()
            interval = REPORT_INTERVAL if self.worker.healthy else STARTING_REPORT_INTERVAL
            if self.counter.limit_reached.wait(interval):
                self.counter.limit_reached.clear()
                self.report_once()  # once per wake: the supervisor acts on the first
                self._done.wait(REPORT_INTERVAL)

    def report_once(self) -> None:
        report = Report(self.worker.healthy, self.counter.count, resident_bytes())
        try:
            if os.getppid() != self.settings.supervisor_pid:
                raise BrokenPipeError("the supervisor is gone")
            os.write(self.settings.fd, report.encode())
        except OSError as exc:
            self._orphan(exc)

    def _orphan(self, exc: OSError) -> None:
        if self._orphaned or self._done.is_set():
            return
        self._orphaned = True
        logger.warning("worker group supervisor is gone (%s): stopping gracefully", exc)
        os.kill(os.getpid(), signal.SIGTERM)


def run_child(worker: Worker, settings: ChildSettings, counter: RunCounter, timeout: float) -> None:
    """Run ``worker`` in the foreground (`Worker.run`) while reporting to the supervisor."""
    reporter = Reporter(settings, worker, counter)
    reporter.start()
    try:
        worker.run(timeout=timeout)
    finally:
        reporter.stop()
