"""Where each kind's next claim may start reading the claim index.

A claim statement reports, for each kind it probed, the first pending job it found (in
claim order: priority first, then visible_at, then id) and the snapshot it found it in
(sql/fragments/floors_found.sql). The next claim of that kind starts its probe there,
and finds the jobs made pending since by the pended_xid the snapshot could not see
(sql/fragments/pending_levels.sql, migration 0017). A floor is a hint checked by the
statement that uses it: any floor, however old, gives the same claims.

Floors are kept per connection (`venturi.store.connections.StoreConnection`), since a
snapshot speaks of the transactions of one server: a connection to a promoted standby,
or to a server restored from a backup, starts without any. And per kind and priority
floor: a probe with a priority floor says nothing of the jobs below it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import attrs

# The columns floors_found.sql appends to each row of a claim.
FLOOR_COLUMNS: Final = 5
# Claims start from floors once the jobs table holds this many dead row versions: more
# than the workers' vacuum lets pile up (it runs every 10,000 or so), so in normal
# operation claims are the plain ones, and floors serve while vacuum cannot remove
# anything (a held-back xmin horizon). A claim from floors costs about as much more as
# stepping over 3,000 dead entries of the claim index (`venturi bench --workload
# held-horizon`).
FLOORS_AFTER_DEAD_ROWS: Final = 100_000
# Seconds between looks at the dead row versions, from the claims.
FLOORS_LOOK: Final = 1.0


@attrs.frozen
class Floor:
    """The first pending job of a kind a statement found (None: it found none), and that
    statement's snapshot (pg_snapshot as text)."""

    priority: int | None
    visible_at: datetime | None
    id: UUID | None
    snapshot: str


class ClaimFloors:
    """The latest floor of each (kind, priority floor) on one connection: used by one
    thread at a time, as the connection is."""

    def __init__(self) -> None:
        self._floors: dict[tuple[str, int], Floor] = {}

    def params(self, kinds: Sequence[str], priority_floor: int) -> dict[str, Any]:
        """The floor parameters of a claim of ``kinds`` at ``priority_floor``."""
        known = [(k, self._floors.get((k, priority_floor))) for k in kinds]
        found = [(k, f) for k, f in known if f is not None]
        return {
            "floor_kinds": [k for k, _ in found],
            "floor_priorities": [f.priority for _, f in found],
            "floor_ats": [f.visible_at for _, f in found],
            "floor_ids": [f.id for _, f in found],
            "floor_snapshots": [f.snapshot for _, f in found],
        }

    def job_rows(
        self, rows: Sequence[tuple[Any, ...]], priority_floor: int
    ) -> list[tuple[Any, ...]]:
        """The claimed jobs' columns of a claim's ``rows``, learning the floors of its
        one row without a job."""
        jobs = []
        for row in rows:
            if row[0] is None:
                self.learn(row[-FLOOR_COLUMNS:], priority_floor)
            else:
                jobs.append(row[:-FLOOR_COLUMNS])
        return jobs

    def learn(self, found: Sequence[Any], priority_floor: int) -> None:
        """Keep the floors a statement found: (kinds, priorities, visible_ats, ids,
        snapshot), the arrays NULL when it probed no kind."""
        kinds, priorities, ats, ids, snapshot = found
        if kinds is None:
            return
        for kind, priority, at, job_id in zip(kinds, priorities, ats, ids, strict=True):
            self._floors[(kind, priority_floor)] = Floor(priority, at, job_id, snapshot)

    def forget(self) -> None:
        """Drop every floor: the next claims probe from the start."""
        self._floors.clear()


class FloorSwitch:
    """Whether claims start from floors: once the jobs table's dead row versions reach
    ``after`` (0: always), by the server's statistics read at most every
    `FLOORS_LOOK` seconds. Thread-safe."""

    def __init__(self, after: int) -> None:
        self.after = after
        self._lock = threading.Lock()
        self._next_look = 0.0
        self._on = after <= 0

    def on(self, dead_row_versions: Callable[[], int | None]) -> bool:
        """Whether to use floors now; ``dead_row_versions`` reads the statistics."""
        if self.after <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._next_look:
                return self._on
            self._next_look = now + FLOORS_LOOK
        dead = dead_row_versions()
        self._on = dead is not None and dead >= self.after
        return self._on
