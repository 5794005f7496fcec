"""Vacuuming the jobs table between autovacuum's visits.

Each drained job leaves dead row versions in the jobs table (its claim's and its
settlement's), with entries in the claim indexes that every claim walks past until a
vacuum removes them. Autovacuum looks at a database once per ``autovacuum_naptime``
(server-wide, a minute by default), so a queue draining thousands of jobs a second
collects hundreds of thousands between its visits and claims slow down round after
round. Workers therefore vacuum the table themselves once enough dead versions have
accumulated since the last vacuum; a vacuum already running (another worker's or
autovacuum's) makes theirs return at once. While something holds back the xmin horizon
a vacuum removes nothing and still reads the whole table and its indexes, so each one
that removed less than half of the versions added before it doubles the count the next
waits for, up to `MAX_DOUBLINGS` times; one that removes them starts afresh. After such a
vacuum none runs while the oldest holder of the horizon it met still holds: nothing that
died since could be removed, and each would read the whole table and its indexes beside
the claims.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

import attrs
import psycopg

from venturi.errors import StoreError
from venturi.loops import IntervalLoop
from venturi.store.postgres import DeadRows, PostgresStore
from venturi.upkeep import VacuumPace

logger = logging.getLogger("venturi.vacuum")

# A vacuum is due once this many dead row versions, plus this fraction of the live
# rows, accumulated since the last one: on a small table a vacuum costs milliseconds,
# while on a large one its index passes read every index, so they come less often.
DEAD_ROWS: Final = 10_000
DEAD_FRACTION: Final = 0.05
# Doublings of DEAD_ROWS at most while vacuums remove little: a held horizon lets
# 160,000 new dead versions pass between vacuums, and its release waits at most that long
# (autovacuum's own thresholds apply meanwhile).
MAX_DOUBLINGS: Final = 4
# Seconds between looks at the statistics while the dead versions grow, and while not.
BUSY_LOOK: Final = 1.0
QUIET_LOOK: Final = 10.0


@attrs.define(eq=False)
class JobsTableVacuum:
    """`step` looks at the jobs table's statistics, vacuums it when due, and returns the
    seconds until the next look.

    Versions a vacuum could not remove (a snapshot older than them is still open
    somewhere) are not counted towards the next one, and each vacuum that removed little
    makes the next wait for twice as many, so a held-back horizon does not make every
    look vacuum in vain. The count lives in the store's `VacuumPace`, so a worker started
    later goes on from it."""

    store: PostgresStore
    _refused: bool = attrs.field(default=False, init=False)
    # Whether this worker looked yet: the statistics lag its first claims (a backend
    # reports its counts at most once a second, an idle one after ten), so a first look
    # finding nothing new is followed by another soon.
    _looked: bool = attrs.field(default=False, init=False)
    _stopped: bool = attrs.field(default=False, init=False)
    # The connection of the VACUUM under way, for `cancel`.
    _running: psycopg.Connection[Any] | None = attrs.field(default=None, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def step(self) -> float:
        if self._stopped:
            return QUIET_LOOK
        rows = self.store.dead_rows()
        if rows is None:
            return QUIET_LOOK
        if not rows.vacuumable:
            if not self._refused:
                self._refused = True
                logger.info(
                    "the jobs table %s belongs to another role: its vacuuming is left to "
                    "autovacuum",
                    self.store.prefix.jobs,
                )
            return QUIET_LOOK
        pace = self.store.vacuum_pace
        pace.left = min(pace.left, rows.dead)
        if self.due(rows, pace):
            holder = self.store.horizon_holder()
            if pace.futile and holder is not None and holder == pace.holder:
                pace.seen = rows.dead  # still held: looked at again soon, for its release
                return BUSY_LOOK
            try:
                self.store.vacuum_jobs(self._hold)
            except StoreError:
                if self._stopped:  # cancelled: the worker is stopping
                    return QUIET_LOOK
                raise
            after = self.store.dead_rows()
            left = rows.dead if after is None else after.dead
            added, removed = rows.dead - pace.left, rows.dead - left
            pace.futile = pace.futile + 1 if 2 * removed < added else 0
            pace.holder = holder if pace.futile else None
            pace.left = pace.seen = left
            return BUSY_LOOK
        growing, pace.seen = rows.dead > pace.seen or not self._looked, rows.dead
        self._looked = True
        return BUSY_LOOK if growing else QUIET_LOOK

    @staticmethod
    def due(rows: DeadRows, pace: VacuumPace) -> bool:
        """Whether the dead versions added since the last vacuum warrant another."""
        wanted = DEAD_ROWS << min(pace.futile, MAX_DOUBLINGS)
        return rows.dead - pace.left >= wanted + DEAD_FRACTION * rows.live

    def cancel(self) -> None:
        """Cancel the VACUUM under way, if any (the worker is stopping), and any later."""
        with self._lock:
            self._stopped = True
            if self._running is not None:
                self._running.cancel_safe()

    def _hold(self, conn: psycopg.Connection[Any] | None) -> None:
        with self._lock:
            self._running = conn

    def loop(self) -> IntervalLoop:
        return IntervalLoop(
            "venturi-vacuum", self.step, QUIET_LOOK, logger, paced=True, on_stop=self.cancel
        )
