"""`venturi enqueue / job / history / dead / stats / cancel / requeue / cleanup` against a
real PostgreSQL, including the bad input each must refuse in one line."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from ulid import ULID

import venturi
from tests.cli.conftest import CLOSED_PORT_DSN, Invoke, one_error_line


def _count(queue: venturi.Queue) -> int:
    return sum(
        k.pending + k.scheduled + k.claimed + k.completed + k.dead + k.cancelled
        for k in queue.stats().kinds
    )


def test_enqueue_prints_the_id_and_stores_payload_and_options(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    result = invoke(
        "enqueue", "ok", '{"n": 7}', "--priority", "5", "--delay", "30s",
        "--dedup-key", "k1", "--max-attempts", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job = queue.get(result.stdout.strip())
    assert job is not None
    assert (job.kind, job.payload, job.priority) == ("ok", {"n": 7}, 5)
    assert (job.dedup_key, job.max_attempts, job.status) == ("k1", 2, "pending")
    assert job.visible_at - job.created_at >= timedelta(seconds=29)


def test_enqueue_reads_stdin_and_takes_an_aware_time_and_dedup_replace(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    first = invoke("enqueue", "ok", "-", "--at", "2031-02-03T04:05:06+00:00", input='{"n": 1}')
    again = invoke("enqueue", "ok", '{"n": 2}', "--dedup-key", "k", "--on-duplicate", "replace")
    merged = invoke("enqueue", "ok", '{"n": 3}', "--dedup-key", "k", "--on-duplicate", "replace")
    assert first.exit_code == again.exit_code == merged.exit_code == 0
    job = queue.get(first.stdout.strip())
    assert job is not None and job.visible_at.isoformat().startswith("2031-02-03T04:05:06")
    assert again.stdout == merged.stdout
    replaced = queue.get(merged.stdout.strip())
    assert replaced is not None and replaced.payload == {"n": 3}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["ok", "{bad"], 2, "not valid JSON"),
        (["ok", "[1, 2]"], 2, "must be a JSON object"),
        (["ok", '{"n": NaN}'], 1, "NaN"),
        (["ok", "{}", "--delay", "5x"], 2, "'5x' is not a duration"),
        (["ok", "{}", "--at", "tomorrow"], 2, "ISO 8601"),
        (["ok", "{}", "--at", "2031-01-01T00:00:00"], 1, "timezone-aware"),
        (["ok", "{}", "--priority", "40000"], 1, "smallint"),
        (["", "{}"], 1, "kind must not be empty"),
        (["ok", "{}", "--on-duplicate", "replace"], 1, "needs a dedup_key"),
    ],
)
def test_enqueue_refuses_bad_input_in_one_line_and_writes_nothing(
    invoke: Invoke, queue: venturi.Queue, args: list[str], code: int, message: str
) -> None:
    result = invoke("enqueue", *args)
    assert result.exit_code == code
    assert message in one_error_line(result)
    assert _count(queue) == 0


def test_job_shows_the_record_and_its_journal(invoke: Invoke, queue: venturi.Queue) -> None:
    job_id = queue.enqueue("flaky", {"fail": True})
    queue.drain(wait_for=5)
    result = invoke("job", str(job_id))
    assert result.exit_code == 0, result.output
    assert str(job_id) in result.stdout and "dead" in result.stdout
    assert "RuntimeError: flaky failure" in result.stdout  # a traceback's last line
    data = json.loads(invoke("job", str(job_id), "--json").stdout)
    assert data["status"] == "dead" and data["failure_count"] == 3
    assert [e["outcome"] for e in data["journal"]] == ["retried", "retried", "dead"]
    assert data["journal"][0]["note"].startswith("Traceback")


def test_job_by_uuid_form_and_unknown_or_malformed_ids(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    job_id = queue.enqueue("ok", {"n": 1})
    assert invoke("job", str(job_id.to_uuid()), "--json").exit_code == 0
    unknown = invoke("job", str(ULID()))
    assert unknown.exit_code == 1 and "no job" in one_error_line(unknown)
    malformed = invoke("job", "nope")
    assert malformed.exit_code == 2 and "neither a ULID nor a UUID" in one_error_line(malformed)


def test_history_pages_with_the_printed_cursor(invoke: Invoke, queue: venturi.Queue) -> None:
    ids = [str(queue.enqueue("ok", {"n": n})) for n in range(5)]
    queue.enqueue("bad", {"n": 9})
    seen: list[str] = []
    args = ["history", "--kind", "ok", "--limit", "2", "--json"]
    cursor: list[str] = []
    for _ in range(3):
        result = invoke(*args, *cursor)
        assert result.exit_code == 0, result.output
        page = [row["id"] for row in json.loads(result.stdout)]
        seen += page
        if len(page) == 2:
            assert f"--before {page[-1]}" in result.stderr
            cursor = ["--before", page[-1]]
    assert seen == ids[::-1]
    table = invoke("history", "--status", "pending")
    assert all(i in table.stdout for i in ids) and "bad" in table.stdout


def test_history_refuses_an_unknown_cursor_and_status(invoke: Invoke, queue: venturi.Queue) -> None:
    unknown = invoke("history", "--before", str(ULID()))
    assert unknown.exit_code == 2 and "previous page" in one_error_line(unknown)
    status = invoke("history", "--status", "sleeping")
    assert status.exit_code == 2 and "sleeping" in one_error_line(status)


def test_dead_lists_dead_jobs_with_their_reason(invoke: Invoke, queue: venturi.Queue) -> None:
    assert invoke("dead").stdout.strip() == "no dead jobs"
    dead_id = queue.enqueue("bad", {"n": 4})
    queue.enqueue("ok", {"n": 1})
    queue.drain()
    rows = json.loads(invoke("dead", "--json").stdout)
    assert [(r["id"], r["reason"]) for r in rows] == [(str(dead_id), "poison 4")]
    table = invoke("dead")
    assert str(dead_id) in table.stdout and "poison 4" in table.stdout
    assert "requeue --all-dead" in table.stderr


def test_stats_counts_by_kind(invoke: Invoke, queue: venturi.Queue) -> None:
    assert "no jobs" in invoke("stats").stdout
    queue.enqueue("ok", {"n": 1})
    queue.enqueue("ok", {"n": 2}, delay=3600)
    queue.enqueue("bad", {"n": 3})
    queue.drain(["bad"])
    kinds = json.loads(invoke("stats", "--json").stdout)["kinds"]
    assert (kinds["ok"]["pending"], kinds["ok"]["scheduled"], kinds["ok"]["dead"]) == (1, 1, 0)
    assert (kinds["bad"]["pending"], kinds["bad"]["dead"]) == (0, 1)
    table = invoke("stats").stdout
    assert "ok" in table and "bad" in table and "total" in table


def test_cancel_a_pending_job_once(invoke: Invoke, queue: venturi.Queue) -> None:
    job_id = str(queue.enqueue("ok", {"n": 1}))
    first = invoke("cancel", job_id)
    assert first.exit_code == 0 and first.stdout.strip() == f"cancelled {job_id}"
    job = queue.get(job_id)
    assert job is not None and job.status == "cancelled"
    again = invoke("cancel", job_id)
    assert again.exit_code == 1 and "is cancelled" in one_error_line(again)
    unknown = invoke("cancel", str(ULID()))
    assert unknown.exit_code == 1 and "no job" in one_error_line(unknown)


def test_requeue_one_job_and_all_dead_of_a_kind(invoke: Invoke, queue: venturi.Queue) -> None:
    dead = [queue.enqueue("bad", {"n": n}) for n in range(3)]
    flaky = queue.enqueue("flaky", {"fail": True})
    queue.drain(wait_for=5)
    one = invoke("requeue", str(dead[0]))
    assert one.exit_code == 0 and one.stdout.strip() == f"requeued {dead[0]}"
    pending = invoke("requeue", str(dead[0]))
    assert pending.exit_code == 1 and "is pending" in one_error_line(pending)
    by_kind = invoke("requeue", "--all-dead", "--kind", "bad")
    assert by_kind.stdout.strip() == "requeued 2 dead bad jobs"
    flaky_job = queue.get(flaky)
    assert flaky_job is not None and flaky_job.status == "dead"
    assert invoke("requeue", "--all-dead").stdout.strip() == "requeued 1 dead jobs"
    requeued = queue.get(flaky)
    assert requeued is not None and (requeued.status, requeued.failure_count) == ("pending", 0)
    assert queue.journal(flaky)[-1].outcome == "requeued"


@pytest.mark.parametrize(
    "args",
    [["requeue"], ["requeue", str(ULID()), "--all-dead"], ["requeue", str(ULID()), "--kind", "k"]],
)
def test_requeue_usage_errors(invoke: Invoke, queue: venturi.Queue, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    one_error_line(result)


def test_requeue_all_dead_leaves_a_job_whose_dedup_key_is_held(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    held = queue.enqueue("bad", {"n": 1}, dedup_key="user:1")
    free = queue.enqueue("bad", {"n": 2}, dedup_key="user:2")
    queue.drain()
    holder = queue.enqueue("bad", {"n": 3}, dedup_key="user:1")
    assert invoke("requeue", "--all-dead").stdout.strip() == "requeued 1 dead jobs"
    statuses = {i: queue.get(i).status for i in (held, free, holder)}  # type: ignore[union-attr]
    assert statuses == {held: "dead", free: "pending", holder: "pending"}
    clash = invoke("requeue", str(held))
    assert clash.exit_code == 1 and "dedup key" in one_error_line(clash)


def test_cleanup_deletes_finished_jobs_older_than_a_duration(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    done = queue.enqueue("ok", {"n": 1})
    dead = queue.enqueue("bad", {"n": 2})
    waiting = queue.enqueue("ok", {"n": 3}, delay=3600)
    queue.drain()
    assert invoke("cleanup", "--older-than", "1h").stdout.startswith("deleted 0 jobs")
    only_dead = invoke("cleanup", "--older-than", "0s", "--status", "dead")
    assert only_dead.stdout.startswith("deleted 1 jobs")
    assert queue.get(dead) is None and queue.get(done) is not None
    assert invoke("cleanup", "--older-than", "0s", "--kind", "ok").stdout.startswith("deleted 1")
    assert queue.get(done) is None and queue.get(waiting) is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cleanup"], "--older-than"),
        (["cleanup", "--older-than", "7x"], "not a duration"),
        (["cleanup", "--older-than", "7d", "--status", "pending"], "pending"),
        (["cleanup", "--older-than", "999999999w"], "year 1"),
    ],
)
def test_cleanup_refuses_bad_input(
    invoke: Invoke, queue: venturi.Queue, args: list[str], message: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in one_error_line(result)


def test_a_prefix_without_schema_says_to_migrate(invoke: Invoke) -> None:
    result = invoke("stats")
    assert result.exit_code == 1
    assert "venturi migrate" in one_error_line(result)


@pytest.mark.parametrize("command", [["stats"], ["job", str(ULID())], ["enqueue", "ok", "{}"]])
def test_an_unreachable_database_is_one_line_without_the_password(
    invoke: Invoke, command: list[str]
) -> None:
    result = invoke(*command, env={"VENTURI_DSN": CLOSED_PORT_DSN})
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "cannot connect to PostgreSQL" in line and "port=1" in line
    assert "topsecret" not in result.output
