"""A replication slot left behind by a standby that ran with hot_standby_feedback holds back
the xmin horizon of every database, with nothing left to move it: the vacuum reading names
the slot, the warning says to reconnect the standby or drop the slot, and the metrics
count it. A private
primary (its standby needs a replication connection the shared server's pg_hba refuses)."""

from __future__ import annotations

import contextlib
import uuid

import psycopg
import pytest
from prometheus_client import CollectorRegistry

from tests.faults.server import ThrowawayServer
from tests.scaling.standby import StandbyServer
from tests.support import wait_until
from venturi.bench.horizon import HeldHorizonBench
from venturi.bench.standby import LeftSlot
from venturi.bench.support import BenchFailure, BenchSettings
from venturi.metrics import VacuumCollector
from venturi.prefix import Prefix
from venturi.store.postgres import PostgresStore
from venturi.upkeep import HorizonHolder


def slot_xmin(dsn: str, slot: str) -> tuple[object, bool] | None:
    """The slot's (xmin, active) once it holds an xmin."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT xmin, active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    return (row[0], bool(row[1])) if row and row[0] is not None else None


def test_an_inactive_slot_holding_the_horizon_is_named_with_its_fix(
    own_server: ThrowawayServer,
) -> None:
    slot = f"venturi_left_{uuid.uuid4().hex[:8]}"
    store = PostgresStore.from_dsn(own_server.dsn, Prefix(f"slot_{uuid.uuid4().hex[:8]}"))
    standby: StandbyServer | None = None
    with psycopg.connect(own_server.dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        standby = StandbyServer(own_server)
        standby.write_conf(
            {
                "primary_slot_name": f"'{slot}'",
                "hot_standby_feedback": "on",
                "wal_receiver_status_interval": "1s",
            }
        )
        standby.start()
        wait_until(
            lambda: (held := slot_xmin(own_server.dsn, slot)) and held[1],
            what="the standby's feedback setting the slot's xmin",
        )
        standby.destroy()  # the standby is gone; its slot keeps the xmin
        standby = None
        wait_until(
            lambda: (held := slot_xmin(own_server.dsn, slot)) and not held[1],
            what="the slot inactive with its xmin",
        )

        def named() -> HorizonHolder | None:
            holders = store.vacuum_health(100).holders
            return next((h for h in holders if h.kind == "slot" and h.name == slot), None)

        found = wait_until(named, what="the slot among the holders")
        assert found.state == "inactive" and found.seconds is None and found.xmin_age >= 0
        # Nothing else holds this private server's horizon: the slot is its oldest holder.
        held_by = slot_xmin(own_server.dsn, slot)
        assert held_by is not None and store.horizon_holder() == str(held_by[0])
        [line] = [w for w in store.vacuum_health(100).warnings() if repr(slot) in w]
        assert f"replication slot {slot!r} (inactive) holds it" in line
        assert f"pg_drop_replication_slot('{slot}')" in line
        registry = CollectorRegistry()
        registry.register(VacuumCollector(store, max_age=0))
        assert (registry.get_sample_value("venturi_horizon_inactive_slots") or 0) >= 1
        held = registry.get_sample_value("venturi_horizon_held_transactions")
        assert held is not None and held >= found.xmin_age
    finally:
        if standby is not None:
            standby.destroy()
        store.close()
        with (
            psycopg.connect(own_server.dsn, autocommit=True) as admin,
            contextlib.suppress(psycopg.errors.UndefinedObject),
        ):
            admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def test_the_bench_holds_the_horizon_with_a_slot_its_stopped_standby_left(
    own_server: ThrowawayServer,
) -> None:
    """`venturi bench --workload held-horizon --held-slot`: the slot holds the horizon
    through the slot side's rounds (a vacuum removes none of the versions deleted after
    it), every job of those rounds runs once, and the check fails once the slot is gone."""
    with (own_server.data / "pg_hba.conf").open("a") as hba:
        hba.write("host replication postgres 127.0.0.1/32 trust\n")
    own_server.reload()
    slot = LeftSlot(own_server.dsn)
    table = f"slot_held_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(own_server.dsn, autocommit=True) as observer:

        def dead_after_vacuum() -> int:
            observer.execute(f"VACUUM {table}")
            observer.execute("SELECT pg_stat_force_next_flush()")
            row = observer.execute(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", (table,)
            ).fetchone()
            assert row is not None
            return int(row[0])

        try:
            slot.taken(observer)
            observer.execute(f"CREATE TABLE {table} AS SELECT generate_series(1, 1000) AS n")
            observer.execute(f"DELETE FROM {table}")
            assert dead_after_vacuum() >= 1000  # the slot's xmin keeps every deleted version
            slot.check(observer, "held-horizon, slot")  # still held: passes
        finally:
            slot.close()
        assert dead_after_vacuum() == 0  # the slot dropped: the next vacuum removes them
        with pytest.raises(BenchFailure, match="the horizon was not held for the whole run"):
            slot.check(observer, "held-horizon, slot")
    settings = BenchSettings.quick(own_server.dsn, held_slot=True)
    bench = HeldHorizonBench(settings)
    try:
        figures = bench.round()
    finally:
        bench.close()
    assert figures["held_horizon.slot.round02"] > 0
    assert figures["held_horizon.slot.ratio"] > 0
    assert figures["held_horizon.slot.pickup_p99.ratio"] > 0
    with psycopg.connect(own_server.dsn) as conn:
        left = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
    assert not [name for (name,) in left if name.startswith("venturi_bench_")]
