"""What a finished graph must satisfy, read with plain SQL (`graph_violations`)."""

from __future__ import annotations

from typing import Any, LiteralString

from psycopg import sql

from tests.support import Probe


def _rows(probe: Probe, template: LiteralString) -> list[tuple[Any, ...]]:
    """`Probe.rows` that may also name the prefix's ledger table as ``{ledger}``."""
    names = {**probe.prefix.placeholders(), "ledger": sql.Identifier(f"{probe.prefix}_ledger")}
    with probe.conn.cursor() as cur:
        cur.execute(sql.SQL(template).format(**names))
        return cur.fetchall()


def graph_violations(probe: Probe) -> list[str]:
    """Every broken rule of a prefix's dependency graph: a child still waiting although
    all its parents completed; a child's run started (ledger) before a parent's
    completion was recorded; an open edge from a finished parent; a waiting child whose
    count of unfinished parents disagrees with its open edges; a parent not marked as
    having children (its settlement would not look for them)."""
    problems = []
    for (child,) in probe.rows(
        "SELECT c.id FROM {jobs} AS c WHERE c.status = 'waiting' AND NOT EXISTS ("
        " SELECT FROM {deps} AS d JOIN {jobs} AS p ON p.id = d.parent_id"
        " WHERE d.child_id = c.id AND p.status <> 'completed')"
    ):
        problems.append(f"child {child} waits for parents that all completed")
    for child, parent in _rows(
        probe,
        "SELECT d.child_id, d.parent_id FROM {deps} AS d"
        " JOIN {ledger} AS l ON l.job_id = d.child_id"
        " WHERE l.started_at < (SELECT max(recorded_at) FROM {journal}"
        "   WHERE job_id = d.parent_id AND outcome = 'completed')"
        " OR NOT EXISTS (SELECT FROM {journal} WHERE job_id = d.parent_id"
        "   AND outcome = 'completed')",
    ):
        problems.append(f"child {child} started before parent {parent} completed")
    for child, parent in probe.rows(
        "SELECT d.child_id, d.parent_id FROM {deps} AS d JOIN {jobs} AS p ON p.id = d.parent_id"
        " WHERE d.open AND p.finished_at IS NOT NULL"
    ):
        problems.append(f"edge {parent} -> {child} still open after the parent finished")
    for (child,) in probe.rows(
        "SELECT c.id FROM {jobs} AS c WHERE c.status = 'waiting' AND c.parents_left <> ("
        " SELECT count(*) FROM {deps} AS d WHERE d.child_id = c.id AND d.open)"
    ):
        problems.append(f"child {child} counts its unfinished parents wrong")
    for (parent,) in probe.rows(
        "SELECT DISTINCT d.parent_id FROM {deps} AS d JOIN {jobs} AS p ON p.id = d.parent_id"
        " WHERE NOT p.has_children"
    ):
        problems.append(f"parent {parent} is not marked as having children")
    return problems
