"""The reaper: takes back claims whose lease expired (crashed or frozen workers)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from venturi.backoff import delay_for
from venturi.events import WorkerEvents
from venturi.execution import job_extra
from venturi.registry import JobDefinition
from venturi.store import Store

logger = logging.getLogger("venturi.reaper")


class Reaper:
    """`run_once` recovers up to ``batch`` stale claims and returns how many it took.

    Each recovery is fenced in SQL by run epoch and expiry, so a heartbeat or settlement
    that got there first wins. A lost run counts as a failure: the job re-pends after its
    kind's backoff (at once for kinds this worker does not know), or goes dead once out of
    attempts.
    """

    def __init__(
        self,
        store: Store,
        definitions: Mapping[str, JobDefinition],
        events: WorkerEvents | None = None,
        batch: int = 100,
    ) -> None:
        self.store = store
        self.definitions = definitions
        self.events = events or WorkerEvents()
        self.batch = batch

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
