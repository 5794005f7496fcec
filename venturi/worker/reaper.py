"""The reaper: takes back claims whose lease expired (crashed or frozen workers)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from venturi.backoff import delay_for
from venturi.events import WorkerEvents
from venturi.models import JobRecord, Outcome
from venturi.registry import JobDefinition
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore
from venturi.worker.execution import job_extra

logger = logging.getLogger("venturi.reaper")


@attrs.define(eq=False)
class Reaper:
    """`run_once` recovers up to ``batch`` stale claims and returns how many it took.

    The recoveries are written as every run's end is, by `PostgresStore.settle_many` (one
    statement for the batch), each fenced in SQL by run epoch and expiry, so a heartbeat
    or settlement that got there first wins. A lost run counts as a failure: the job
    re-pends after its kind's backoff (at once for kinds this worker does not know), or
    goes dead once out of attempts. A row another session holds locked is left for the
    next scan: one lock never stalls the reaper.
    """

    store: PostgresStore
    definitions: Mapping[str, JobDefinition]
    events: WorkerEvents = attrs.field(factory=WorkerEvents)
    batch: int = 100

    def run_once(self) -> int:
        stale = self.store.find_stale(self.batch)
        recoveries = [
            (Claim.of(job), Settlement.recover(job.claimed_by, self._delay(job))) for job in stale
        ]
        recovered = 0
        for job, written in zip(stale, self.store.settle_many(recoveries), strict=True):
            if not isinstance(written, Outcome):  # fenced, locked meanwhile, or refused
                continue
            recovered += 1
            self.events.job_recovered(job, written)
            logger.warning(
                "recovered job %s (%s) run %d from %s: lease expired; %s",
                job.id,
                job.kind,
                job.run_count,
                job.claimed_by,
                written.value,
                extra=job_extra(job),
            )
        return recovered

    def _delay(self, job: JobRecord) -> float:
        definition = self.definitions.get(job.kind)
        return 0.0 if definition is None else delay_for(definition.backoff, job.failure_count + 1)
