"""Whatever a handler hands back settles once: text the database cannot hold, delays
beyond what it can add, results of any size. A run ends with the outcome its handler
chose (or a clear failure saying why not), after one run and with one journal row; never
with a lapsed lease and a run again.

Workers here are real ones (threads, the settling line, batched completions); one test
runs a worker process, as the problem was first seen there."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ulid import ULID

from tests.support import Probe, wait_until
from tests.support.fleet import REPO_ROOT
from venturi import Fail, JobContext, JobRecord, Pause, Queue, Retry, Worker
from venturi.durations import MAX_DELAY_SECONDS
from venturi.settlements import MAX_NOTE_CHARS

NUL = "before\x00after"
SURROGATE = "before\ud800after"
# How each hostile text reads back from the journal.
STORED = {NUL: "before\\x00after", SURROGATE: "before\ufffdafter"}
TEXTS = pytest.mark.parametrize("text", [NUL, SURROGATE], ids=["nul", "surrogate"])
TERMINAL = ("completed", "dead", "cancelled")
# Short enough that a run let go would be recovered (and counted) within the test.
LEASE = 2.0


def finished(queue: Queue, job_id: ULID, timeout: float = 60.0) -> JobRecord:
    def done() -> JobRecord | None:
        job = queue.get(job_id)
        return job if job is not None and job.status in TERMINAL else None

    return wait_until(done, timeout, what=f"job {job_id} to finish")


def journaled(queue: Queue, job_id: ULID, rows: int = 1) -> None:
    wait_until(lambda: len(queue.journal(job_id)) >= rows, 60, what=f"{rows} journal rows")


def only_note(queue: Queue, job_id: ULID) -> str:
    (entry,) = queue.journal(job_id)
    assert entry.note is not None
    return entry.note


@pytest.fixture
def worker(start_worker: Callable[..., Worker]) -> Callable[[], Worker]:
    return lambda: start_worker(concurrency=4)


@TEXTS
def test_a_completed_runs_note_that_postgres_cannot_hold_is_escaped(
    queue: Queue, worker: Callable[[], Worker], text: str
) -> None:
    @queue.job("noted", context=True, lease=LEASE, max_attempts=3)
    def noted(ctx: JobContext) -> dict[str, int]:
        ctx.note(text)
        return {"ok": 1}

    job_id = noted.enqueue()
    worker()
    job = finished(queue, job_id)
    assert (job.status, job.run_count) == ("completed", 1)
    (entry,) = queue.journal(job_id)
    assert (entry.outcome, entry.note, entry.attachment) == ("completed", STORED[text], {"ok": 1})


@TEXTS
def test_fail_with_such_a_note_is_dead_at_once_with_it(
    queue: Queue, worker: Callable[[], Worker], text: str
) -> None:
    @queue.job("poison", lease=LEASE, max_attempts=3)
    def poison() -> None:
        raise Fail(text)

    job_id = poison.enqueue()
    worker()
    job = finished(queue, job_id)
    assert (job.status, job.run_count) == ("dead", 1)
    assert only_note(queue, job_id) == STORED[text]


@TEXTS
def test_an_exception_whose_message_holds_it_is_recorded_as_that_failure(
    queue: Queue, worker: Callable[[], Worker], text: str
) -> None:
    @queue.job("raises", lease=LEASE, max_attempts=1)
    def raises() -> None:
        raise ValueError(text)

    job_id = raises.enqueue()
    worker()
    job = finished(queue, job_id)
    assert (job.status, job.run_count, job.failure_count) == ("dead", 1, 1)
    note = only_note(queue, job_id)
    assert f"ValueError: {STORED[text]}" in note and "Traceback" in note


@TEXTS
def test_retry_and_pause_notes_holding_it_settle(
    queue: Queue, worker: Callable[[], Worker], text: str
) -> None:
    @queue.job("retried", lease=LEASE, max_attempts=5)
    def retried() -> None:
        raise Retry(after=3600, note=text)

    @queue.job("paused", lease=LEASE)
    def paused() -> None:
        raise Pause(after=3600, note=text)

    retry_id, pause_id = retried.enqueue(), paused.enqueue()
    worker()
    for job_id, outcome in ((retry_id, "retried"), (pause_id, "paused")):
        journaled(queue, job_id)
        (entry,) = queue.journal(job_id)
        assert (entry.outcome, entry.note) == (outcome, STORED[text])
        job = queue.get(job_id)
        assert job is not None and (job.status, job.run_count) == ("pending", 1)


@pytest.mark.parametrize(
    "outcome",
    [
        pytest.param(lambda: Retry(after=10**12), id="retry-past-python"),
        pytest.param(lambda: Retry(after=1e16), id="retry-past-postgres"),
        pytest.param(lambda: Pause(after=1e16), id="pause-past-postgres"),
        pytest.param(lambda: Retry(after=timedelta(days=999_999_999)), id="retry-timedelta"),
    ],
)
def test_a_delay_beyond_the_bound_fails_the_run_saying_so(
    queue: Queue, worker: Callable[[], Worker], outcome: Callable[[], BaseException]
) -> None:
    """Retry(after=) and Pause(after=) are bounded like enqueue(delay=): too long a delay
    is the handler's error, recorded as its failure; the job stays readable."""

    @queue.job("sleepy", lease=LEASE, max_attempts=2, backoff=lambda _: 3600)
    def sleepy() -> None:
        raise outcome()

    job_id = sleepy.enqueue()
    worker()
    journaled(queue, job_id)
    job = queue.get(job_id)
    assert job is not None and (job.status, job.run_count, job.failure_count) == ("pending", 1, 1)
    assert job.visible_at < datetime.now(UTC) + timedelta(hours=2)
    note = only_note(queue, job_id)
    assert "after" in note and f"more than {MAX_DELAY_SECONDS}s" in note
    assert [j.id for j in queue.history(kind="sleepy")] == [job_id]


def test_a_backoff_beyond_the_bound_leaves_the_job_readable(
    queue: Queue, worker: Callable[[], Worker]
) -> None:
    @queue.job("backs_off", lease=LEASE, max_attempts=2, backoff=lambda _: 10**12)
    def backs_off() -> None:
        raise RuntimeError("upstream down")

    job_id = backs_off.enqueue()
    worker()
    job = finished(queue, job_id)
    assert (job.status, job.run_count, job.failure_count) == ("dead", 2, 2)
    assert [e.outcome for e in queue.journal(job_id)] == ["retried", "dead"]
    assert [j.id for j in queue.history(kind="backs_off")] == [job_id]


@pytest.fixture
def small_results(database_dsn: str, prefix: str) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=8, max_result_bytes=1024)
    instance.migrate()
    yield instance
    instance.close()


@contextlib.contextmanager
def running(queue: Queue) -> Iterator[Worker]:
    worker = queue.worker(concurrency=2, poll_interval=1.0, reaper_interval=0.2).start()
    try:
        yield worker
    finally:
        worker.stop(timeout=5)


@pytest.mark.parametrize("how", ["returned", "attached"])
def test_a_result_over_max_result_bytes_is_dead_saying_by_how_much(
    small_results: Queue, how: str
) -> None:
    queue = small_results

    @queue.job("big", context=True, lease=LEASE, max_attempts=3)
    def big(ctx: JobContext) -> str | None:
        if how == "attached":
            ctx.attach("x" * 2000)
            return None
        return "x" * 2000

    job_id = big.enqueue()
    with running(queue):
        job = finished(queue, job_id)
    assert (job.status, job.run_count) == ("dead", 1)
    (entry,) = queue.journal(job_id)
    assert entry.outcome == "dead" and entry.attachment is None
    assert entry.note is not None
    assert "2002 bytes of JSON" in entry.note and "978 over" in entry.note
    assert "max_result_bytes=1024" in entry.note


def test_a_kind_may_allow_larger_results_than_its_queue(small_results: Queue) -> None:
    queue = small_results

    @queue.job("report", max_result_bytes=4096)
    def report() -> str:
        return "x" * 2000

    @queue.job("tiny", max_result_bytes=10)
    def tiny() -> str:
        return "x" * 20

    report_id, tiny_id = report.enqueue(), tiny.enqueue()
    queue.drain()
    (entry,) = queue.journal(report_id)
    assert (entry.outcome, entry.attachment) == ("completed", "x" * 2000)
    assert [e.outcome for e in queue.journal(tiny_id)] == ["dead"]


def test_the_default_result_limit_is_a_mebibyte(queue: Queue) -> None:
    @queue.job("huge")
    def huge() -> str:
        return "x" * (1 << 20)

    job_id = huge.enqueue()
    queue.drain()
    job = queue.get(job_id)
    assert job is not None and job.status == "dead"
    assert "max_result_bytes=1048576" in only_note(queue, job_id)


def test_a_huge_exception_message_is_cut_in_the_journal_and_the_log(
    queue: Queue, worker: Callable[[], Worker], caplog: pytest.LogCaptureFixture
) -> None:
    @queue.job("loud", lease=LEASE, max_attempts=1)
    def loud() -> None:
        raise ValueError("y" * (5 << 20))

    job_id = loud.enqueue()
    with caplog.at_level(logging.WARNING, logger="venturi.worker"):
        worker()
        finished(queue, job_id)
    note = only_note(queue, job_id)
    assert len(note) <= MAX_NOTE_CHARS and "ValueError: yyyy" in note
    (line,) = [r.getMessage() for r in caplog.records if "raised ValueError" in r.getMessage()]
    assert MAX_NOTE_CHARS // 2 < len(line) <= MAX_NOTE_CHARS + 200


# -- the fallback: a settlement the database refuses ----------------------------------

# Emulates a database whose encoding cannot hold a note's characters (SQL_ASCII aside,
# LATIN1 refuses most of Unicode with 22P05), and an attachment a server refuses: what
# the up-front checks let through, since they cannot know the server.
REFUSING_TRIGGER = """
CREATE FUNCTION {refuse}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.note ~ '[^\\x01-\\x7f]' OR NEW.attachment ? 'refuse' THEN
    RAISE EXCEPTION 'character has no equivalent in encoding "LATIN1"'
      USING ERRCODE = 'untranslatable_character';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON {journal} FOR EACH ROW EXECUTE FUNCTION {refuse}();
"""


@pytest.fixture
def refusing(probe: Probe) -> Iterator[None]:
    # The prefix is [a-z0-9_] (checked by Prefix), so its quoted name is safe to splice.
    function = f'"{probe.prefix.name}_refuse"'
    probe.rows(REFUSING_TRIGGER.replace("{refuse}", function))
    yield
    probe.rows(f"DROP TRIGGER refuse ON {{journal}}; DROP FUNCTION {function}()")


@pytest.mark.usefixtures("refusing")
def test_a_refused_completion_completes_without_what_was_refused_and_its_batch_settles(
    queue: Queue, start_worker: Callable[..., Worker]
) -> None:
    @queue.job("batch", context=True, lease=LEASE, max_attempts=3)
    def batch(ctx: JobContext, n: int) -> dict[str, int]:
        if n == 7:
            ctx.note("naïve résumé")
            return {"refuse": n}
        return {"n": n}

    ids = [batch.enqueue(n=n) for n in range(20)]
    start_worker(concurrency=8)
    jobs = [finished(queue, job_id) for job_id in ids]
    assert [(j.status, j.run_count) for j in jobs] == [("completed", 1)] * 20
    for n, job_id in enumerate(ids):
        (entry,) = queue.journal(job_id)
        assert entry.outcome == "completed"
        if n != 7:
            assert (entry.note, entry.attachment) == (None, {"n": n})
    (entry,) = queue.journal(ids[7])
    assert entry.attachment is None and entry.note is not None
    assert "could not be stored" in entry.note and "22P05" in entry.note
    assert "na\\xefve r\\xe9sum\\xe9" in entry.note  # the note, as ASCII any server holds


@pytest.mark.usefixtures("refusing")
@pytest.mark.parametrize(
    ("raised", "status", "outcome"),
    [
        pytest.param(lambda: Fail("donnée refusée"), "dead", "dead", id="fail"),
        pytest.param(lambda: Retry(after=3600, note="à plus"), "pending", "retried", id="retry"),
        pytest.param(lambda: Pause(after=3600, note="à plus"), "pending", "paused", id="pause"),
        pytest.param(lambda: ValueError("é"), "pending", "retried", id="exception"),
    ],
)
def test_a_refused_failure_is_still_that_failure(
    queue: Queue,
    worker: Callable[[], Worker],
    raised: Callable[[], BaseException],
    status: str,
    outcome: str,
) -> None:
    @queue.job("refused", lease=LEASE, max_attempts=3, backoff=lambda _: 3600)
    def refused() -> None:
        raise raised()

    job_id = refused.enqueue()
    worker()
    journaled(queue, job_id)
    job = queue.get(job_id)
    assert job is not None and (job.status, job.run_count) == (status, 1)
    (entry,) = queue.journal(job_id)
    assert entry.outcome == outcome
    assert entry.note is not None and "could not be stored" in entry.note
    assert entry.note.isascii()


def test_a_worker_process_runs_a_noted_job_once(
    queue: Queue, probe: Probe, database_dsn: str, tmp_path: Path
) -> None:
    """As first seen: a successful handler whose note held a NUL ran again and again."""
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.worker.hostile_proc", database_dsn, queue.prefix],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "ready" in log.read_text(), 60, what="the worker process to start")
        job_id = queue.enqueue("noted")
        job = finished(queue, job_id)
    finally:
        child.terminate()
        child.wait(30)
    assert (job.status, job.run_count) == ("completed", 1), log.read_text()
    assert only_note(queue, job_id) == STORED[NUL]
    assert "letting its lease lapse" not in log.read_text()
