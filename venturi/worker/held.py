"""The table of jobs a worker holds claims on: queued, running, or awaiting settlement."""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from ulid import ULID

from venturi.context import JobContext
from venturi.durable import DurableRun
from venturi.models import JobRecord
from venturi.registry import JobDefinition
from venturi.settlements import Claim

# How many runs let go (`HeldJobs.let_go`) are remembered: more than a worker could let
# go within a lease, after which the reaper has taken each back.
LET_GO_REMEMBERED: Final = 10_000


@attrs.define(eq=False)
class HeldJob:
    """One claim this worker holds, from claim until its settlement committed."""

    job: JobRecord
    definition: JobDefinition
    ctx: JobContext
    claimed_at: float = attrs.field(factory=time.monotonic)
    started_at: float | None = None
    deadline: float | None = None
    ended: bool = False  # the handler returned; its settlement is on its way
    lapsing: bool = False  # timed out: the heartbeat no longer renews the lease
    lost: bool = False  # the lease is gone: cancelled, taken over or lapsed

    @property
    def claim(self) -> Claim:
        return Claim.of(self.job)

    @property
    def running(self) -> bool:
        """The handler started and has not returned."""
        return self.started_at is not None and not self.ended


class HeldJobs:
    """Thread-safe map of job id -> `HeldJob` shared by the worker's threads, and the
    maker of each held run (`hold`): its definition and its `JobContext`, whose
    ``extend_lease()`` calls ``extend`` and whose ``parents`` reads ``parents``."""

    def __init__(
        self,
        definitions: Mapping[str, JobDefinition],
        extend: Callable[[HeldJob], bool],
        parents: Callable[[ULID], dict[ULID, Any]],
        durable: Callable[[Claim], DurableRun] | None = None,
    ) -> None:
        self._definitions = definitions
        self._extend = extend
        self._parents = parents
        self._durable = durable
        self._lock = threading.Lock()
        self._jobs: dict[ULID, HeldJob] = {}
        # (job id, run) of runs let go, still claimed in the database until their lease
        # lapses: never to be taken for claims whose answer was lost.
        self._let_go: collections.deque[tuple[ULID, int]] = collections.deque(
            maxlen=LET_GO_REMEMBERED
        )

    def hold(self, job: JobRecord) -> HeldJob:
        """Hold the claimed ``job`` as one of this worker's runs."""

        def extend() -> bool:
            return self._extend(held)

        context = JobContext(
            job,
            extend=extend,
            parents=functools.partial(self._parents, job.id),
            durable=self._durable,
        )
        held = HeldJob(job, self._definitions[job.kind], context)
        self.add(held)
        return held

    def add(self, held: HeldJob) -> None:
        with self._lock:
            self._jobs[held.job.id] = held

    def remove(self, held: HeldJob) -> None:
        with self._lock:
            if self._jobs.get(held.job.id) is held:
                del self._jobs[held.job.id]

    def let_go(self, held: HeldJob) -> None:
        """Stop holding a run whose settlement could not be written; it stays claimed
        until its lease lapses, and `known` still counts it."""
        with self._lock:
            if self._jobs.get(held.job.id) is held:
                del self._jobs[held.job.id]
            self._let_go.append((held.job.id, held.job.run_count))

    def known(self) -> set[tuple[ULID, int]]:
        """(job id, run) of every run held now or let go (recently)."""
        with self._lock:
            return {(h.job.id, h.job.run_count) for h in self._jobs.values()} | set(self._let_go)

    def snapshot(self) -> list[HeldJob]:
        with self._lock:
            return list(self._jobs.values())

    def get(self, job_id: ULID) -> HeldJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def mark_started(self, held: HeldJob) -> None:
        with self._lock:
            held.started_at = time.monotonic()
            if held.definition.timeout is not None:
                held.deadline = held.started_at + held.definition.timeout

    def mark_ended(self, held: HeldJob) -> None:
        with self._lock:
            held.ended = True
