"""Every exactly-once check of `venturi bench` is seen to fail: each test stages one
violation in the database (a trigger, or a row changed after a clean round) and expects
`BenchFailure` with that check's own message, so deleting any check fails its test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import LiteralString

import pytest

from venturi.bench.ceilings import Ceilings
from venturi.bench.horizon import HeldSnapshot
from venturi.bench.support import BenchFailure, BenchSettings, compose
from venturi.bench.worker import drive, latency
from venturi.bench.workloads import VenturiBench

JOBS = 20


@pytest.fixture
def bench(database_dsn: str) -> Iterator[VenturiBench]:
    settings = BenchSettings.quick(
        database_dsn,
        rounds=1,
        jobs=JOBS,
        enqueue_jobs=JOBS,
        many_jobs=JOBS,
        batch=5,
        latency_samples=JOBS,
        latency_interval=0.005,
        timeout=60.0,
    )
    instance = VenturiBench(settings)
    yield instance
    instance.conn.execute(
        compose("DROP FUNCTION IF EXISTS {sabotage}, {vanish} CASCADE", **_names(instance))
    )
    instance.close()


@pytest.fixture
def ceilings(bench: VenturiBench) -> Iterator[Ceilings]:
    instance = Ceilings(bench.settings, bench.prefix)
    yield instance
    instance.close()


def _names(bench: VenturiBench) -> dict[str, str]:
    """The bench's prefix, its ceiling table and the trigger functions a test may add."""
    prefix = bench.prefix
    return {
        "prefix": prefix,
        "raw": f"{prefix}_raw",
        "sabotage": f"{prefix}_sabotage",
        "vanish": f"{prefix}_vanish",
    }


def _sabotage(
    bench: VenturiBench,
    body: LiteralString,
    trigger: LiteralString,
    function: LiteralString = "sabotage",
) -> None:
    """Create the PL/pgSQL trigger function ``{function}`` from ``body``, then ``trigger``
    (a CREATE TRIGGER naming it); both may name ``{jobs}``, ``{journal}`` and ``{raw}``."""
    create = "CREATE FUNCTION {" + function + "}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    bench.conn.execute(compose(create + body + " END $$", **_names(bench)))
    bench.conn.execute(compose(trigger, **_names(bench)))


@pytest.fixture
def phantom(bench: VenturiBench) -> VenturiBench:
    """Each enqueue of job 0 adds a copy at priority 1 (so it is claimed first), and the
    copy's completion deletes it: one extra handler run that the tables never show."""
    _sabotage(
        bench,
        "DELETE FROM {jobs} WHERE id = NEW.id; RETURN NULL;",
        "CREATE TRIGGER vanish AFTER UPDATE ON {jobs} FOR EACH ROW"
        " WHEN (NEW.priority = 1 AND NEW.status = 'completed') EXECUTE FUNCTION {vanish}()",
        "vanish",
    )
    _sabotage(
        bench,
        "INSERT INTO {jobs} (id, kind, payload, priority)"
        " VALUES (gen_random_uuid(), NEW.kind, NEW.payload, 1); RETURN NULL;",
        "CREATE TRIGGER phantom AFTER INSERT ON {jobs} FOR EACH ROW"
        " WHEN (NEW.priority = 0 AND NEW.payload ->> 'n' = '0') EXECUTE FUNCTION {sabotage}()",
    )
    return bench


@pytest.fixture
def doubled_journal(bench: VenturiBench) -> VenturiBench:
    """Every journal row a settlement writes is written twice."""
    _sabotage(
        bench,
        "INSERT INTO {journal} (job_id, kind, run_no, outcome)"
        " VALUES (NEW.job_id, NEW.kind, NEW.run_no, NEW.outcome); RETURN NULL;",
        "CREATE TRIGGER doubled AFTER INSERT ON {journal} FOR EACH ROW"
        " WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION {sabotage}()",
    )
    return bench


# -- venturi's workloads -----------------------------------------------------------------


def _round(bench: VenturiBench, workload: str) -> Callable[[int], dict[str, float]]:
    """One round of ``workload`` at a given concurrency: drain, latency, processes (one
    worker process, as `venturi bench --processes 1` drives it) or deployed_latency (the
    latency of a worker in a process of its own)."""
    if workload == "processes":
        return lambda concurrency: drive(bench, 1, concurrency, JOBS)
    if workload == "deployed_latency":
        return lambda concurrency: latency(bench, concurrency)
    step: Callable[[int], dict[str, float]] = getattr(bench, workload)
    return step


@pytest.mark.parametrize("workload", ["enqueue_one", "enqueue_many"])
def test_an_extra_pending_row_after_enqueueing_fails_the_pending_count(
    phantom: VenturiBench, workload: str
) -> None:
    step: Callable[[], dict[str, float]] = getattr(phantom, workload)
    with pytest.raises(BenchFailure, match=f"{JOBS + 1} pending jobs, wanted {JOBS}"):
        step()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workload", ["drain", "latency", "deployed_latency"])
def test_a_duplicated_execution_fails_the_ledger(phantom: VenturiBench, workload: str) -> None:
    with pytest.raises(BenchFailure, match=r"jobs \[0\] ran more than once"):
        _round(phantom, workload)(4)


@pytest.mark.timeout(180)
def test_a_duplicated_execution_fails_the_worker_processes_run_count(
    phantom: VenturiBench,
) -> None:
    with pytest.raises(BenchFailure, match=f"handlers ran {JOBS + 1} times for {JOBS} jobs"):
        _round(phantom, "processes")(4)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workload", ["drain", "latency", "processes", "deployed_latency"])
def test_a_journal_row_written_twice_during_a_round_fails_verify(
    doubled_journal: VenturiBench, workload: str
) -> None:
    with pytest.raises(BenchFailure, match=f"journal rows {2 * JOBS}, distinct jobs {JOBS}"):
        _round(doubled_journal, workload)(4)


def _drained(bench: VenturiBench) -> VenturiBench:
    """A clean round: every job ran once, and the checks pass."""
    bench.drain(4)
    bench.verify(JOBS, "drain c4")
    return bench


# (what is staged after a clean round, the SQL, the complaint `verify` must make)
STAGED_AFTER_A_ROUND: list[tuple[str, LiteralString, str]] = [
    (
        "completed_on_a_second_claim",
        "UPDATE {jobs} SET run_count = 2 WHERE payload ->> 'n' = '3'",
        f"{JOBS - 1} completed on a first claim, {JOBS} touched",
    ),
    (
        "a_stray_job_left_claimed",
        "INSERT INTO {jobs} (id, kind, payload, status, run_count)"
        " VALUES (gen_random_uuid(), 'bench.noop', '{{}}', 'claimed', 1)",
        f"{JOBS} completed on a first claim, {JOBS + 1} touched",
    ),
    (
        "a_row_left_pending",
        "INSERT INTO {jobs} (id, kind, payload) VALUES (gen_random_uuid(), 'bench.noop', '{{}}')",
        "1 pending, backlog was 0",
    ),
    (
        "a_missing_journal_row",
        "DELETE FROM {journal} WHERE id = (SELECT min(id) FROM {journal})",
        f"journal rows {JOBS - 1}, distinct jobs {JOBS - 1}",
    ),
    (
        "a_journal_row_written_twice",
        "INSERT INTO {journal} (job_id, kind, run_no, outcome)"
        " SELECT job_id, kind, run_no, outcome FROM {journal} ORDER BY id LIMIT 1",
        f"journal rows {JOBS + 1}, distinct jobs {JOBS}",
    ),
    (
        "a_journal_row_that_is_no_completion",
        "UPDATE {journal} SET outcome = 'retried' WHERE id = (SELECT min(id) FROM {journal})",
        f"journal rows {JOBS}, distinct jobs {JOBS}",
    ),
]


@pytest.mark.parametrize(
    ("staged", "complaint"),
    [case[1:] for case in STAGED_AFTER_A_ROUND],
    ids=[case[0] for case in STAGED_AFTER_A_ROUND],
)
def test_verify_reports_each_broken_promise(
    bench: VenturiBench, staged: LiteralString, complaint: str
) -> None:
    _drained(bench).conn.execute(compose(staged, bench.prefix))
    with pytest.raises(BenchFailure, match=complaint):
        bench.verify(JOBS, "drain c4")


# -- the raw-SQL ceilings ------------------------------------------------------------------


@pytest.mark.parametrize("ceiling", ["insert_notify", "multi_insert", "copy"])
def test_a_lost_insert_fails_the_ceilings_row_check(
    bench: VenturiBench, ceilings: Ceilings, ceiling: str
) -> None:
    _sabotage(
        bench,
        "RETURN NULL;",
        "CREATE TRIGGER lose BEFORE INSERT ON {raw} FOR EACH ROW"
        " WHEN (NEW.payload ->> 'n' = '5') EXECUTE FUNCTION {sabotage}()",
    )
    step: Callable[[], dict[str, float]] = getattr(ceilings, ceiling)
    with pytest.raises(BenchFailure, match=f"{JOBS - 1} rows, {JOBS - 1} pending exactly once"):
        step()


# (what goes wrong, the body of a BEFORE UPDATE trigger on the ceiling table, the complaint)
DRAIN_SABOTAGE: list[tuple[str, LiteralString, str]] = [
    (
        "ran_fewer_jobs",  # the last row's update is skipped: it is never taken
        "IF NEW.id = (SELECT max(id) FROM {raw}) THEN RETURN NULL; END IF; RETURN NEW;",
        f"took {JOBS - 1} rows, {JOBS - 1} distinct of {JOBS}",
    ),
    (
        "took_a_row_twice",  # the first take leaves row 1 pending, so it is taken again
        "IF OLD.id = 1 AND OLD.run_count = 0 THEN NEW.status := 'pending'; END IF; RETURN NEW;",
        f"took {JOBS + 1} rows, {JOBS} distinct of {JOBS}",
    ),
    (
        "one_row_taken_twice_and_one_never",  # as many takes as rows, one fewer distinct
        "IF NEW.id = (SELECT max(id) FROM {raw}) THEN RETURN NULL; END IF;"
        " IF OLD.id = 1 AND OLD.run_count = 0 THEN NEW.status := 'pending'; END IF; RETURN NEW;",
        f"took {JOBS} rows, {JOBS - 1} distinct of {JOBS}",
    ),
    (
        "a_row_counted_twice_in_one_take",
        "IF OLD.id = 1 THEN NEW.run_count := 2; END IF; RETURN NEW;",
        f"{JOBS} rows, {JOBS - 1} done exactly once",
    ),
]


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize(
    ("body", "complaint"),
    [case[1:] for case in DRAIN_SABOTAGE],
    ids=[case[0] for case in DRAIN_SABOTAGE],
)
def test_a_broken_ceiling_drain_is_reported(
    bench: VenturiBench, ceilings: Ceilings, body: LiteralString, complaint: str, batch: int
) -> None:
    trigger = "CREATE TRIGGER sabotage BEFORE UPDATE ON {raw} FOR EACH ROW"
    _sabotage(bench, body, trigger + " EXECUTE FUNCTION {sabotage}()")
    with pytest.raises(BenchFailure, match=complaint):
        ceilings.drain(1, batch)


# -- sustained load ------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_a_duplicated_execution_fails_the_sustained_rounds_ledger(phantom: VenturiBench) -> None:
    with pytest.raises(BenchFailure, match=r"jobs \[0\] ran more than once"):
        phantom.sustain("sustained.c16")


@pytest.mark.timeout(180)
def test_a_journal_row_written_twice_fails_the_sustained_rounds_check(
    doubled_journal: VenturiBench,
) -> None:
    with pytest.raises(BenchFailure, match=f"journal rows {2 * JOBS} \\({JOBS} jobs\\)"):
        doubled_journal.sustain("sustained.c16")


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("staged", "complaint"),
    [
        (
            "UPDATE {jobs} SET run_count = 2 WHERE payload ->> 'n' = '3'",
            f"{2 * JOBS - 1} completed on a first claim, 0 unfinished",
        ),
        (
            "INSERT INTO {jobs} (id, kind, payload) VALUES (gen_random_uuid(), 'other', '{{}}')",
            f"{2 * JOBS} completed on a first claim, 1 unfinished",
        ),
        (
            "DELETE FROM {journal} WHERE id = (SELECT min(id) FROM {journal})",
            f"{2 * JOBS} completed on a first claim, 0 unfinished, journal rows {2 * JOBS - 1}",
        ),
    ],
    ids=["completed_on_a_second_claim", "a_row_left_pending", "a_missing_journal_row"],
)
def test_the_next_sustained_round_checks_every_earlier_rounds_jobs(
    bench: VenturiBench, staged: LiteralString, complaint: str
) -> None:
    first = bench.sustain("sustained.c16")
    assert first["sustained.c16.of_first.ratio"] == 1.0
    bench.conn.execute(compose(staged, bench.prefix))
    with pytest.raises(BenchFailure, match=f"wanted {2 * JOBS} jobs completed once: {complaint}"):
        bench.sustain("sustained.c16")


# -- a held horizon ------------------------------------------------------------------------


def test_a_snapshot_released_before_the_held_rounds_end_fails_the_held_horizon_check(
    bench: VenturiBench,
) -> None:
    snapshot = HeldSnapshot(bench.settings.dsn)
    try:
        snapshot.taken(bench.conn)
        snapshot.check(bench.conn, "held-horizon")  # still held: passes
        snapshot.conn.commit()  # the snapshot ends; its session stays
        with pytest.raises(BenchFailure, match="the horizon was not held for the whole run"):
            snapshot.check(bench.conn, "held-horizon")
    finally:
        snapshot.close()


@pytest.mark.timeout(180)
def test_a_duplicated_execution_fails_the_latency_after_sustained_rounds(
    phantom: VenturiBench,
) -> None:
    with pytest.raises(BenchFailure, match=r"jobs \[0\] ran more than once"):
        phantom.latency_in_place("held_horizon.snapshot.latency")


@pytest.mark.timeout(180)
def test_the_latency_after_sustained_rounds_checks_every_earlier_rounds_jobs(
    bench: VenturiBench,
) -> None:
    bench.sustain("held_horizon.snapshot")
    bench.conn.execute(
        compose("UPDATE {jobs} SET run_count = 2 WHERE payload ->> 'n' = '3'", bench.prefix)
    )
    with pytest.raises(BenchFailure, match=f"wanted {2 * JOBS} jobs completed once"):
        bench.latency_in_place("held_horizon.snapshot.latency")
