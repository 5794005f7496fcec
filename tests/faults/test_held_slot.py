"""A replication slot left behind by a standby that ran with hot_standby_feedback holds back
the xmin horizon of every database, with nothing left to move it: the vacuum reading names
the slot, the warning says to reconnect the standby or drop the slot, and the metrics
count it. A private
primary (its standby needs a replication connection the shared server's pg_hba refuses)."""

from __future__ import annotations

import contextlib
import uuid

import psycopg
from prometheus_client import CollectorRegistry

from tests.faults.server import ThrowawayServer
from tests.scaling.standby import StandbyServer
from tests.support import wait_until
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
