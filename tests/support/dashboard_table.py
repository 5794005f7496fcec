"""A large queue for timing the dashboard: fills a prefix with N jobs (1,000,000 by
default) by INSERT ... SELECT generate_series, then times each dashboard page's server
time and prints each store query's EXPLAIN ANALYZE. A measurement, never run in CI:

    python -m tests.support.dashboard_table --dsn postgresql://postgres@127.0.0.1/test \\
        --prefix dash1m --rows 1000000 [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from ulid import ULID
from werkzeug.test import Client

import venturi
from venturi.dashboard import Dashboard
from venturi.prefix import Prefix
from venturi.store import sqlfiles

# Kinds and their shares of the table; "rare" tests a filter on a kind with few jobs.
KINDS: dict[str, float] = {
    "mail": 0.40,
    "report": 0.20,
    "resize": 0.15,
    "sync": 0.10,
    "invoice": 0.08,
    "export": 0.04,
    "webhook": 0.029,
    "rare": 0.001,
}

FILL: LiteralString = """
INSERT INTO {jobs} (id, kind, payload, priority, status, created_at, visible_at, run_count,
                    failure_count, dedup_key, claimed_by, claim_expires_at, finished_at,
                    parents_left)
SELECT (lpad(to_hex((extract(epoch FROM t.created) * 1000)::bigint), 12, '0')
        || substr(md5(i::text), 1, 20))::uuid,
       t.kind, jsonb_build_object('n', i), (i %% 3)::smallint, t.status, t.created,
       CASE WHEN t.status = 'pending' AND i %% 5 = 0 THEN now() + interval '1 hour'
            ELSE t.created END,
       CASE WHEN t.status IN ('pending', 'waiting') THEN 0 ELSE 1 END,
       CASE WHEN t.status = 'dead' THEN 5 ELSE 0 END,
       CASE WHEN i %% 10 = 0 THEN 'key:' || i END,
       CASE WHEN t.status = 'claimed' THEN 'worker-' || (i %% 8) END,
       CASE WHEN t.status = 'claimed' THEN now() + interval '1 minute' END,
       CASE WHEN t.status IN ('completed', 'dead', 'cancelled')
            THEN t.created + interval '2 seconds' END,
       CASE WHEN t.status = 'waiting' THEN 1 ELSE 0 END
FROM generate_series(1, %(rows)s) AS i
CROSS JOIN LATERAL (
    SELECT now() - (%(rows)s - i) * (interval '7 days' / %(rows)s) AS created,
           (SELECT k FROM unnest(%(kinds)s::text[], %(edges)s::float8[]) AS u (k, e)
            WHERE e >= ((i::bigint * 7919) %% 100000) / 100000.0 ORDER BY e LIMIT 1) AS kind,
           CASE WHEN i > %(rows)s - 60 AND i %% 2 = 0 THEN 'claimed'
                WHEN i > %(rows)s - 30000 THEN 'pending'
                WHEN i %% 100 < 3 THEN 'dead'
                WHEN i %% 100 = 3 THEN 'cancelled'
                WHEN i %% 100 = 4 THEN 'waiting'
                ELSE 'completed' END AS status
) AS t
"""

JOURNAL: LiteralString = """
INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
SELECT id, kind, 1, finished_at,
       CASE status WHEN 'completed' THEN 'completed' WHEN 'dead' THEN 'dead'
                   ELSE 'cancelled' END,
       CASE WHEN status = 'dead' THEN
            (ARRAY['ValueError: bad address', 'TimeoutError: upstream took too long',
                   'KeyError: ''customer'''])[1 + abs(hashtext(id::text)) % 3]
            || E'\\nTraceback (most recent call last): ...' END
FROM {jobs}
WHERE finished_at IS NOT NULL
ORDER BY finished_at
"""


def fill(dsn: str, prefix: str, rows: int) -> None:
    names = Prefix(prefix).placeholders()
    edges, total = [], 0.0
    for share in KINDS.values():
        total += share
        edges.append(min(total, 1.0))
    edges[-1] = 1.0
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(FILL).format(**names),
            {"rows": rows, "kinds": list(KINDS), "edges": edges},
        )
        conn.execute(sql.SQL(JOURNAL).format(**names))
        conn.execute(sql.SQL("VACUUM ANALYZE {jobs}").format(**names))
        conn.execute(sql.SQL("VACUUM ANALYZE {journal}").format(**names))
    print(f"filled {rows:,} jobs in {time.monotonic() - started:.0f}s")


def sample_ids(dsn: str, prefix: str) -> dict[str, Any]:
    names = Prefix(prefix).placeholders()
    with psycopg.connect(dsn) as conn:

        def one(where: LiteralString) -> Any:
            query = sql.SQL("SELECT id, dedup_key FROM {jobs} WHERE " + where + " LIMIT 1")
            row = conn.execute(query.format(**names)).fetchone()
            assert row is not None, where
            return row

        dead = one("status = 'dead'")
        keyed = one("dedup_key IS NOT NULL AND status = 'pending'")
    return {"dead": ULID.from_uuid(dead[0]), "key": keyed[1]}


def time_pages(queue: venturi.Queue, ids: dict[str, Any], rounds: int) -> None:
    client = Client(Dashboard(queue))
    pages = [
        "/",
        "/jobs",
        "/jobs?status=dead",
        "/jobs?status=claimed",
        "/jobs?kind=mail&status=pending",
        "/jobs?kind=rare",
        f"/jobs?find={ids['dead']}",
        f"/jobs?find={ids['key']}",
        f"/jobs/{ids['dead']}",
        "/dead",
        "/workers",
        "/kinds",
        "/schedules",
    ]
    print(f"\nserver time per page (median of {rounds}, after one warm-up), ms")
    for page in pages:
        client.get(page)
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            response = client.get(page)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (page, response.status_code)
        print(f"  {statistics.median(times):7.1f}  (max {max(times):6.1f})  {page}")


def explain(dsn: str, prefix: str, ids: dict[str, Any]) -> None:
    p = Prefix(prefix)
    history = {
        "kind": None,
        "status": None,
        "finished_since": None,
        "finished_until": None,
        "before_id": None,
        "limit": 50,
    }
    plans: list[tuple[str, str, dict[str, Any]]] = [
        ("overview: table size", "table_size", {"table": p.jobs}),
        ("overview: counted", "active_counts", {}),
        (
            "overview: estimated",
            "kind_status_estimates",
            {"table": p.jobs, "statistics": p.table("jobs_kind_status_stats")},
        ),
        ("overview: chart", "journal_hourly", {"minutes": 60, "bucket": 5}),
        ("jobs", "history", history),
        ("jobs dead", "history", {**history, "status": "dead"}),
        ("jobs claimed", "history", {**history, "status": "claimed"}),
        ("jobs rare kind", "history", {**history, "kind": "rare"}),
        ("find by key", "jobs_by_dedup_key", {"dedup_key": ids["key"], "kind": None, "limit": 50}),
        ("job", "get", {"id": ids["dead"].to_uuid()}),
        ("job journal", "journal", {"id": ids["dead"].to_uuid()}),
        ("dead letters", "dead_groups", {"sample": 500}),
        ("workers", "workers_list", {}),
        ("kinds", "kinds", {}),
    ]
    with psycopg.connect(dsn) as conn:
        for label, name, params in plans:
            query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + sqlfiles.query(name, p)
            lines = [row[0] for row in conn.execute(query, params).fetchall()]
            total = next(line for line in lines if line.startswith("Execution Time"))
            scans = sorted(
                {line.strip().split("  (")[0].lstrip("-> ") for line in lines if "Scan" in line}
            )
            print(f"\n{label} ({name}.sql): {total}")
            for scan in scans:
                print(f"    {scan}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--prefix", default="dash1m")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="time an existing fill")
    parser.add_argument("--keep", action="store_true", help="leave the tables")
    args = parser.parse_args()
    queue = venturi.Queue(args.dsn, prefix=args.prefix, pool_size=2)
    try:
        if not args.reuse:
            queue.store.drop_prefix()
            queue.migrate()
            fill(args.dsn, args.prefix, args.rows)
        ids = sample_ids(args.dsn, args.prefix)
        time_pages(queue, ids, args.rounds)
        explain(args.dsn, args.prefix, ids)
    finally:
        if not args.keep:
            queue.store.drop_prefix()
        queue.close()


if __name__ == "__main__":
    main()
