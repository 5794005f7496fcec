"""The batched settlements find each run's row by its primary key, whatever the planner
knows of the batch: their cost follows the batch, not how many rows are claimed.

A worker prepares these statements, and PostgreSQL may then run them with a generic plan,
planned without the batch's size. Each plan is read with EXPLAIN, both generic (from the
statement prepared on the connection) and custom (planned with the parameters)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from venturi.models import JobRecord, NewJob
from venturi.settlements import Claim, Settlement
from venturi.store import sqlfiles
from venturi.store.postgres import PostgresStore, lease_params, settle_params


def _lease_params(jobs: list[JobRecord]) -> dict[str, Any]:
    return lease_params([(Claim.of(j), 30.0) for j in jobs])


def _completion_params(jobs: list[JobRecord]) -> dict[str, Any]:
    return settle_params(
        [(Claim.of(j), Settlement.complete()) for j in jobs], within_lease=False, announce=True
    )


STATEMENTS = {"settle": _completion_params, "extend_lease": _lease_params}


@pytest.fixture
def batch(store: PostgresStore) -> list[JobRecord]:
    """20 runs of worker "w" to settle, beside 60 more it holds and 300 that other
    workers hold, in a table of 20,000 rows: a planner that reads all the claimed rows
    (or all the rows) there does work that grows with the table, not the batch."""
    store.enqueue_many([NewJob("k") for _ in range(20_000)])
    mine = store.claim("w", {"k": 30}, 80)
    for worker in ("x", "y", "z"):
        store.claim(worker, {"k": 30}, 100)
    return mine[:20]


@pytest.fixture
def conn(database_dsn: str, store: PostgresStore) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(store.prefix.jobs)))
        yield connection


def _jobs_scans(plan: dict[str, Any], table: str) -> Iterator[tuple[str, str | None]]:
    """(node type, index name) of each node of ``plan`` that reads ``table``."""
    if plan.get("Relation Name") == table and "Scan" in plan["Node Type"]:
        yield plan["Node Type"], plan.get("Index Name")
    for child in plan.get("Plans", []):
        yield from _jobs_scans(child, table)


def _generic_plan(
    conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any]
) -> dict[str, Any]:
    conn.execute("SET plan_cache_mode = force_generic_plan")
    # Prepared by running it for runs of a later epoch, which it fences out.
    fenced = {**params, "runs": [run + 1 for run in params["runs"]]}
    conn.execute(query, fenced, prepare=True)
    row = conn.execute("SELECT name FROM pg_prepared_statements").fetchone()
    assert row is not None
    (name,) = row
    arguments = sql.SQL(", ").join(
        sql.Literal(value) for value in params.values()
    )  # in the order psycopg numbered them: the order of first use in the text
    explain = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {} ({})").format(
        sql.Identifier(name), arguments
    )
    with conn.transaction(force_rollback=True):
        row = conn.execute(explain).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def _custom_plan(
    conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any]
) -> dict[str, Any]:
    with conn.transaction(force_rollback=True):
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + query, params).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


@pytest.mark.parametrize("planned", [_generic_plan, _custom_plan], ids=["generic", "custom"])
@pytest.mark.parametrize("name", list(STATEMENTS))
def test_each_run_is_found_by_its_primary_key(
    store: PostgresStore,
    batch: list[JobRecord],
    conn: psycopg.Connection[Any],
    name: str,
    planned: Any,
) -> None:
    query = sqlfiles.query(name, store.prefix)
    plan = planned(conn, query, STATEMENTS[name](batch))
    scans = set(_jobs_scans(plan, store.prefix.jobs))
    by_key = ("Index Scan", f"{store.prefix.jobs}_pkey")
    # A run going back to pending looks its dedup key up in the unique index of pending
    # keys: one probe per run, by key, like the primary key's.
    pending_key = ("Index Only Scan", f"{store.prefix.jobs}_dedup_idx")
    assert by_key in scans and scans <= {by_key, pending_key}, plan
