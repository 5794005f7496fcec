"""`venturi healthcheck` and the metrics report what keeps VACUUM from cleaning the jobs
table: a session holding back the xmin horizon (named by its pid), and dead rows piling
up. Other tests share the server, so each test looks for its own session's pid."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from click.testing import Result

import venturi
from tests.cli.conftest import Invoke, free_port, sample, scrape
from tests.support import Probe, wait_until
from venturi.metrics import QueueMetrics


@pytest.fixture
def snapshot(database_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A session holding a REPEATABLE READ snapshot."""
    with psycopg.connect(database_dsn, application_name="nightly-report") as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        yield conn


def output_with(invoke: Invoke, text: str, *options: str) -> Result | None:
    """`venturi healthcheck OPTIONS` if its output holds ``text``."""
    result = invoke("healthcheck", *options)
    return result if text in result.output else None


def vacuum_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line[5:].startswith("vacuum:")]


def test_healthcheck_names_the_session_holding_the_horizon_and_stays_healthy(
    invoke: Invoke, queue: venturi.Queue, snapshot: psycopg.Connection[tuple[object, ...]]
) -> None:
    pid = snapshot.info.backend_pid
    mine = f"session pid {pid} (application_name 'nightly-report'"
    result = wait_until(
        lambda: output_with(invoke, mine, "--horizon-after", "0s"),
        what="a warning naming the held session",
    )
    assert result.exit_code == 0, result.output  # the cause lies outside the queue
    [line] = [line for line in vacuum_lines(result.output) if mine in line]
    assert line.startswith("WARN vacuum: the xmin horizon is held back")
    assert "idle in transaction" in line and f"pg_terminate_backend({pid})" in line
    # Held for less than the default five minutes: no warning about it (the ok line may
    # name it as the oldest holder).
    calm = invoke("healthcheck")
    assert calm.exit_code == 0
    assert not any(line.startswith("WARN") and mine in line for line in calm.output.splitlines())
    strict = invoke("healthcheck", "--horizon-after", "0s", "--strict")
    assert strict.exit_code == 1
    assert any(
        line.startswith("FAIL vacuum: ") and mine in line for line in strict.output.splitlines()
    )
    snapshot.rollback()
    wait_until(
        lambda: mine not in invoke("healthcheck", "--horizon-after", "0s").output,
        what="the warning gone once the session let go",
    )


def test_healthcheck_warns_of_dead_rows_past_the_threshold(
    invoke: Invoke, queue: venturi.Queue, database_dsn: str
) -> None:
    probe = Probe(database_dsn, queue.prefix)
    try:
        probe.rows("ALTER TABLE {jobs} SET (autovacuum_enabled = false)")
        probe.rows(
            "INSERT INTO {jobs} (id, kind, payload)"
            " SELECT gen_random_uuid(), 'vacuum.test', '{{}}' FROM generate_series(1, 200)"
        )
        probe.rows("UPDATE {jobs} SET priority = priority + 1")
        probe.rows("SELECT pg_stat_force_next_flush()")
        result = wait_until(
            lambda: output_with(invoke, "dead row versions in the jobs", "--dead-rows", "100"),
            what="a warning about the jobs table's dead rows",
        )
    finally:
        probe.close()
    assert result.exit_code == 0
    [line] = [line for line in vacuum_lines(result.output) if "dead row versions" in line]
    assert line.startswith("WARN vacuum: ") and "VACUUM the jobs table" in line
    quiet = invoke("healthcheck")  # ten thousand by default
    assert not any("dead row versions" in line for line in vacuum_lines(quiet.output))


def test_metrics_report_a_held_horizon_and_the_jobs_table_s_rows(
    queue: venturi.Queue, snapshot: psycopg.Connection[tuple[object, ...]]
) -> None:
    port = free_port()
    server = QueueMetrics(queue, stats_max_age=0).serve(port)
    try:
        # The gauge is the longest any session held it, which is at least as long as this
        # test's session has.
        wait_until(
            lambda: sample(scrape(port), "venturi_horizon_held_seconds") >= 1,
            what="a held horizon of a second or more",
        )
        samples = scrape(port)
        assert sample(samples, "venturi_horizon_held_transactions") >= 0
        assert sample(samples, "venturi_horizon_inactive_slots") >= 0
        assert sample(samples, "venturi_jobs_dead_rows") >= 0
        assert sample(samples, "venturi_jobs_live_rows") >= 0
    finally:
        server.close()
