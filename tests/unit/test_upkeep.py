"""What the vacuum warnings say and when, from readings built by hand (the reading itself
is tested against the server in tests/store/test_vacuum_health.py)."""

from __future__ import annotations

from venturi.upkeep import DEAD_ROWS, HELD_AFTER, HorizonHolder, VacuumHealth


def session(seconds: float | None, state: str | None = "idle in transaction") -> HorizonHolder:
    idle = None if state is None else state.startswith("idle in transaction")
    return HorizonHolder("session", "4242", "reports", "app", state, 1234, seconds, idle)


def slot(state: str) -> HorizonHolder:
    return HorizonHolder("slot", "standby_1", None, None, state, 99_000, None, None)


def test_a_session_warns_once_held_past_the_threshold() -> None:
    assert not session(HELD_AFTER - 1).held_too_long(HELD_AFTER)
    assert session(HELD_AFTER).held_too_long(HELD_AFTER)
    # How long another role's session held it may be hidden: never guessed at.
    assert not session(None, state=None).held_too_long(0.0)


def test_an_inactive_slot_always_warns_and_an_active_one_never() -> None:
    assert slot("inactive").held_too_long(HELD_AFTER)
    assert not slot("active").held_too_long(0.0)


def test_causes_and_fixes_name_the_holder() -> None:
    hostile = HorizonHolder("session", "7", "a\x1b[2Jb", "x\ny", "active", 1, 400.0, False)
    assert "'a\\x1b[2Jb'" in hostile.cause() and "'x\\ny'" in hostile.cause()
    held = session(3725.0)
    assert held.cause() == (
        "session pid 4242 (application_name 'reports', user 'app', idle in transaction) "
        "held it for 1 h 2 min, 1,234 transactions old"
    )
    assert held.fix().endswith("SELECT pg_terminate_backend(4242)")
    hidden = session(None, state=None)
    assert "state unknown) held it for unknown" in hidden.cause()
    assert slot("inactive").cause() == (
        "replication slot 'standby_1' (inactive) holds it, 99,000 transactions old"
    )
    assert "pg_drop_replication_slot('standby_1')" in slot("inactive").fix()
    prepared = HorizonHolder("prepared", "it's", None, "app", "prepared", 5, 90.0, None)
    assert prepared.cause() == """prepared transaction "it's" (user 'app') held it for 90 s"""
    assert prepared.fix() == "COMMIT PREPARED or ROLLBACK PREPARED 'it''s'"


def test_a_reading_without_holders_or_table() -> None:
    empty = VacuumHealth.from_rows([(None,) * 11])
    assert empty == VacuumHealth(None, None, None, ())
    assert empty.oldest is None and empty.held_seconds == 0.0 and empty.warnings(0.0) == []
    assert VacuumHealth.from_rows([]) == empty


def test_dead_rows_warn_past_a_count_and_a_fifth_of_the_live_rows() -> None:
    def health(dead: int, live: int) -> VacuumHealth:
        return VacuumHealth(dead, live, None, ())

    assert not health(DEAD_ROWS - 1, 0).dead_rows_piling()
    assert health(DEAD_ROWS, 5 * DEAD_ROWS).dead_rows_piling()
    assert not health(DEAD_ROWS, 5 * DEAD_ROWS + 1).dead_rows_piling()
    [line] = health(20_000, 1_000).warnings()
    assert line.startswith("20,000 dead row versions in the jobs table (1,000 live;")
    assert "vacuumed never" in line


def test_warnings_list_every_holder_past_the_threshold_oldest_first() -> None:
    reading = VacuumHealth(0, 0, None, (slot("inactive"), session(10.0), session(400.0)))
    assert reading.oldest == slot("inactive") and reading.held_seconds == 400.0
    assert reading.inactive_slots == 1
    lines = reading.warnings(HELD_AFTER)
    assert len(lines) == 2 and "standby_1" in lines[0] and "6 min 40 s" in lines[1]
