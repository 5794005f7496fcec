"""The store's operations for schedules and retention: syncing schedule rows, firing
slots, triggering runs, and pruning finished jobs. `PostgresStore` inherits them."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import psycopg
from ulid import ULID

from venturi.errors import ConfigurationError
from venturi.retention import Retention
from venturi.schedules import Firing, Schedule, ScheduleInfo, ScheduleState
from venturi.store import sqlfiles
from venturi.store.housekeeping import Housekeeping
from venturi.store.ids import new_id
from venturi.store.statements import run_statement

# After each batch a prune rests this many times as long as the batch took, so it takes
# at most a fifth of what it competes with workers for (`venturi bench --workload prune`:
# with a rest of 2 a c16 drain kept 0.82x of its throughput, median of 5 rounds).
PRUNE_REST: Final = 4.0


class Scheduling(Housekeeping):
    """Schedule bookkeeping and pruning over the store's pool and prefix."""

    def sync_schedules(self, schedules: Sequence[Schedule]) -> dict[str, str]:
        """Make the schedule rows match ``schedules``: add new ones, update changed ones
        (a changed timing starts at its next slot after now), mark the others inactive.
        Returns what happened to each row written ('added', 'changed', 'retired')."""
        now = self.now()
        rows = self._fetch(
            "schedules_sync",
            {
                "names": [s.name for s in schedules],
                "kinds": [s.kind for s in schedules],
                "expressions": [s.timing.expression for s in schedules],
                "zones": [s.timing.zone for s in schedules],
                "payloads": [s.payload_json for s in schedules],
                "with_slots": [s.with_slot for s in schedules],
                "priorities": [s.priority for s in schedules],
                "max_attempts": [s.max_attempts for s in schedules],
                "catch_ups": [s.catch_up for s in schedules],
                "max_catch_ups": [s.max_catch_up for s in schedules],
                "fingerprints": [s.fingerprint for s in schedules],
                "next_slots": [s.timing.after(now) for s in schedules],
            },
        )
        return {name: change for name, change in rows}

    def schedule_states(self, names: Sequence[str]) -> tuple[dict[str, ScheduleState], datetime]:
        """The rows of the named schedules, and the database's clock."""
        rows = self._fetch("schedules_due", {"names": list(names)})
        states = {r[0]: ScheduleState(*r[:4]) for r in rows if r[0] is not None}
        return states, rows[0][4]

    def fire_schedule(self, schedule: Schedule, expected: datetime, firing: Firing) -> int | None:
        """Enqueue ``firing.slots`` and move the row on to ``firing.next_slot`` in one
        statement, if its next slot is still ``expected``; returns the jobs inserted, or
        None when another worker fired first (nothing written). A built-in schedule
        only moves on: its slots start work in the worker, not jobs."""
        slots = [] if schedule.builtin else firing.slots
        rows = self._fetch(
            "schedule_fire",
            {
                "name": schedule.name,
                "fingerprint": schedule.fingerprint,
                "expected": expected,
                "last_slot": firing.slots[-1] if firing.slots else None,
                "next_slot": firing.next_slot,
                "kind": schedule.kind,
                "priority": schedule.priority,
                "max_attempts": schedule.max_attempts,
                "concurrency_key": schedule.concurrency_key,
                "ids": [new_id().to_uuid() for _ in slots],
                "payloads": [schedule.job_payload_json(slot) for slot in slots],
            },
        )
        fired, jobs = rows[0]
        return int(jobs) if fired else None

    def schedules(self) -> list[ScheduleInfo]:
        return [ScheduleInfo.from_row(row) for row in self._fetch("schedules_list")]

    def trigger_schedule(self, name: str, concurrency_key: str | None = None) -> ULID | None:
        """Enqueue one run of schedule ``name`` now (its job keyed ``concurrency_key``);
        None when there is no such schedule. Raises `ConfigurationError`, writing
        nothing, when its kind has a key limit and no key is given."""
        params = {"id": new_id().to_uuid(), "name": name, "concurrency_key": concurrency_key}
        rows = self._fetch("schedule_trigger", params)
        if not rows:
            return None
        job_id, needs_key = rows[0]
        if needs_key:
            raise ConfigurationError(
                f"schedule {name!r}: its kind has key_concurrency, so its job needs a "
                "concurrency key, which the schedule's declaration in the application's "
                "code gives; trigger it through the application's queue (queue.trigger, "
                "or its embedded CLI: flask venturi, manage.py venturi)"
            )
        return ULID.from_uuid(job_id)

    def prune(self, retention: Retention, stopping: threading.Event) -> dict[str, int] | None:
        """Delete finished jobs past ``retention`` in batches of ``retention.batch``, each
        its own short transaction and followed by a rest (`PRUNE_REST`), until none is
        left or ``stopping`` is set. Returns the count per status, or None when another
        session is pruning this prefix."""
        key = {"key": self.prefix.prune_lock_key}
        with self.connection() as conn:
            if not run_statement(conn, sqlfiles.query("prune_lock", self.prefix), key)[0][0]:
                self._end_transaction(conn)
                return None
            try:
                return {
                    status: self._prune_status(conn, status, keep, retention.batch, stopping)
                    for status, keep in retention.kept().items()
                    if keep is not None
                }
            finally:
                run_statement(conn, sqlfiles.query("prune_unlock", self.prefix), key)
                self._end_transaction(conn)

    def _prune_status(
        self,
        conn: psycopg.Connection[Any],
        status: str,
        keep: float,
        batch: int,
        stopping: threading.Event,
    ) -> int:
        query = sqlfiles.query("prune", self.prefix)
        params: dict[str, Any] = {"status": status, "keep": keep, "after": None, "batch": batch}
        total = 0
        while not stopping.is_set():
            started = time.monotonic()
            deleted, params["after"] = run_statement(conn, query, params)[0]
            self._end_transaction(conn)
            total += int(deleted)
            if deleted < batch:
                break
            stopping.wait((time.monotonic() - started) * PRUNE_REST)
        return total

    @staticmethod
    def _end_transaction(conn: psycopg.Connection[Any]) -> None:
        # A borrowed pool's connections may not autocommit: commit each batch by hand so
        # that no transaction outlives it (the session's advisory lock survives commits).
        if not conn.autocommit:
            conn.commit()
