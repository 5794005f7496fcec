"""The reaper: takes back claims whose lease expired (crashed or frozen workers)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from venturi.backoff import delay_for
from venturi.events import WorkerEvents
from venturi.registry import JobDefinition
from venturi.store.protocol import Store
from venturi.worker.execution import job_extra

logger = logging.getLogger("venturi.reaper")


@attrs.define(eq=False)
class Reaper:
    """`run_once` recovers up to ``batch`` stale claims and returns how many it took.

    Each recovery is fenced in SQL by run epoch and expiry, so a heartbeat or settlement
    that got there first wins. A lost run counts as a failure: the job re-pends after its
    kind's backoff (at once for kinds this worker does not know), or goes dead once out of
    attempts.
    """

    store: Store
    definitions: Mapping[str, JobDefinition]
    events: WorkerEvents = attrs.field(factory=WorkerEvents)
    batch: int = 100

    def run_once(self) -> int:
        recovered = 0
        for job in self.store.find_stale(self.batch):
            definition = self.definitions.get(job.kind)
            delay = (
                0.0 if definition is None else delay_for(definition.backoff, job.failure_count + 1)
            )
            outcome = self.store.recover(job, delay)
            if outcome is None:
                continue
            recovered += 1
            self.events.job_recovered(job, outcome)
            logger.warning(
                "recovered job %s (%s) run %d from %s: lease expired; %s",
                job.id,
                job.kind,
                job.run_count,
                job.claimed_by,
                outcome.value,
                extra=job_extra(job),
            )
        return recovered
