"""Migration race across prefixes: processes migrating two prefixes at once.

The other migration races live in tests/store/test_migrations.py: eight processes on one
prefix (one applies, seven no-op), and a squatter on a prefix's advisory lock (a bounded
wait, then MigrationLockTimeout, while another prefix migrates meanwhile).
"""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from tests.support import drop_prefix, fresh_prefix
from tests.support.fleet import REPO_ROOT
from venturi.store.migrations import known_migrations

_MIGRATE = (
    "import json, sys, venturi\n"
    "with venturi.Queue(sys.argv[1], prefix=sys.argv[2], pool_size=1) as q:\n"
    "    print(json.dumps(q.migrate()))\n"
)
PER_PREFIX = 4


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_processes_migrating_two_prefixes_at_once(database_dsn: str) -> None:
    prefixes = [fresh_prefix("race_a"), fresh_prefix("race_b")]
    try:
        procs = [
            (
                name,
                subprocess.Popen(
                    [sys.executable, "-c", _MIGRATE, database_dsn, name],
                    cwd=REPO_ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for name in prefixes
            for _ in range(PER_PREFIX)
        ]
        results = [(name, *proc.communicate(timeout=120), proc.returncode) for name, proc in procs]
        assert all(code == 0 for *_, code in results), [err for _, _, err, _ in results]
        everything = [name for _, name in known_migrations()]
        with psycopg.connect(database_dsn) as conn:
            for prefix in prefixes:
                applied = sorted(json.loads(out) for name, out, _, _ in results if name == prefix)
                assert applied == [[]] * (PER_PREFIX - 1) + [everything], applied
                rows = conn.execute(
                    "SELECT count(*) FROM pg_class WHERE relname = ANY(%s)",
                    (
                        [
                            f"{prefix}_jobs",
                            f"{prefix}_journal",
                            f"{prefix}_kinds",
                            f"{prefix}_schedules",
                            f"{prefix}_schema_history",
                        ],
                    ),
                ).fetchone()
                assert rows == (5,)
        print(
            f"\nmigration race: {PER_PREFIX} processes on each of 2 prefixes at once: one "
            f"applied {len(everything)} migration(s) per prefix, the others were no-ops"
        )
    finally:
        for prefix in prefixes:
            drop_prefix(database_dsn, prefix)
