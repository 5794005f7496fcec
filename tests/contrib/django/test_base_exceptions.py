"""A ``django.tasks`` task that raises ``SystemExit`` (or any ``BaseException`` but
``KeyboardInterrupt``) fails like any other task, as Django's ImmediateBackend records
it, in a real worker process (``manage.py venturi worker``, alone or in a group) as in
a worker thread of this one: its error, attempts, start and ``task_finished`` are
recorded and the worker runs on (issue 36). So is a ``KeyboardInterrupt`` the task itself
raises in a worker's handler thread, where no signal can raise one."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("django.tasks")

from django.tasks import TaskResultStatus
from django.test.utils import override_settings

from tests.contrib.django.test_django import MANAGE, _shop_env
from tests.support import wait_until
from venturi import Queue

BACKEND = "venturi.contrib.django.VenturiBackend"
WAIT = 60.0


def _finished(task: Any, result_id: str) -> Any:
    return wait_until(
        lambda: (r := task.get_result(result_id)).is_finished and r,
        timeout=WAIT,
        what=f"task {result_id} to finish",
    )


def _recorded_failure(result: Any, exception: type[BaseException], runs: int) -> None:
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in result.errors] == [exception] * runs
    assert (
        result.errors[-1]
        .traceback.rstrip()
        .splitlines()[-1]
        .startswith(f"{exception.__module__}.{exception.__qualname__}".removeprefix("builtins."))
    )
    assert result.attempts == runs
    assert result.started_at is not None and result.last_attempted_at is not None
    assert len(result.worker_ids) == runs


@pytest.fixture
def worker_process(
    queue: Queue, orders_table: str, database_dsn: str, prefix: str
) -> Iterator[Any]:
    """A function that starts ``manage.py venturi worker ARGS`` for the shop; a worker
    the test left running is stopped with SIGTERM afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(MANAGE), "venturi", "worker", "--poll-interval", "1", *args],
            env=_shop_env(database_dsn, orders_table, prefix),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=WAIT)


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=WAIT)
    assert process.returncode == 0, errors
    return errors


@pytest.mark.parametrize("group", [[], ["--processes", "1"]], ids=["process", "group"])
def test_system_exit_in_a_worker_process_is_a_recorded_failure(
    shop: Any, worker_process: Any, group: list[str]
) -> None:
    result = shop.quit_now.enqueue()
    worker = worker_process("--concurrency", "1", *group)
    failed = _finished(shop.quit_now, result.id)  # MAX_ATTEMPTS is 2: two runs
    _recorded_failure(failed, SystemExit, 2)
    # The worker lived on: a task enqueued after the failure runs.
    after = shop.ship.enqueue(order_id=0)
    assert _finished(shop.ship, after.id).status == TaskResultStatus.SUCCESSFUL
    errors = _stop(worker)
    # task_finished fired in the worker: Django's own receiver logged the failure.
    assert f"id={result.id} path={shop.quit_now.module_path} state=FAILED" in errors


@pytest.mark.parametrize("name", ["quit_async", "abandon"])
def test_any_base_exception_but_keyboard_interrupt_is_a_recorded_failure(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]], name: str
) -> None:
    task = getattr(shop, name)
    result = task.enqueue()
    with queue.worker(concurrency=1, poll_interval=1):
        failed = _finished(task, result.id)
    raised = SystemExit if name == "quit_async" else shop.Abandon
    _recorded_failure(failed, raised, 2)
    assert signals.count(("finished", name, "FAILED")) == 1


def test_a_keyboard_interrupt_a_task_raises_in_a_worker_thread_is_a_recorded_failure(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    # No signal raises KeyboardInterrupt in a handler thread: the task raised it, and
    # the worker fails the run. The result used to say FAILED with no error, no
    # attempt, no start and no task_finished.
    result = shop.interrupt.enqueue()
    with queue.worker(concurrency=1, poll_interval=1):
        failed = _finished(shop.interrupt, result.id)
    _recorded_failure(failed, KeyboardInterrupt, 2)
    assert signals.count(("finished", "interrupt", "FAILED")) == 1


def test_system_exit_in_an_atomic_task_rolls_back_and_is_recorded(
    queue: Queue, shop: Any, signals: list[tuple[str, str, str]]
) -> None:
    from tests.contrib.django.shop.models import Order

    tasks = {
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "mail"]},
        "atomic_exit": {"BACKEND": BACKEND, "OPTIONS": {"ATOMIC": True, "MAX_ATTEMPTS": 1}},
    }
    with override_settings(TASKS=tasks):
        order = Order.objects.create(item="lamp")
        task = shop.quit_after_shipping.using(backend="atomic_exit")
        result = task.enqueue(order_id=order.pk)
        with queue.worker(concurrency=1, poll_interval=1):
            failed = _finished(task, result.id)
        _recorded_failure(failed, SystemExit, 1)
        order.refresh_from_db()
        assert order.status != "shipped", "the task's write outlived its failed run"
    assert ("finished", "quit_after_shipping", "FAILED") in signals
