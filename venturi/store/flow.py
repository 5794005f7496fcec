"""The store's flow control: declared limits, pausing and resuming kinds, and claims of
kinds with limits. `PostgresStore` inherits these operations."""

from __future__ import annotations

from collections.abc import Sequence

from venturi.limits import KindLimits, KindState
from venturi.models import SMALLINT_MIN, JobRecord
from venturi.store import sqlfiles
from venturi.store.housekeeping import Housekeeping
from venturi.store.statements import run_statement


class FlowControl(Housekeeping):
    """Operations of `PostgresStore` on the kinds table, over its pool and prefix."""

    def declare_kinds(self, limits: Sequence[KindLimits], declared_by: str) -> None:
        """Record these kinds' limits as ``declared_by``'s: the latest declaration wins."""
        if not limits:
            return
        self._fetch(
            "declare_kinds",
            {
                "kinds": [d.kind for d in limits],
                "concurrencies": [d.concurrency for d in limits],
                "key_concurrencies": [d.key_concurrency for d in limits],
                "rate_limits": [None if d.rate is None else d.rate.count for d in limits],
                "rate_windows": [None if d.rate is None else d.rate.window for d in limits],
                "declared_by": declared_by,
            },
        )

    def pause_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Pause ``kinds`` for every worker; returns those that were not paused yet."""
        return [row[0] for row in self._fetch("pause_kinds", {"kinds": list(kinds)})]

    def resume_kinds(self, kinds: Sequence[str]) -> list[str]:
        """Resume ``kinds`` (waking idle workers); returns those that were paused."""
        return [row[0] for row in self._fetch("resume_kinds", {"kinds": list(kinds)})]

    def kinds(self) -> list[KindState]:
        """Every kind with a row of flow control: pause, declared limits, running jobs."""
        return [KindState.from_row(row) for row in self._fetch("kinds")]

    def seconds_until_rate_room(self, kinds: Sequence[str]) -> float | None:
        """Database-clock seconds until one of ``kinds`` whose rate is used up may start
        a run again (0: one may now); None when none of them has a rate."""
        if not kinds:
            return None
        rows = self._fetch("rate_room", {"kinds": list(kinds)})
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    def claim_limited(
        self,
        worker: str,
        leases: dict[str, float],
        limit: int,
        priority_floor: int | None = None,
    ) -> list[JobRecord]:
        """Claim up to ``limit`` jobs of kinds with limits, within their room.

        One short transaction: lock the kinds' rows (claimers of one kind take turns),
        then claim in a statement whose snapshot sees every earlier turn's claims.
        """
        if limit < 1 or not leases:
            return []
        params = {
            "kinds": list(leases),
            "leases": [float(v) for v in leases.values()],
            "priority_floor": SMALLINT_MIN if priority_floor is None else priority_floor,
            "limit": limit,
            "worker": worker,
        }
        with self.connection() as conn, conn.transaction():
            run_statement(conn, sqlfiles.query("claim_limited_lock", self.prefix), params)
            rows = run_statement(conn, sqlfiles.query("claim_limited", self.prefix), params)
        return [JobRecord.from_row(row) for row in rows]
