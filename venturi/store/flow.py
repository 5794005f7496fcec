"""The store's flow control: declared limits, pausing and resuming kinds, and claims of
kinds with limits. `PostgresStore` inherits these operations."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from venturi.limits import KindLimits, KindState
from venturi.models import SMALLINT_MIN, JobRecord
from venturi.settlements import BatchOutcome, Claim, Settlement
from venturi.store import sqlfiles
from venturi.store.housekeeping import Housekeeping


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
        then claim in statements whose snapshots see every earlier turn's claims. Kinds
        with a key limit are claimed by their own statement (claim_keyed.sql), so the
        others pay nothing to plan the key walk.
        """
        if limit < 1 or not leases:
            return []
        floor = SMALLINT_MIN if priority_floor is None else priority_floor
        jobs: list[JobRecord] = []
        last: psycopg.Cursor[tuple[Any, ...]] | None = None
        # Pipelined, in the transaction that the pipeline's one Sync ends (as in
        # `complete_and_claim`): the lock's reply is the one round trip taken while the
        # kinds' turn is held; the claims go out with the Sync, which commits them.
        with self.connection() as conn:
            with conn.pipeline(), _transaction_unless_autocommit(conn):
                locking = conn.cursor(row_factory=tuple_row)
                locking.execute(self._query("claim_limited_lock"), {"kinds": list(leases)})
                keyed = {kind for kind, has_keys in locking.fetchall() if has_keys}
                groups = [
                    (name, kinds)
                    for name, kinds in (
                        ("claim_limited", [k for k in leases if k not in keyed]),
                        ("claim_keyed", [k for k in leases if k in keyed]),
                    )
                    if kinds
                ]
                for name, kinds in groups:
                    if last is not None:  # the second statement gets what the first left
                        jobs.extend(JobRecord.from_row(row) for row in last.fetchall())
                        last = None
                        if len(jobs) >= limit:
                            break
                    last = conn.cursor(row_factory=tuple_row)
                    params = {
                        "kinds": kinds,
                        "leases": [float(leases[k]) for k in kinds],
                        "priority_floor": floor,
                        "limit": limit - len(jobs),
                        "worker": worker,
                    }
                    last.execute(self._query(name), params)
            if last is not None:
                jobs.extend(JobRecord.from_row(row) for row in last.fetchall())
        return jobs

    def _complete_and_claim(
        self,
        claim: Claim,
        settlement: Settlement,
        kind: str,
        lease: float,
        priority_floor: int | None = None,
    ) -> tuple[BatchOutcome, list[JobRecord]]:
        """Complete one run of ``kind`` (a kind with a concurrency and no key or rate
        limit) and, only if that applied, claim the kind's next due job for the same
        worker in the same transaction: settle_complete.sql, the one completion every
        path writes, then pass_place.sql, pipelined. The run's place passes straight on, never free
        in between, and the kind's claimed jobs never grow. A run fenced out, or whose row
        another session holds locked (``busy``), claims nothing; nor does a kind paused
        or whose limit is now below its claimed jobs.
        """
        completion = completion_params([(claim, settlement)], within_lease=False)
        passing = {
            "id": claim.job_id.to_uuid(),
            "kind": kind,
            "worker": claim.claimed_by,
            "lease": float(lease),
            "priority_floor": SMALLINT_MIN if priority_floor is None else priority_floor,
        }
        # One round trip: on an autocommit connection the statements between two Syncs
        # are one transaction (PostgreSQL's protocol, "Pipelining"), so both go out with
        # the pipeline's one Sync, which commits them; the second claims only when the
        # first applied (it reads the row this transaction wrote). psycopg's
        # transaction() in a pipeline syncs at BEGIN, at COMMIT and at its end: four
        # round trips. A borrowed pool's connection that does not autocommit takes it.
        with self.connection() as conn:
            with conn.pipeline(), _transaction_unless_autocommit(conn):
                completing = conn.cursor(row_factory=tuple_row)
                completing.execute(self._query("settle_complete"), completion)
                claiming = conn.cursor(row_factory=tuple_row)
                claiming.execute(self._query("pass_place"), passing)
            outcome = BatchOutcome.from_rows(completing.fetchall())
            jobs = [JobRecord.from_row(row) for row in claiming.fetchall()]
        return outcome, jobs

    def _query(self, name: str) -> sql.Composed:
        return sqlfiles.query(name, self.prefix)


def _transaction_unless_autocommit(
    conn: psycopg.Connection[Any],
) -> contextlib.AbstractContextManager[Any]:
    """Nothing on an autocommit connection (its pipeline's Sync ends the transaction),
    else an explicit transaction."""
    return contextlib.nullcontext() if conn.autocommit else conn.transaction()


def completion_params(
    items: Sequence[tuple[Claim, Settlement]], *, within_lease: bool
) -> dict[str, Any]:
    """The parameters of settle_complete.sql for completing ``items`` (``within_lease``:
    only while each run's lease still holds, for a run completing in its own transaction)."""
    return {
        "ids": [c.job_id.to_uuid() for c, _ in items],
        "owners": [c.claimed_by for c, _ in items],
        "runs": [c.run_count for c, _ in items],
        "attachments": [s.attachment_json for _, s in items],
        "notes": [s.note for _, s in items],
        "facts": [s.facts_json for _, s in items],
        "within_lease": within_lease,
    }


def lease_params(leases: Sequence[tuple[Claim, float]]) -> dict[str, Any]:
    """The parameters of extend_lease.sql for renewing each claim of ``leases`` for its
    number of seconds."""
    return {
        "ids": [c.job_id.to_uuid() for c, _ in leases],
        "owners": [c.claimed_by for c, _ in leases],
        "runs": [c.run_count for c, _ in leases],
        "leases": [float(seconds) for _, seconds in leases],
    }
