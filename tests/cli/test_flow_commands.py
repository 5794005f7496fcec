"""`venturi pause / resume / kinds`, and paused kinds marked in `venturi stats`."""

from __future__ import annotations

import json

import pytest

import venturi
from tests.cli.conftest import Invoke


def test_pause_resume_and_kinds(invoke: Invoke, queue: venturi.Queue) -> None:
    queue.enqueue("ok", {"n": 1})
    result = invoke("pause", "ok", "emails.send")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["paused ok", "paused emails.send"]
    assert invoke("pause", "ok").output.strip() == "ok was already paused"
    assert queue.paused() == {"ok", "emails.send"}
    assert "ok (paused)" in invoke("stats").output
    assert json.loads(invoke("stats", "--json").output)["kinds"]["ok"]["paused"] is True
    listed = json.loads(invoke("kinds", "--json").output)
    assert listed["ok"]["paused"] is True and listed["ok"]["concurrency"] is None
    assert "paused" in invoke("kinds").output
    result = invoke("resume", "ok", "never-paused")
    assert result.output.splitlines() == ["resumed ok", "never-paused was not paused"]
    assert queue.paused() == {"emails.send"}


def test_kinds_shows_declared_limits_and_who_declared_them(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    @queue.job("partner.api", concurrency=5, key_concurrency=1, rate="50/s")
    def partner() -> None:
        pass

    worker = queue.worker(kinds=["partner.api"], concurrency=1)
    worker.start()
    worker.stop()
    listed = json.loads(invoke("kinds", "--json").output)["partner.api"]
    assert listed["concurrency"] == 5 and listed["key_concurrency"] == 1
    assert listed["rate"] == "50/s" and listed["declared_by"] == worker.name
    assert listed["running"] == 0
    table = invoke("kinds").output
    assert "partner.api" in table and "50/s" in table and worker.name in table


@pytest.mark.parametrize("kind", ["bad kind", "x" * 129])
def test_pause_refuses_a_bad_kind_name(invoke: Invoke, queue: venturi.Queue, kind: str) -> None:
    result = invoke("pause", kind)
    assert result.exit_code != 0 and "kind" in result.output
    assert queue.kinds() == []


def test_kinds_says_when_there_is_nothing(invoke: Invoke, queue: venturi.Queue) -> None:
    assert "no kind has declared limits" in invoke("kinds").output


def test_enqueue_takes_a_concurrency_key_and_job_shows_it(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    result = invoke("enqueue", "crm.sync", "{}", "--concurrency-key", "customer:42")
    assert result.exit_code == 0, result.output
    job = queue.get(result.stdout.strip())
    assert job is not None and job.concurrency_key == "customer:42"
    assert "customer:42" in invoke("job", result.stdout.strip()).output
    refused = invoke("enqueue", "crm.sync", "{}", "--concurrency-key", "x" * 256)
    assert refused.exit_code == 1 and "concurrency_key" in refused.output
