"""Running due jobs inline in the calling thread (`Queue.drain`), for tests and scripts."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from venturi.context import JobContext
from venturi.durable import DurableRuns, waits_for_signal
from venturi.errors import ConfigurationError
from venturi.models import JobRecord, Outcome
from venturi.registry import JobDefinition
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore
from venturi.worker.options import default_name
from venturi.worker.transactional import run_inline

# How soon to look again when a due job is locked by someone else or held back by limits.
DRAIN_RECHECK: Final = 0.05


def drain(
    store: PostgresStore,
    definitions: Mapping[str, JobDefinition],
    kinds: Sequence[str] | None,
    wait_for: float,
    *,
    worker: str | None = None,
    after_run: Callable[[], None] | None = None,
) -> int:
    """Run every due job of ``kinds`` (default: all registered) until none is left, and
    until ``wait_for`` seconds from now those that come due by then; returns runs.

    Kinds with limits, in this process's registrations or in the database, are claimed
    within them; paused kinds are not run. Runs are claimed as ``worker`` (default
    ``drain:<host:pid>``); ``after_run`` is called after each settled run, and what it
    raises ends the drain (the inline test mode raises a handler's failure so).
    """
    wanted = list(kinds) if kinds is not None else list(definitions)
    unknown = [k for k in wanted if k not in definitions]
    if unknown:
        raise ConfigurationError(f"no handler registered for kinds: {', '.join(unknown)}")
    leases = {k: definitions[k].lease for k in wanted}
    limited = {k for k in wanted if definitions[k].limits.limited}
    limited |= {limits.kind for limits, _ in store.reads.kind_limits() if limits.limited}
    deadline = time.monotonic() + wait_for
    name = worker if worker is not None else f"drain:{default_name()}"
    pause = threading.Event()
    runs = 0
    while leases:
        jobs = store.claim(name, leases, 1, limited=limited)
        if jobs:
            run_claimed(store, definitions[jobs[0].kind], jobs[0], leases[jobs[0].kind])
            runs += 1
            if after_run is not None:
                after_run()
            continue
        left = deadline - time.monotonic()
        until = store.seconds_until_visible(list(leases))
        if until is None or until > left or left <= 0:
            return runs
        # A due job we could not claim is locked by someone else (or held back by its
        # kind's limits): look again shortly.
        pause.wait(max(until, DRAIN_RECHECK))
    return runs


def run_claimed(
    store: PostgresStore, definition: JobDefinition, job: JobRecord, lease: float
) -> None:
    """Run one claimed job in this thread and settle it."""
    claim = Claim.of(job)

    def extend() -> bool:
        return store.extend_lease([(claim, lease)]).kept(job.id)

    parents = functools.partial(store.reads.parent_results, job.id)
    try:
        settlement = run_inline(
            store,
            definition,
            JobContext(job, extend=extend, parents=parents, durable=DurableRuns(store)),
        )
    except BaseException:
        # KeyboardInterrupt or SystemExit from the handler: hand the job back untouched.
        store.settle(claim, Settlement.release("drain interrupted"))
        raise
    if settlement is not None:
        outcome = store.settle(claim, settlement)
        if outcome is Outcome.PAUSED and waits_for_signal(settlement.facts):
            store.wake_signalled(claim)
