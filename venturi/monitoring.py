"""Watching a `Queue` from outside its workers: the worker registry, per-kind figures
that stay cheap on a large table, recent throughput, dead jobs grouped by cause, and
making a waiting job due now. The dashboard and `venturi workers` read these."""

from __future__ import annotations

from venturi.models import JobId
from venturi.observations import DeadGroup, Overview, Throughput, WorkerInfo
from venturi.reading import Reads


class Monitoring(Reads):
    """`Queue`'s operations for operators (a mixin over its stores). Its reads go to the
    ``read_dsn`` store when the queue has one; `retry_now` writes on the queue's own."""

    def workers(self) -> list[WorkerInfo]:
        """Every running worker of the queue (its registry), by name. A worker writes its
        row at start and at every heartbeat and removes it when it stops; a row not
        refreshed for three beats and half a minute (a killed worker) is left out and
        later deleted."""
        self._check_process()
        return self.reads.workers()

    def overview(self) -> Overview:
        """Each kind's jobs by status. Pending, scheduled and running jobs are counted;
        on a table of 100,000 jobs or more, waiting and finished jobs are estimated from
        the statistics ANALYZE keeps (`Overview.estimated`), so this stays fast."""
        self._check_process()
        return self.reads.overview()

    def throughput(self, minutes: int = 60, bucket: int = 5) -> Throughput:
        """Completed and failed runs per kind in ``bucket``-minute buckets over the last
        ``minutes`` minutes, from the journal."""
        self._check_process()
        if minutes < 1 or bucket < 1:
            raise ValueError(f"minutes and bucket must be at least 1, got {minutes}, {bucket}")
        return self.reads.throughput(minutes, bucket)

    def dead_groups(self, sample: int = 500) -> list[DeadGroup]:
        """The newest ``sample`` dead jobs grouped by kind and the first line of the
        note they died with, largest group first."""
        self._check_process()
        if sample < 1:
            raise ValueError(f"sample must be at least 1, got {sample}")
        return self.reads.dead_groups(sample)

    def retry_now(self, job_id: JobId) -> bool:
        """Make a pending job that waits for a later time (scheduled, or backing off after
        a failure) due now, journaled as ``requeued``; False if the job is not one."""
        self._check_process()
        return self.store.retry_now(job_id, "made due now by an operator")
