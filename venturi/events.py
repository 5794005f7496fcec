"""Observation points of a worker (metrics, tests); every method is a no-op here."""

from __future__ import annotations

from venturi.models import JobRecord, Outcome
from venturi.settlements import Settlement


class WorkerEvents:
    """Subclass and pass as ``queue.worker(events=...)``; called from worker threads.

    Implementations must be quick and thread-safe and must not raise.
    """

    def job_started(self, job: JobRecord, waited: float) -> None:
        """A handler is about to run ``job``; ``waited`` is seconds since it became visible."""

    def job_settled(
        self, job: JobRecord, settlement: Settlement, outcome: Outcome | None, duration: float
    ) -> None:
        """A run ended: ``outcome`` is what the journal recorded (a retry of the last
        allowed attempt is ``dead``), or None when the settlement was fenced out."""

    def job_recovered(self, job: JobRecord, outcome: Outcome) -> None:
        """The reaper took back ``job``'s stale claim: ``recovered``, or ``dead`` when
        out of attempts (the journal's outcome)."""

    def lease_lost(self, job: JobRecord) -> None:
        """A running job's lease was lost (taken over, cancelled or lapsed)."""

    def thread_restarted(self, thread: str) -> None:
        """A worker thread raised; it was logged and is being restarted."""

    def worker_failed(self, error: BaseException) -> None:
        """The worker is stopping itself because of ``error`` (see `Worker.failure`)."""

    def schedule_fired(self, schedule: str, jobs: int) -> None:
        """This worker fired a due slot of ``schedule``, enqueueing ``jobs`` jobs (0 for
        missed slots skipped, and for the built-in retention schedule)."""

    def jobs_pruned(self, status: str, count: int) -> None:
        """This worker's prune deleted ``count`` finished jobs of ``status``."""
