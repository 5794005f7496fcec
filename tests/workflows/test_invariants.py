"""`graph_violations` sees each broken rule it checks when one is staged."""

from __future__ import annotations

from tests.support import Probe, ledger
from tests.workflows.invariants import graph_violations
from venturi import Queue
from venturi.settlements import Claim, Settlement


def test_graph_violations_sees_each_staged_breakage(
    queue: Queue, probe: Probe, database_dsn: str
) -> None:
    ledger.create(database_dsn, queue.prefix)
    try:
        parent = queue.enqueue("parent")
        child = queue.enqueue("child", depends_on=[parent])
        assert graph_violations(probe) == []
        probe.rows("UPDATE {jobs} SET parents_left = 5 WHERE id = %s", child.to_uuid())
        assert graph_violations(probe) == [
            f"child {child.to_uuid()} counts its unfinished parents wrong"
        ]
        probe.rows("UPDATE {jobs} SET parents_left = 1 WHERE id = %s", child.to_uuid())
        probe.conn.execute(
            f"INSERT INTO {queue.prefix}_ledger (job_id, run_no, token, worker, pid)"
            " VALUES (%s, 1, gen_random_uuid(), 'w', 1)",
            (child.to_uuid(),),
        )
        early = graph_violations(probe)
        assert early == [
            f"child {child.to_uuid()} started before parent {parent.to_uuid()} completed"
        ]
        (job,) = queue.store.claim("w", {"parent": 60.0}, 1)
        probe.rows("UPDATE {deps} SET open = false")  # as if the release was lost ...
        assert queue.store.settle(Claim.of(job), Settlement.complete()) == "completed"
        probe.rows("UPDATE {deps} SET open = true")  # ... and the edge left open
        found = graph_violations(probe)
        assert f"child {child.to_uuid()} waits for parents that all completed" in found
        assert (
            f"edge {parent.to_uuid()} -> {child.to_uuid()} still open after the parent finished"
            in found
        )
        probe.rows("UPDATE {jobs} SET has_children = false")
        assert f"parent {parent.to_uuid()} is not marked as having children" in graph_violations(
            probe
        )
    finally:
        ledger.drop(database_dsn, queue.prefix)
