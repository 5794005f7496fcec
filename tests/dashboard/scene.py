"""A queue with jobs in every state, for the dashboard's tests to look at and act on."""

from __future__ import annotations

from typing import Any

import attrs
from ulid import ULID

import venturi
from venturi.models import JobStatus


@attrs.define
class Scene:
    """The queue and the id of one job in each state (``ids[status]``), plus a workflow
    and a dead job's id per error."""

    queue: venturi.Queue
    ids: dict[str, ULID]
    workflow_id: ULID
    dedup_key: str = "invoice:7"

    def status(self, job_id: ULID) -> JobStatus:
        record = self.queue.get(job_id)
        assert record is not None
        return record.status


def build_scene(queue: venturi.Queue) -> Scene:
    """Jobs completed, dead (two errors), cancelled, claimed, pending (due), scheduled
    (due in an hour), and waiting (a workflow child of a scheduled parent)."""

    @queue.job("mail", lease=30)
    def mail(n: int) -> dict[str, Any]:
        if n < 0:
            raise venturi.Fail(f"bad address {n}\nsecond line")
        return {"sent": n}

    @queue.job("report", lease=30)
    def report(n: int) -> None:
        raise venturi.Fail("disk full")

    ids: dict[str, ULID] = {}
    ids["completed"] = mail.enqueue(n=1)
    ids["dead"] = mail.enqueue(n=-1)
    mail.enqueue(n=-2)
    ids["dead_report"] = report.enqueue(n=1)
    queue.drain()
    ids["cancelled"] = queue.enqueue("mail", {"n": 3})
    assert queue.cancel(ids["cancelled"])
    ids["claimed"] = queue.enqueue("report", {"n": 2})
    claimed = queue.store.claim("scene-worker", {"report": 30.0}, 1)
    assert [c.id for c in claimed] == [ids["claimed"]]
    ids["pending"] = queue.enqueue("mail", {"n": 4}, dedup_key="invoice:7")
    ids["scheduled"] = queue.enqueue("mail", {"n": 5}, delay=3600)
    with queue.workflow() as flow:
        parent = flow.add_with("report", {"n": 6}, delay=3600)
        ids["waiting"] = flow.add("mail", depends_on=[parent], n=7)
    ids["workflow_parent"] = parent
    return Scene(queue, ids, flow.id)
