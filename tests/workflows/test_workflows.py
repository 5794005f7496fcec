"""`Queue.workflow`: a graph inserted in one transaction (optionally the caller's), its
status, `venturi workflow ID`, and requeueing a failed parent with its children."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from tests.support import Probe
from venturi import InvalidJob, JobContext, Queue, Worker
from venturi.cli.main import build_cli
from venturi.settlements import Claim, Settlement
from venturi.store.ids import new_id


def _cli(database_dsn: str, queue: Queue, *args: str) -> Any:
    env = {"VENTURI_DSN": database_dsn, "VENTURI_PREFIX": queue.prefix}
    return CliRunner().invoke(build_cli(), list(args), env=env, catch_exceptions=False)


def test_a_chain_and_a_fan_out_fan_in_run_in_order(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    order: list[str] = []

    @queue.job("fetch")
    def fetch(url: str) -> str:
        order.append("fetch")
        return f"body of {url}"

    @queue.job("resize", context=True)
    def resize(ctx: JobContext, size: int) -> int:
        (body,) = ctx.parents.values()
        order.append(f"resize {size}")
        return len(str(body)) * size

    @queue.job("notify", context=True)
    def notify(ctx: JobContext) -> int:
        order.append("notify")
        return sum(v for v in ctx.parents.values() if isinstance(v, int))

    with queue.workflow() as wf:
        a = wf.add(fetch, url="x")
        sizes = [wf.add(resize, size=s, depends_on=[a]) for s in (1, 2, 3)]
        last = wf.add(notify, depends_on=sizes)
    start_worker(concurrency=4)
    assert queue.result(last, timeout=30) == len("body of x") * 6
    assert order[0] == "fetch" and order[-1] == "notify"
    status = queue.workflow_status(wf.id)
    assert status.succeeded and status.finished and status.counts() == {"completed": 5}
    assert [j.record.id for j in status.jobs] == [a, *sizes, last]
    assert status.jobs[-1].parents == tuple(sorted(sizes))


def test_a_workflow_writes_nothing_if_the_block_raises_or_an_id_is_unknown(
    queue: Queue, probe: Probe
) -> None:
    with pytest.raises(RuntimeError), queue.workflow() as wf:
        wf.add("a")
        raise RuntimeError("changed my mind")
    with pytest.raises(InvalidJob, match="does not exist"), queue.workflow() as wf:
        first = wf.add("a")
        wf.add("b", depends_on=[first])
        wf.add("c", depends_on=[first, new_id()])
    assert probe.count("jobs") == 0 and probe.count("deps") == 0
    with pytest.raises(InvalidJob), queue.workflow() as wf:
        wf.add("b", depends_on="not a list")
    assert probe.count("jobs") == 0


def test_a_workflow_joins_the_callers_transaction(queue: Queue, database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        with queue.workflow(conn=conn) as wf:
            root = wf.add("a")
            wf.add("b", depends_on=[root])
        conn.rollback()
    assert queue.workflow_status(wf.id).jobs == ()
    with psycopg.connect(database_dsn) as conn:
        with queue.workflow(conn=conn) as wf:
            root = wf.add("a")
            wf.add("b", depends_on=[root])
        conn.commit()
    assert queue.workflow_status(wf.id).counts() == {"pending": 1, "waiting": 1}


def test_workflow_and_enqueue_after_on_the_command_line(queue: Queue, database_dsn: str) -> None:
    with queue.workflow() as wf:
        root = wf.add("a")
        wf.add("b", depends_on=[root])
    shown = _cli(database_dsn, queue, "workflow", str(wf.id))
    assert shown.exit_code == 0, shown.output
    assert "waiting" in shown.output and str(root) in shown.output
    data = json.loads(_cli(database_dsn, queue, "workflow", str(wf.id), "--json").output)
    assert data["counts"] == {"pending": 1, "waiting": 1}
    assert data["jobs"][1]["parents"] == [str(root)]
    missing = _cli(database_dsn, queue, "workflow", str(new_id()))
    assert missing.exit_code == 1 and "no workflow" in missing.output
    added = _cli(
        database_dsn, queue, "enqueue", "c", "--depends-on", str(root), "--on-parent-failure", "run"
    )
    assert added.exit_code == 0, added.output
    record = queue.get(added.output.strip())
    assert record is not None and record.status == "waiting"
    refused = _cli(database_dsn, queue, "enqueue", "c", "--depends-on", str(new_id()))
    assert refused.exit_code == 1 and "does not exist" in refused.output


def test_requeue_with_children_puts_cancelled_descendants_back_to_waiting(
    queue: Queue, database_dsn: str
) -> None:
    for kind in ("parent", "other", "child"):
        queue.job(kind)(lambda: None)
    parent = queue.enqueue("parent", max_attempts=1)
    other = queue.enqueue("other")
    child = queue.enqueue("child", depends_on=[parent, other])
    grandchild = queue.enqueue("child", depends_on=[child])
    (job,) = queue.store.claim("w", {"parent": 60.0}, 1)
    assert queue.store.settle(Claim.of(job), Settlement.dead("bad input")) == "dead"
    assert {queue.get(i).status for i in (child, grandchild)} == {"cancelled"}  # type: ignore[union-attr]
    result = _cli(database_dsn, queue, "requeue", str(parent), "--with-children")
    assert result.exit_code == 0, result.output
    assert "and 2 children" in result.output
    child_record, grandchild_record = queue.get(child), queue.get(grandchild)
    assert child_record is not None and grandchild_record is not None
    assert (child_record.status, child_record.parents_left) == ("waiting", 2)
    assert (grandchild_record.status, grandchild_record.parents_left) == ("waiting", 1)
    assert queue.journal(child)[-1].note == "requeued with its parent"
    assert queue.drain(kinds=["parent", "other"]) == 2
    assert queue.get(child).status == "pending"  # type: ignore[union-attr]
    assert queue.drain() == 2
    assert queue.get(grandchild).status == "completed"  # type: ignore[union-attr]
    assert queue.requeue_with_children(new_id()) is None
    usage = _cli(database_dsn, queue, "requeue", "--all-dead", "--with-children")
    assert usage.exit_code == 2
