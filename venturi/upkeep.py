"""What keeps VACUUM from cleaning a prefix's jobs table, and the warnings it calls for.

Every claim and settlement leaves dead row versions that a vacuum removes, but only those
no open snapshot can still see: a session idle in a transaction, a long report, a
replication slot a standby left behind, or a forgotten prepared transaction holds back
the xmin horizon, and until it lets go dead versions pile up and each claim walks past
more of them. `VacuumHealth` is one reading of both (`Queue.vacuum_health`), and names
the holder and the fix, so that `venturi healthcheck`, the dashboard and the metrics
show an operator the cause rather than a slow queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import attrs

# A horizon held this long is warned about: longer than any job's transaction should be.
HELD_AFTER: Final = 300.0
# Dead row versions on the claim path warned about once at least this many, and at least
# this fraction of the live rows, wait for a vacuum (workers vacuum well before).
DEAD_ROWS: Final = 10_000
DEAD_FRACTION: Final = 0.2
# Holders read at most: the oldest decides; a few more help when several hold it.
HOLDERS_READ: Final = 5
UNKNOWN: Final = "unknown"


@attrs.frozen
class HorizonHolder:
    """One holder of the database's xmin horizon: a ``session`` (``name`` its pid), a
    replication ``slot`` (its name) or a ``prepared`` transaction (its gid). ``seconds``
    held and ``state`` are None when unknown: a slot keeps no start time, and without
    pg_read_all_stats another role's session shows neither."""

    kind: str
    name: str
    application_name: str | None
    user: str | None
    state: str | None
    xmin_age: int
    seconds: float | None
    idle_in_transaction: bool | None

    def held_too_long(self, held_after: float) -> bool:
        """Whether to warn: held ``held_after`` seconds or longer, or a slot no standby
        uses (nothing will move its xmin until someone drops it)."""
        if self.kind == "slot":
            return self.state == "inactive"
        return self.seconds is not None and self.seconds >= held_after

    def cause(self) -> str:
        """Who holds the horizon and for how long, in one line."""
        age = f"{self.xmin_age:,} transactions"
        if self.kind == "slot":
            return f"replication slot {self.name!r} ({self.state}) holds it, {age} old"
        held = UNKNOWN if self.seconds is None else _duration(self.seconds)
        # Names other sessions chose, quoted: control characters in them are escaped.
        user = UNKNOWN if self.user is None else repr(self.user)
        if self.kind == "prepared":
            return f"prepared transaction {self.name!r} (user {user}) held it for {held}"
        state = self.state or f"state {UNKNOWN}"
        app = UNKNOWN if self.application_name is None else repr(self.application_name)
        return (
            f"session pid {self.name} (application_name {app}, user {user}, {state}) held it"
            f" for {held}, {age} old"
        )

    def fix(self) -> str:
        """What an operator does about it."""
        if self.kind == "slot":
            return (
                f"reconnect the standby that uses slot {self.name!r}, or drop the slot: "
                f"SELECT pg_drop_replication_slot('{self.name}')"
            )
        if self.kind == "prepared":
            gid = self.name.replace("'", "''")
            return f"COMMIT PREPARED or ROLLBACK PREPARED '{gid}'"
        return (
            f"end the transaction in that application, or SELECT pg_terminate_backend({self.name})"
        )


@attrs.frozen
class VacuumHealth:
    """One reading of the jobs table's dead and live row versions (None before the table
    exists, and ``vacuumed_at`` None if never vacuumed) and the horizon's oldest holders,
    oldest first."""

    dead: int | None
    live: int | None
    vacuumed_at: datetime | None
    holders: tuple[HorizonHolder, ...]

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> VacuumHealth:
        """From the rows of ``sql/vacuum_health.sql``."""
        dead, live, vacuumed_at = rows[0][:3] if rows else (None, None, None)
        holders = tuple(HorizonHolder(*row[3:]) for row in rows if row[3] is not None)
        return cls(dead, live, vacuumed_at, holders)

    @property
    def oldest(self) -> HorizonHolder | None:
        return self.holders[0] if self.holders else None

    @property
    def held_seconds(self) -> float:
        """The longest any holder is known to have held the horizon (0 when none)."""
        return max((h.seconds for h in self.holders if h.seconds is not None), default=0.0)

    @property
    def inactive_slots(self) -> int:
        """Replication slots holding the horizon that no standby uses."""
        return sum(1 for h in self.holders if h.kind == "slot" and h.state == "inactive")

    def held(self, held_after: float = HELD_AFTER) -> list[HorizonHolder]:
        """The holders to warn about, oldest first."""
        return [h for h in self.holders if h.held_too_long(held_after)]

    def dead_rows_piling(self, dead_rows: int = DEAD_ROWS) -> bool:
        """Whether dead row versions wait for a vacuum in numbers to warn about."""
        if self.dead is None:
            return False
        return self.dead >= dead_rows and self.dead >= DEAD_FRACTION * (self.live or 0)

    def warnings(self, held_after: float = HELD_AFTER, dead_rows: int = DEAD_ROWS) -> list[str]:
        """One line per cause, with its fix; empty when vacuum can do its work."""
        lines = [
            f"the xmin horizon is held back, so VACUUM can remove no dead row version newer "
            f"than it: {holder.cause()}; fix: {holder.fix()}"
            for holder in self.held(held_after)
        ]
        if self.dead_rows_piling(dead_rows):
            lines.append(self.dead_rows_warning())
        return lines

    def dead_rows_warning(self) -> str:
        vacuumed = "never" if self.vacuumed_at is None else f"last at {self.vacuumed_at:%c %Z}"
        return (
            f"{self.dead or 0:,} dead row versions in the jobs table ({self.live or 0:,} live;"
            f" vacuumed {vacuumed}) slow every claim; fix: end whatever holds the horizon, "
            "then VACUUM the jobs table (workers and autovacuum do so once nothing holds it)"
        )


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


@attrs.define(eq=False)
class VacuumPace:
    """Where the workers' own vacuuming of a jobs table stands
    (`venturi.worker.vacuuming`): kept by a store and shared with its siblings, so a
    worker started later in the process goes on from it instead of vacuuming at once.
    Workers of one process update it without a lock: a lost update costs one vacuum
    early or late."""

    # Dead row versions the last vacuum left behind (fewer once autovacuum removed some).
    left: int = 0
    # Dead row versions at the latest look.
    seen: int = 0
    # Vacuums in a row that removed less than half of the versions added before them:
    # something holds the horizon, and each such vacuum reads the whole table in vain.
    futile: int = 0
    # The oldest holder of the horizon seen before the last vacuum, if it was futile
    # (`PostgresStore.horizon_holder`): while it still holds, no vacuum is worth running.
    holder: str | None = None
