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


def declare_fair(queue: venturi.Queue) -> None:
    """Register the fair kind reports.render, and have a worker declare it."""

    @queue.job("reports.render", fair=True)
    def render(n: int = 0) -> None:
        pass

    worker = queue.worker(kinds=["reports.render"], concurrency=1)
    worker.start()
    worker.stop()


def test_kinds_shows_a_fair_kind_and_set_weights_sets_its_keys_weights(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    declare_fair(queue)
    assert json.loads(invoke("kinds", "--json").output)["reports.render"]["fair"] is True
    assert "fair" in invoke("kinds").output
    assert "every key weighs 1" in invoke("kinds", "--weights").output
    result = invoke("set-weights", "reports.render", "tenant:42=3", "tenant:7=0.5")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "reports.render tenant:42: 3",
        "reports.render tenant:7: 0.5",
    ]
    assert queue.weights() == {"reports.render": {"tenant:42": 3.0, "tenant:7": 0.5}}
    shown = invoke("kinds", "--weights").output
    assert "tenant:42" in shown and "0.5" in shown
    listed = json.loads(invoke("kinds", "--weights", "--json").output)
    assert listed == {"reports.render": {"tenant:42": 3.0, "tenant:7": 0.5}}
    assert invoke("set-weights", "reports.render", "tenant:7=default").exit_code == 0
    assert queue.weights() == {"reports.render": {"tenant:42": 3.0}}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("reports.render", "tenant:1=-2"), "above 0"),
        (("reports.render", "tenant:1=nan"), "above 0"),
        (("reports.render", "tenant:1=lots"), "must be a number"),
        (("reports.render", "tenant:1"), "KEY=WEIGHT"),
        (("plain", "tenant:1=2"), "not fair"),
    ],
)
def test_set_weights_refuses_bad_weights_and_writes_nothing(
    invoke: Invoke, queue: venturi.Queue, args: tuple[str, ...], message: str
) -> None:
    declare_fair(queue)
    result = invoke("set-weights", *args, "tenant:2=5")
    assert result.exit_code != 0
    assert message in result.output
    assert queue.weights() == {}


def test_stats_lists_a_fair_kinds_keys_with_the_most_due_jobs(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    declare_fair(queue)
    queue.enqueue_many(
        [venturi.NewJob("reports.render", {"n": n}, concurrency_key="tenant:big") for n in range(9)]
        + [
            venturi.NewJob("reports.render", {"n": n}, concurrency_key="tenant:small")
            for n in range(2)
        ]
        + [venturi.NewJob("reports.render", {"n": 0})]
    )
    shown = invoke("stats").output
    assert "reports.render (fair): key" in shown
    assert shown.index("tenant:big") < shown.index("tenant:small") < shown.index("(no key)")
    listed = json.loads(invoke("stats", "--json").output)["fair_keys"]["reports.render"]
    assert listed == [
        {"key": "tenant:big", "due": 9, "running": 0},
        {"key": "tenant:small", "due": 2, "running": 0},
        {"key": None, "due": 1, "running": 0},
    ]
