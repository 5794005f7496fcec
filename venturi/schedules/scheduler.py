"""The worker's part in schedules: firing due slots, and pruning when a retention slot
falls to it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import attrs

from venturi.errors import first_line
from venturi.events import WorkerEvents
from venturi.loops import FAILING_AFTER, IntervalLoop
from venturi.schedules.retention import Retention
from venturi.schedules.schedule import Schedule
from venturi.store import retrying
from venturi.store.postgres import PostgresStore

logger = logging.getLogger("venturi.scheduler")

# The longest a scheduler sleeps without looking at its rows again.
LONGEST_WAIT: Final = 30.0
# Sleeping a hair past a slot, so the database clock has reached it on waking.
SLOT_MARGIN: Final = 0.002
# How often an idle pruner looks whether a retention slot has asked it to run.
PRUNER_POLL: Final = 0.5


@attrs.define(eq=False)
class Scheduler:
    """`run_once` fires this worker's due schedules and returns seconds until the next
    slot. Its first run makes the schedule rows match the code (`Store.sync_schedules`).

    Every worker runs one; none leads. A slot's firing is fenced in SQL on the row's next
    slot, so when several see it due, one enqueues it and the others write nothing. A
    worker fires only rows whose fingerprint is its own schedule's: after a deploy that
    changed a schedule, workers still running the old code leave it to the new.
    """

    store: PostgresStore
    schedules: Sequence[Schedule]
    # Called when this worker fired a built-in schedule (the retention's).
    run_builtin: Callable[[Schedule], None] = attrs.field(default=lambda _: None)
    events: WorkerEvents = attrs.field(factory=WorkerEvents)
    _synced: bool = attrs.field(default=False, init=False)
    # The schedules synced (those whose next slot could be computed), fired in turn.
    _firing: Sequence[Schedule] = attrs.field(factory=list, init=False)
    # Failures in a row of each schedule that failed last time it was due.
    _failures: dict[str, int] = attrs.field(factory=dict, init=False)

    @property
    def healthy(self) -> bool:
        """False while a schedule has failed `FAILING_AFTER` times in a row (or could not
        be synced at all): the others fire all the same, but someone should look."""
        return all(n < FAILING_AFTER for n in self._failures.values())

    def run_once(self) -> float:
        if not self._synced:
            self._sync()
        if not self._firing:
            return LONGEST_WAIT
        states, now = self.store.schedule_states([s.name for s in self._firing])
        wait = LONGEST_WAIT
        for schedule in self._firing:
            state = states.get(schedule.name)
            if state is None:
                self._synced = False  # the row went away (a dropped table?): write it again
                continue
            if not state.active or state.fingerprint != schedule.fingerprint:
                continue
            next_slot = state.next_slot
            if next_slot <= now:
                try:
                    next_slot = self._fire(schedule, next_slot, now)
                except Exception as exc:
                    # One schedule's failure (a slot it cannot compute, a row the database
                    # refuses) skips it alone; an outage or a fatal error ends the step.
                    if retrying.classify(exc) is not retrying.ErrorClass.STATEMENT:
                        raise
                    self._failed(schedule, exc)
                    continue
            wait = min(wait, (next_slot - now).total_seconds() + SLOT_MARGIN)
        return max(0.0, wait)

    def _sync(self) -> None:
        """Write the rows of the schedules whose next slot can be computed; those that
        cannot are left out (and so retired), logged, and count as failing for good."""
        now = self.store.now()
        syncable = []
        for schedule in self.schedules:
            try:
                schedule.timing.after(now)
            except Exception as exc:
                self._failed(schedule, exc, FAILING_AFTER)
            else:
                syncable.append(schedule)
        changes = self.store.sync_schedules(syncable)
        builtin = {s.name for s in syncable if s.builtin}
        for name, change in sorted(changes.items()):
            level = logging.DEBUG if name in builtin else logging.INFO
            logger.log(level, "schedule %s %s", name, change)
        self._firing, self._synced = syncable, True

    def _fire(self, schedule: Schedule, next_slot: datetime, now: datetime) -> datetime:
        """Fire ``schedule``'s due slots; returns its next slot."""
        firing = schedule.plan(next_slot, now)
        jobs = self.store.fire_schedule(schedule, next_slot, firing)
        if jobs is not None:
            self._fired(schedule, firing.slots, jobs)
        self._failures.pop(schedule.name, None)
        return firing.next_slot

    def _failed(self, schedule: Schedule, exc: Exception, count: int = 1) -> None:
        failures = self._failures[schedule.name] = self._failures.get(schedule.name, 0) + count
        logger.error(
            "schedule %s failed (%s); skipped, the others fire",
            schedule.name,
            first_line(exc),
            exc_info=failures <= count,  # the traceback once, not at every slot
            extra={"schedule": schedule.name, "kind": schedule.kind},
        )

    def _fired(self, schedule: Schedule, slots: Sequence[object], jobs: int) -> None:
        self.events.schedule_fired(schedule.name, jobs)
        if schedule.builtin:
            self.run_builtin(schedule)
            return
        level = logging.INFO if jobs else logging.DEBUG
        logger.log(
            level,
            "schedule %s fired %d job(s) of %s for %s",
            schedule.name,
            jobs,
            schedule.kind,
            ", ".join(str(s) for s in slots) or "no slot (missed slots skipped)",
            extra={"schedule": schedule.name, "kind": schedule.kind},
        )


@attrs.define(eq=False)
class Pruner:
    """Deletes finished jobs past the retention when a retention slot asked for it.

    `request` comes from the scheduler's thread; `run_once` prunes in the pruner's own
    thread (a prune of many rows must not hold up firing), on a connection opened for
    the prune and closed after it. One session at a time prunes a
    prefix (an advisory lock), so an overlong prune never runs twice at once.
    """

    store: PostgresStore
    retention: Retention
    stopping: threading.Event
    events: WorkerEvents = attrs.field(factory=WorkerEvents)
    _requested: threading.Event = attrs.field(factory=threading.Event, init=False)

    def request(self, _schedule: Schedule | None = None) -> None:
        self._requested.set()

    def run_once(self) -> dict[str, int] | None:
        if not self._requested.is_set():
            return None
        self._requested.clear()
        # A connection of its own, closed after: a prune holds one while it deletes, and
        # the worker's pool must not keep it open afterwards (see the connection budget).
        # A plain connection, not a pool of one: a pool starts four threads (its
        # scheduler and three workers) for every prune, and a worker's threads should
        # stay the same set for as long as it runs.
        deleted = self.store.prune(self.retention, self.stopping, dedicated=True)
        for status, count in (deleted or {}).items():
            self.events.jobs_pruned(status, count)
        if deleted is None:
            logger.info("retention: another session is pruning; skipped")
        elif any(deleted.values()):
            logger.info(
                "retention deleted %s (keeping %s)",
                ", ".join(f"{n} {status}" for status, n in deleted.items()),
                self.retention.describe(),
                extra={"deleted": deleted},
            )
        return deleted


def scheduling_loops(
    store: PostgresStore,
    side_store: PostgresStore,
    schedules: Sequence[Schedule],
    retention: Retention | None,
    *,
    stopping: threading.Event,
    events: WorkerEvents,
) -> list[IntervalLoop]:
    """The scheduler's loop (on ``side_store``, beside the heartbeat) and, when the
    retention deletes anything, the pruner's (on a connection of its own for each prune,
    from ``store``)."""
    loops = []
    wanted = list(schedules)
    pruner = None
    if retention is not None and retention.prunes:
        pruner = Pruner(store, retention, stopping, events)
        wanted.append(retention.schedule())
        loops.append(IntervalLoop("venturi-pruner", pruner.run_once, PRUNER_POLL, logger))
    scheduler = Scheduler(side_store, wanted, pruner.request if pruner else lambda _: None, events)
    loops.insert(
        0,
        IntervalLoop(
            "venturi-scheduler",
            scheduler.run_once,
            LONGEST_WAIT,
            logger,
            paced=True,
            sound=lambda: scheduler.healthy,
        ),
    )
    return loops
