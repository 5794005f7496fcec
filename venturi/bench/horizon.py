"""The "held-horizon" workload: sustained rounds while something holds back the xmin
horizon, against the same rounds while nothing does.

A snapshot that stays open (a long report, a session idle in a transaction) keeps every
row version deleted after it: VACUUM can remove none, and a claim walks past the dead
entries that every earlier claim left in the pending index. Each call of `round` runs
``held_rounds`` sustained rounds (`VenturiBench.sustain`: ``jobs`` jobs enqueued at once
and drained at concurrency 16, nothing deleted between rounds) into one prefix with
nothing held, then the pick-up latency there; then opens a REPEATABLE READ snapshot and
runs as many rounds into a second prefix, and the latency there, before closing it.
With ``held_slot``, as many rounds then run into a third prefix while a replication
slot holds the horizon instead, left by a standby that ran with hot_standby_feedback and
was stopped (`venturi.bench.standby`). The prefixes start empty at each call. The
snapshot and the slot are checked to have held the horizon from their first round to
their last.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Final

import psycopg

from venturi.bench.standby import LeftSlot
from venturi.bench.support import BenchSettings, HorizonHold
from venturi.bench.workloads import VenturiBench

SNAPSHOT_APPLICATION: Final = "venturi-bench-held-snapshot"

_HOLDER_XMIN: Final = "SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = %s"


class HeldSnapshot(HorizonHold):
    """A REPEATABLE READ transaction, on a connection of its own, that has read: its
    snapshot holds back the horizon of every table of the database until `close`."""

    holder = "the held snapshot"

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, application_name=SNAPSHOT_APPLICATION)
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.conn.execute("SELECT 1")  # the transaction's snapshot is taken here
        self.pid = self.conn.info.backend_pid

    def current_xmin(self, observer: psycopg.Connection[Any]) -> str | None:
        row = observer.execute(_HOLDER_XMIN, (self.pid,)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self.conn.close()


class HeldHorizonBench:
    """The prefixes of the held-horizon workload: rounds with nothing held, the same
    rounds under a held snapshot, and (``held_slot``) under a slot left behind."""

    def __init__(self, settings: BenchSettings) -> None:
        self.settings = settings
        self.unheld = VenturiBench(settings, "hu")
        self.held = VenturiBench(settings, "hh")
        self.slotted = VenturiBench(settings, "hs") if settings.held_slot else None

    def close(self) -> None:
        try:
            self.unheld.close()
        finally:
            try:
                self.held.close()
            finally:
                if self.slotted is not None:
                    self.slotted.close()

    def round(self) -> dict[str, float]:
        self.unheld.restart_sustained()
        figures = self._rounds(self.unheld, "held_horizon.unheld")
        sides: list[tuple[VenturiBench, str, Callable[[str], HorizonHold]]] = [
            (self.held, "held_horizon.snapshot", HeldSnapshot)
        ]
        if self.slotted is not None:
            sides.append((self.slotted, "held_horizon.slot", LeftSlot))
        for bench, side, hold in sides:
            figures |= self._held_rounds(bench, side, hold)
            figures |= self._ratios(figures, side)
        return figures

    def _held_rounds(
        self, bench: VenturiBench, side: str, hold: Callable[[str], HorizonHold]
    ) -> dict[str, float]:
        """`_rounds` into ``bench``'s emptied prefix while what ``hold`` makes holds the
        horizon, checked to hold it from the first round to the last."""
        bench.restart_sustained()
        held = hold(self.settings.dsn)
        try:
            held.taken(bench.conn)
            figures = self._rounds(bench, side)
            held.check(bench.conn, f"held-horizon, {side}")
        finally:
            held.close()
        return figures

    @staticmethod
    def _ratios(figures: dict[str, float], side: str) -> dict[str, float]:
        """A held side's median and last round against the unheld median, and its
        pick-up p99 against the unheld one."""
        unheld = figures["held_horizon.unheld.c16"]
        return {
            f"{side}.ratio": figures[f"{side}.c16"] / unheld,
            f"{side}.last.ratio": figures[f"{side}.last"] / unheld,
            f"{side}.pickup_p99.ratio": figures[f"{side}.latency_p99_ms"]
            / figures["held_horizon.unheld.latency_p99_ms"],
        }

    def _rounds(self, bench: VenturiBench, side: str) -> dict[str, float]:
        """``held_rounds`` sustained rounds and the latency after them: the rounds' median
        rate, the last round's, each round's, the dead row versions after the last, and
        the latency's p50 and p99."""
        rates: list[float] = []
        figures: dict[str, float] = {}
        for index in range(self.settings.held_rounds):
            round_figures = bench.sustain(side)
            rates.append(round_figures[side])
            figures[f"{side}.round{index + 1:02d}"] = round_figures[side]
            figures[f"{side}.dead_rows"] = round_figures[f"{side}.dead_rows"]
        latency = bench.latency_in_place(f"{side}.latency")
        figures[f"{side}.c16"] = statistics.median(rates)
        figures[f"{side}.last"] = rates[-1]
        figures[f"{side}.latency_p50_ms"] = latency[f"{side}.latency.p50"]
        figures[f"{side}.latency_p99_ms"] = latency[f"{side}.latency.p99"]
        return figures
