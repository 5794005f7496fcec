"""`venturi signal` and the durable side of `venturi job`, against a real PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from ulid import ULID

import venturi
from tests.cli.conftest import Invoke, one_error_line


def _waiter(queue: venturi.Queue) -> ULID:
    @queue.job("waiter", context=True)
    def waiter(ctx: venturi.JobContext) -> Any:
        ctx.step("prepare", lambda: {"ready": True})
        return ctx.wait_for("approved", timeout=3600)

    job_id = waiter.enqueue()
    queue.drain()
    return job_id


def test_signal_delivers_a_payload_and_job_shows_steps_and_the_wait(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    job_id = _waiter(queue)
    shown = invoke("job", str(job_id))
    assert shown.exit_code == 0, shown.output
    assert "prepare" in shown.stdout and "signal approved" in shown.stdout
    as_json = json.loads(invoke("job", str(job_id), "--json").stdout)
    assert [s["name"] for s in as_json["steps"]] == ["prepare", "wait_for:approved"]
    assert as_json["waiting"]["what"] == "signal"

    result = invoke("signal", str(job_id), "approved", '{"by": "ann"}')
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"signalled {job_id} approved (woke it)"
    queue.drain()
    assert queue.result(job_id) == {"by": "ann"}
    after = json.loads(invoke("job", str(job_id), "--json").stdout)
    assert after["waiting"] is None
    assert [s["payload"] for s in after["signals"]] == [{"by": "ann"}]


def test_signal_reads_stdin_and_defaults_to_null(invoke: Invoke, queue: venturi.Queue) -> None:
    job_id = _waiter(queue)
    assert invoke("signal", str(job_id), "other").exit_code == 0
    assert invoke("signal", str(job_id), "approved", "-", input="[1, 2]").exit_code == 0
    queue.drain()
    assert queue.result(job_id) == [1, 2]


def test_signal_refuses_bad_input_unknown_and_finished_jobs(
    invoke: Invoke, queue: venturi.Queue
) -> None:
    job_id = _waiter(queue)
    bad_json = invoke("signal", str(job_id), "approved", "{nope")
    assert bad_json.exit_code == 2 and "not valid JSON" in one_error_line(bad_json)
    unknown = invoke("signal", str(ULID()), "approved")
    assert unknown.exit_code == 1 and "no job has id" in one_error_line(unknown)
    empty = invoke("signal", str(job_id), "")
    assert empty.exit_code == 1 and "must not be empty" in one_error_line(empty)
    queue.cancel(job_id)
    finished = invoke("signal", str(job_id), "approved")
    assert finished.exit_code == 1 and "cancelled" in one_error_line(finished)
    job = queue.get(job_id)
    assert job is not None and job.durable is not None and job.durable.signals == ()
