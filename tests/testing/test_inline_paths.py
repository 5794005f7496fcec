"""Inline mode over every way jobs are written: a workflow's jobs run as they are
written (as a plain enqueue's do), and a kind whose limits are declared in the database
runs too (as in `Queue.drain`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from venturi import JobStatus, Queue
from venturi.flow.limits import KindLimits, Rate
from venturi.testing import QueueFactory, inline


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def app(venturi_dsn: str, ran: list[str]) -> Iterator[Queue]:
    queue = Queue(venturi_dsn, prefix="app_not_migrated", pool_size=1)

    @queue.job("step")
    def step(name: str) -> str:
        ran.append(name)
        return name

    yield queue
    queue.close()


def test_inline_runs_a_workflows_jobs_as_they_are_written(
    venturi_queue: QueueFactory, app: Queue, ran: list[str]
) -> None:
    queue = venturi_queue(app)
    with inline(queue):
        with queue.workflow() as flow:
            first = flow.add("step", name="first")
            flow.add("step", depends_on=[first], name="second")
        # At once, inside the block, as `queue.enqueue` does.
        assert ran == ["first", "second"]
        statuses = {queue.get(i).status for i in flow.ids}  # type: ignore[union-attr]
        assert statuses == {JobStatus.COMPLETED}


@pytest.mark.parametrize(
    "limits",
    [KindLimits("step", concurrency=2), KindLimits("step", rate=Rate(100, 1.0))],
    ids=["concurrency", "rate"],
)
def test_inline_runs_a_kind_whose_limits_are_declared_in_the_database(
    venturi_queue: QueueFactory, app: Queue, ran: list[str], limits: KindLimits
) -> None:
    queue = venturi_queue(app)
    queue.store.declare_kinds([limits], "another deploy")
    with inline(queue):
        job_id = queue.enqueue("step", {"name": "limited"})
        assert ran == ["limited"]
        record = queue.get(job_id)
        assert record is not None and record.status is JobStatus.COMPLETED
