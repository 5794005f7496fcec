"""Where each kind's next claim may start reading the claim index.

A claim statement reports, for each kind it probed, the first pending job it found (in
claim order: priority first, then visible_at, then id) and the snapshot it found it in
(sql/fragments/floors_found.sql). The next claim of that kind starts its probe there,
and finds the jobs made pending since by the pended_xid the snapshot could not see
(sql/fragments/pending_levels.sql, migration 0017). A floor is a hint checked by the
statement that uses it: any floor, however old, gives the same claims.

Floors are kept per store, for every connection of its pool: a snapshot speaks of the
transactions of one server, whichever of its sessions took it, so a connection opened
later (a pool's replacement, a new worker of the process) starts where the others got.
Each statement names its server (sql/fragments/floor_server.sql) and ignores floors found
on another: a promoted standby, a server restored from a backup or restarted after a
crash starts without any. And per kind and priority floor: a probe with a priority
floor says nothing of the jobs below it.
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
FLOOR_COLUMNS: Final = 6
# Claims start from floors once the jobs table holds this many dead row versions: more
# than the workers' vacuum lets pile up (it runs every 10,000 or so), so in normal
# operation claims are the plain ones, and floors serve while vacuum cannot remove
# anything (a held-back xmin horizon). A claim from floors costs about as much more as
# stepping over 3,000 dead entries of the claim index (`venturi bench --workload
# held-horizon`).
FLOORS_AFTER_DEAD_ROWS: Final = 100_000
# Once a vacuum of the workers removed little of what it found (`VacuumPace.futile`:
# something holds the horizon, so no vacuum will remove the versions to come either),
# claims start from floors from this many.
FLOORS_AFTER_HELD_DEAD_ROWS: Final = 10_000
# Claims start from floors at once, whatever the statistics say, while the oldest holder
# of the xmin horizon is this many transactions old: every row version that died since
# it began stays, and so does its entry in the claim index, which index scans cannot
# mark dead either. A queue's own transactions are a few transactions old at most (a
# claim or settlement holds its snapshot for milliseconds); a held snapshot or slot
# passes this within a second of a busy drain, before the statistics (reported at most
# once a second) count what it kept, and before a vacuum could find it futile.
FLOORS_HELD_AGE: Final = 100
# Seconds between looks at the dead row versions and the horizon, from the claims.
FLOORS_LOOK: Final = 0.25


@attrs.frozen
class Floor:
    """The first pending job of a kind a statement found (None: it found none), and that
    statement's snapshot (pg_snapshot as text)."""

    priority: int | None
    visible_at: datetime | None
    id: UUID | None
    snapshot: str


class ClaimFloors:
    """The latest floor of each (kind, priority floor) a store's statements found, and
    the server they found them on. Thread-safe: any floor of the server is a valid one,
    so claims racing to report theirs may leave either."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._floors: dict[tuple[str, int], Floor] = {}
        self._server: str | None = None

    def params(self, kinds: Sequence[str], priority_floor: int) -> dict[str, Any]:
        """The floor parameters of a claim of ``kinds`` at ``priority_floor``."""
        with self._lock:
            known = [(k, self._floors.get((k, priority_floor))) for k in kinds]
            server = self._server
        found = [(k, f) for k, f in known if f is not None]
        return {
            "floor_kinds": [k for k, _ in found],
            "floor_priorities": [f.priority for _, f in found],
            "floor_ats": [f.visible_at for _, f in found],
            "floor_ids": [f.id for _, f in found],
            "floor_snapshots": [f.snapshot for _, f in found],
            "floor_server": server,
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
        snapshot, server), the arrays NULL when it probed no kind. Floors found on
        another server than the kept ones replace them all."""
        kinds, priorities, ats, ids, snapshot, server = found
        with self._lock:
            if server != self._server:
                self._floors.clear()
                self._server = server
            if kinds is None:
                return
            for kind, priority, at, job_id in zip(kinds, priorities, ats, ids, strict=True):
                self._floors[(kind, priority_floor)] = Floor(priority, at, job_id, snapshot)

    def forget(self) -> None:
        """Drop every floor: the next claims probe from the start."""
        with self._lock:
            self._floors.clear()


class FloorSwitch:
    """Whether claims start from floors: once the jobs table's dead row versions reach
    ``after`` (0: always); or `FLOORS_AFTER_HELD_DEAD_ROWS` once the workers' vacuum
    found the horizon held; or at once while the horizon's oldest holder is
    `FLOORS_HELD_AGE` transactions old. Looked at every `FLOORS_LOOK` seconds at most.
    Thread-safe."""

    def __init__(self, after: int) -> None:
        self.after = after
        self._lock = threading.Lock()
        self._next_look = 0.0
        self._on = after <= 0

    def on(self, look: Callable[[], FloorLook | None], *, held: bool = False) -> bool:
        """Whether to use floors now; ``look`` reads the statistics and the horizon, and
        ``held`` says whether the last vacuum found the horizon held."""
        if self.after <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._next_look:
                return self._on
            self._next_look = now + FLOORS_LOOK
        self._on = self.decide(look(), held=held)
        return self._on

    def decide(self, look: FloorLook | None, *, held: bool) -> bool:
        """Whether ``look`` (None: no jobs table yet) calls for floors."""
        if look is None:
            return False
        if look.holder_age is not None and look.holder_age >= FLOORS_HELD_AGE:
            return True
        after = min(self.after, FLOORS_AFTER_HELD_DEAD_ROWS) if held else self.after
        return look.dead >= after


@attrs.frozen
class FloorLook:
    """What `FloorSwitch` decides by (sql/floor_look.sql): the jobs table's dead row
    versions by the server's statistics, and the age in transactions of the oldest
    holder of the xmin horizon (None: none seen)."""

    dead: int
    holder_age: int | None
