"""The `venturi` command through PgBouncer in transaction mode: migrate, enqueue and
stats work; healthcheck warns that workers would poll (exit 0), and passes outright once
``--listen-dsn`` reaches the server directly."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from venturi.cli.main import build_cli


def _venturi(pooled_dsn: str, prefix: str, *args: str) -> Result:
    env = {"VENTURI_DSN": pooled_dsn, "VENTURI_PREFIX": prefix, "VENTURI_LISTEN_DSN": None}
    return CliRunner().invoke(build_cli(), list(args), env=env, catch_exceptions=False)


def test_migrate_enqueue_and_stats_through_the_pooler(pooled_dsn: str, prefix: str) -> None:
    assert _venturi(pooled_dsn, prefix, "migrate").exit_code == 0
    for n in range(12):
        result = _venturi(pooled_dsn, prefix, "enqueue", "pooled.cli", json.dumps({"n": n}))
        assert result.exit_code == 0, result.output
    stats = _venturi(pooled_dsn, prefix, "stats", "--json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["kinds"]["pooled.cli"]["pending"] == 12


def test_healthcheck_warns_of_polling_and_exits_0(
    pooled_dsn: str, database_dsn: str, prefix: str
) -> None:
    _venturi(pooled_dsn, prefix, "migrate")
    result = _venturi(pooled_dsn, prefix, "healthcheck", "--timeout", "2s")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == [
        "ok   database reachable",
        "ok   read-write server",
        "ok   schema current",
        "WARN listen/notify",
    ]
    assert "polling" in lines[3] and "--listen-dsn" in lines[3]
    assert lines[4:] and all(line[5:].startswith("vacuum: ") for line in lines[4:])
    direct = _venturi(pooled_dsn, prefix, "--listen-dsn", database_dsn, "healthcheck")
    assert direct.exit_code == 0, direct.output
    assert direct.stdout.splitlines()[3].startswith("ok   listen/notify: LISTEN/NOTIFY round")
