"""Waiting for jobs to finish: every waiter of a queue shares one LISTEN connection."""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

from ulid import ULID

from venturi.errors import UnknownJob
from venturi.models import JobRecord
from venturi.store import retrying
from venturi.store.notifier import PostgresNotifier
from venturi.store.postgres import PostgresStore

logger = logging.getLogger("venturi.waiting")

# How long the listening thread blocks between checks of its connection. A connection
# that went silently bad is found by the notifier's own ping within this time.
_LISTEN_SLICE: Final = 5.0
# Behind a transaction-pooling proxy nothing can LISTEN: the waiters' jobs are then read
# this often instead.
_POLL_INTERVAL: Final = 0.5
_CONNECT_BACKOFF: Final = retrying.RetryDelays(base=0.1, cap=5.0)


class _Slot:
    """One waiter: set once its job is seen finished."""

    __slots__ = ("done", "record")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.record: JobRecord | None = None


class Waiters:
    """The waiters of one queue and the thread that wakes them.

    The thread owns one LISTEN connection on the prefix's channel of finished jobs. Each
    wait marks its job awaited, and only a transaction that finishes an awaited job
    notifies that channel (once, however many it finishes): jobs nobody waits for cost
    their finishing transactions nothing. On each notification, and after
    each reconnect (one may have been missed), it reads in one statement which of the
    awaited jobs have finished and wakes their waiters. No waiter, no statement: a
    notification costs nothing but its delivery. Started by the first wait.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._slots: dict[ULID, list[_Slot]] = {}
        self._listening = threading.Event()
        self._closed = threading.Event()
        self._notifier: PostgresNotifier | None = None
        self._thread: threading.Thread | None = None

    def wait(self, job_id: ULID, timeout: float) -> JobRecord:
        """The job once it has finished; `TimeoutError` after ``timeout`` seconds,
        `UnknownJob` if no job has this id."""
        deadline = time.monotonic() + timeout
        slot = _Slot()
        with self._lock:
            self._slots.setdefault(job_id, []).append(slot)
            self._start()
        try:
            # Listening before the job is marked awaited and read: a job finishing after
            # the mark notifies, and one that finished before it is read finished.
            if not self._listening.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"job {job_id}: the waiters' listener did not connect in time")
            record = self._store.await_job(job_id)
            if record is None:
                raise UnknownJob(f"no job {job_id} in prefix {self._store.prefix.name!r}")
            if record.status.terminal:
                return record
            if not slot.done.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"job {job_id} did not finish within {timeout:g}s")
            assert slot.record is not None
            return slot.record
        finally:
            with self._lock:
                slots = self._slots.get(job_id, [])
                if slot in slots:
                    slots.remove(slot)
                if not slots:
                    self._slots.pop(job_id, None)

    @property
    def waiting(self) -> int:
        """How many waits are in progress."""
        with self._lock:
            return sum(len(s) for s in self._slots.values())

    def _start(self) -> None:
        if self._thread is None and not self._closed.is_set():
            self._notifier = self._store.finished_notifier()
            self._thread = threading.Thread(
                target=self._run, name=f"venturi-waiters-{self._store.prefix.name}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        notifier = self._notifier
        assert notifier is not None
        failures = 0
        while not self._closed.is_set() and not self._listening.is_set():
            try:
                notifier.connect()
                self._listening.set()
            except Exception as exc:
                failures += 1
                logger.warning("waiters' listener cannot connect (%s); retrying", exc)
                self._closed.wait(_CONNECT_BACKOFF.delay(failures))
        while not self._closed.is_set():
            slice_ = _POLL_INTERVAL if notifier.polling else _LISTEN_SLICE
            try:
                woken = notifier.wait(slice_)
                if self._closed.is_set():
                    return
                if woken or notifier.polling:
                    self._wake_finished()
            except Exception:
                # Never die silently: log, rest a moment, and read the awaited jobs again.
                logger.exception("the waiters' listener failed; carrying on")
                self._closed.wait(_POLL_INTERVAL)
                self._wake_finished()

    def _wake_finished(self) -> None:
        with self._lock:
            awaited = list(self._slots)
        if not awaited:
            return
        try:
            finished = self._store.reads.finished_jobs(awaited)
        except Exception:
            # The next notification, reconnect or poll reads again; waiters time out.
            logger.exception("reading the waited-for jobs failed")
            return
        with self._lock:
            for record in finished:
                for slot in self._slots.get(record.id, []):
                    slot.record = record
                    slot.done.set()

    def close(self) -> None:
        """Stop the thread and close its connection (waits in progress time out)."""
        self._closed.set()
        with self._lock:
            notifier, thread = self._notifier, self._thread
        if notifier is not None:
            notifier.close()
        if thread is not None:
            thread.join(5.0)
