"""Defining, calling, retrying and revoking tasks of a Celery-style project, run by a
real `venturi worker --app` process and read back through `AsyncResult`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import venturi
from tests.support import wait_until
from venturi.contrib.celery import AsyncResult, MaxRetriesExceededError, TaskRevokedError, chain

from .conftest import StartWorker
from .demoapp import tasks as demo
from .proj import tasks
from .proj.celery import app

APP = "tests.contrib.celery.proj.celery:app"


def log(worker: object) -> str:
    return str(worker.log.read_text())  # type: ignore[attr-defined]


def test_positional_and_keyword_arguments_round_trip(celery_worker: StartWorker) -> None:
    worker = celery_worker(APP, "-c", "4")
    result = tasks.echo.apply_async(args=[1, "two", [3]], kwargs={"four": {"five": 5}})
    assert result.get(timeout=60) == {"args": [1, "two", [3]], "kwargs": {"four": {"five": 5}}}, (
        log(worker)
    )
    assert tasks.echo.delay(None, x=1.5).get(timeout=60) == {"args": [None], "kwargs": {"x": 1.5}}
    assert app.send_task("proj.echo", args=[7]).get(timeout=60) == {"args": [7], "kwargs": {}}


def test_shared_tasks_of_the_django_example_run_through_the_project_app(
    celery_worker: StartWorker,
) -> None:
    celery_worker(APP)
    assert demo.add.delay(2, 2).get(timeout=60) == 4
    assert demo.mul.delay(3, 4).get(timeout=60) == 12
    assert demo.xsum.delay([1, 2, 3]).get(timeout=60) == 6
    assert demo.add.name == "tests.contrib.celery.demoapp.tasks.add"
    assert app.tasks[demo.add.name] is demo.add


def test_bound_task_retries_with_its_request(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    result = tasks.retry_until.delay(2)
    answer = result.get(timeout=60)
    assert answer == {"id": result.id, "retries": 2}


def test_retries_past_max_retries_fail_with_the_tasks_error(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    result = tasks.retry_until.delay(10)  # max_retries=3
    with pytest.raises(tasks.FlakyError, match="attempt 3"):
        result.get(timeout=60)
    assert result.state == "FAILURE" and result.failed()
    assert isinstance(result.result, tasks.FlakyError)
    assert "FlakyError" in (result.traceback or "")
    runs = app.venturi_queue().get(result.id)
    assert runs is not None and runs.run_count == 4


def test_autoretry_for_with_backoff(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    assert tasks.autoretried.delay(2).get(timeout=60) == 2
    exhausted = tasks.autoretried.delay(5)  # max_retries=2
    with pytest.raises(tasks.FlakyError, match="failure 3"):
        exhausted.get(timeout=60)
    journal = app.venturi_queue().journal(exhausted.id)
    assert [row.outcome for row in journal] == ["retried", "retried", "dead"]


def test_dont_autoretry_for_fails_at_once(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    with pytest.raises(tasks.PermanentError, match="after 0 retries"):
        tasks.gives_up.delay().get(timeout=60)


def test_failure_raises_the_error_type_by_name_and_propagate_false_returns_it(
    celery_worker: StartWorker,
) -> None:
    celery_worker(APP)
    result = tasks.explode.delay("no such widget")
    with pytest.raises(LookupError, match="no such widget"):
        result.get(timeout=60)
    error = result.get(timeout=1, propagate=False)
    assert isinstance(error, LookupError)
    journal = app.venturi_queue().journal(result.id)
    assert [row.outcome for row in journal] == ["dead"]  # no retry: Celery does not retry


def test_a_return_value_json_cannot_hold_fails_the_task(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        tasks.not_json.delay().get(timeout=60)


def test_countdown_and_eta_hold_the_run_back(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    later = tasks.echo.apply_async(args=["later"], countdown=3600)
    at = tasks.echo.apply_async(args=["at"], eta=datetime.now(UTC) + timedelta(hours=1))
    soon = tasks.echo.apply_async(args=["soon"], countdown=0.5)
    assert soon.get(timeout=60)["args"] == ["soon"]
    assert later.state == "PENDING" and at.state == "PENDING"
    record = app.venturi_queue().get(later.id)
    assert record is not None and record.visible_at > datetime.now(UTC) + timedelta(minutes=50)
    naive = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2)
    as_utc = tasks.echo.apply_async(eta=naive)
    stored = app.venturi_queue().get(as_utc.id)
    assert stored is not None and abs(stored.visible_at - naive.replace(tzinfo=UTC)) < timedelta(
        seconds=1
    )


def test_retry_countdown_delays_the_next_run(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    result = tasks.retry_countdown.delay(3600)
    queue = app.venturi_queue()
    wait_until(lambda: result.state == "RETRY", timeout=60, what="the first run to retry")
    record = queue.get(result.id)
    assert record is not None and record.visible_at > datetime.now(UTC) + timedelta(minutes=50)
    assert not result.ready()


def test_revoke_cancels_a_pending_task(celery_worker: StartWorker) -> None:
    result = tasks.echo.apply_async(args=["never"], countdown=3600)
    assert result.revoke() is True
    assert result.state == "REVOKED" and result.ready()
    with pytest.raises(TaskRevokedError):
        result.get(timeout=5)
    other = tasks.echo.apply_async(countdown=3600)
    app.control.revoke(other.id)
    assert app.AsyncResult(other.id).state == "REVOKED"


def test_expired_task_fails_as_revoked(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    result = tasks.echo.apply_async(
        args=["stale"], expires=datetime.now(UTC) - timedelta(seconds=1)
    )
    with pytest.raises(TaskRevokedError, match="expired"):
        result.get(timeout=60)


def test_unknown_id_is_pending_and_get_times_out(celery_env: str) -> None:
    result = AsyncResult("01JE0000000000000000000000", app=app)
    assert result.state == "PENDING" and not result.ready()
    pending = tasks.echo.apply_async(countdown=3600)
    with pytest.raises(TimeoutError):
        pending.get(timeout=0.2)


def test_a_time_limit_sets_the_runs_stopping_event(celery_worker: StartWorker) -> None:
    celery_worker(APP)
    assert tasks.stops_at_its_time_limit.delay().get(timeout=60) == "stopped"


def test_enqueue_joins_a_sqlalchemy_session(celery_env: str, database_dsn: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    queue = app.venturi_queue()
    engine = create_engine(database_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with Session(engine) as session:
            dropped = tasks.echo.apply_async(args=["dropped"], conn=session)
            session.rollback()
            kept = tasks.echo.apply_async(args=["kept"], conn=session)
            session.commit()
    finally:
        engine.dispose()
    assert queue.get(dropped.id) is None and queue.get(kept.id) is not None


def test_task_options_map_onto_the_kind(celery_env: str) -> None:
    definitions = app.venturi_queue().definitions
    echo = definitions["proj.echo"]
    assert str(echo.rate) == "100/m"
    assert definitions["tests.contrib.celery.proj.tasks.sleepy"].timeout == 30
    assert definitions["tests.contrib.celery.proj.tasks.retry_until"].max_attempts == 4


def test_retry_outside_a_worker_and_max_retries_exceeded(celery_env: str) -> None:
    with pytest.raises(RuntimeError, match="outside a worker run"):
        tasks.retry_countdown(1)
    assert issubclass(MaxRetriesExceededError, venturi.VenturiError)


def test_enqueue_joins_the_callers_transaction(celery_env: str, database_dsn: str) -> None:
    import psycopg

    queue = app.venturi_queue()
    with psycopg.connect(database_dsn) as conn:
        kept = tasks.echo.apply_async(args=["kept"], conn=conn)
        assert queue.get(kept.id) is None  # not committed yet
    assert queue.get(kept.id) is not None
    with psycopg.connect(database_dsn) as conn:
        dropped = tasks.echo.apply_async(args=["dropped"], conn=conn)
        conn.rollback()
    assert queue.get(dropped.id) is None


def test_dash_q_chooses_the_tasks_a_worker_runs(celery_worker: StartWorker) -> None:
    celery_worker(APP, "-Q", "proj.echo", "-c", "1")
    skipped = tasks.explode.delay("not for this worker")
    assert tasks.echo.delay("mine").get(timeout=60) == {"args": ["mine"], "kwargs": {}}
    assert skipped.state == "PENDING"


def test_inline_test_mode_runs_tasks_as_they_are_called(celery_env: str) -> None:
    from venturi.testing import inline

    app.set_current()  # the shared tasks' app, whichever app was made last
    queue = app.venturi_queue()
    with inline(queue):
        assert demo.add.delay(20, 22).get(timeout=5) == 42
        # A canvas is one workflow: inline mode runs it at the next enqueue or at the end.
        chained = chain(demo.add.s(1, 1), demo.mul.s(5))()
    assert chained.get(timeout=5) == 10
