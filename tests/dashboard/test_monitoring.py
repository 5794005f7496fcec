"""`Queue`'s operations for operators refuse bad input before any SQL runs."""

from __future__ import annotations

from datetime import timedelta

import pytest

import venturi
from tests.support import Probe
from venturi.errors import InvalidJob


def test_bad_windows_and_samples_are_refused(queue: venturi.Queue) -> None:
    with pytest.raises(ValueError, match="minutes and bucket must be at least 1"):
        queue.throughput(minutes=0)
    with pytest.raises(ValueError, match="minutes and bucket must be at least 1"):
        queue.throughput(bucket=0)
    with pytest.raises(ValueError, match="sample must be at least 1"):
        queue.dead_groups(sample=0)


def test_retry_now_refuses_a_bad_id_and_answers_false_for_an_unknown_one(
    queue: venturi.Queue,
) -> None:
    with pytest.raises(InvalidJob, match="neither a ULID nor a UUID"):
        queue.retry_now("not-an-id")
    assert queue.retry_now("01ARZ3NDEKTSV4RRFFQ69G5FAV") is False


def test_throughput_buckets_a_kinds_runs(queue: venturi.Queue) -> None:
    @queue.job("t")
    def t(fail: bool) -> None:
        if fail:
            raise venturi.Fail("no")

    for fail in (False, False, True):
        t.enqueue(fail=fail)
    queue.drain()
    seen = queue.throughput(minutes=10, bucket=1)
    assert seen.totals("t") == (2, 1)
    window_start = seen.taken_at - timedelta(minutes=10)
    assert all(window_start <= b.start <= seen.taken_at for b in seen.buckets)
    assert queue.throughput(minutes=1, bucket=1).totals("other") == (0, 0)


def test_throughput_leaves_out_runs_before_the_window(
    queue: venturi.Queue, database_dsn: str, prefix: str
) -> None:
    @queue.job("t")
    def t(n: int) -> None:
        pass

    for n in range(7):
        t.enqueue(n=n)
    queue.drain()
    probe = Probe(database_dsn, prefix)
    try:
        # The journal's four oldest entries (lowest ids) move two hours back: the window
        # leaves them out, and the binary search over ids must not start it past any of
        # the three left in it.
        probe.rows(
            "UPDATE {journal} SET recorded_at = recorded_at - interval '2 hours'"
            " WHERE id IN (SELECT id FROM {journal} ORDER BY id LIMIT 4)"
        )
    finally:
        probe.close()
    assert queue.throughput(minutes=60).totals("t") == (3, 0)
    assert queue.throughput(minutes=180).totals("t") == (7, 0)
