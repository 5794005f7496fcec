"""Every Celery feature the compatible API does not provide raises `NotSupported` naming
it, where it is configured or called: never a silent difference."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from venturi.contrib.celery import (
    AsyncResult,
    Celery,
    GroupResult,
    NotSupported,
    Task,
    crontab,
    group,
)
from venturi.errors import ConfigurationError


@pytest.fixture
def app() -> Iterator[Celery]:
    made = Celery("unsupported", set_as_current=False)
    yield made
    made.close()


def plain(x: int) -> int:
    return x


def refused(action: Callable[[], Any], feature: str) -> None:
    with pytest.raises(NotSupported) as caught:
        action()
    assert feature in str(caught.value), str(caught.value)
    assert "not supported by venturi.contrib.celery" in str(caught.value)


@pytest.mark.parametrize(
    ("setting", "value", "feature"),
    [
        ("task_serializer", "pickle", "the 'pickle' serializer (task_serializer)"),
        ("result_serializer", "yaml", "the 'yaml' serializer (result_serializer)"),
        ("accept_content", ["json", "pickle"], "accepting pickle (accept_content)"),
        ("task_routes", {"proj.*": {"queue": "emails"}}, "custom routers (task_routes)"),
        ("task_annotations", {"*": {"rate_limit": "1/s"}}, "task_annotations"),
        ("task_always_eager", True, "task_always_eager"),
        ("beat_scheduler", "django_celery_beat.schedulers:DatabaseScheduler", "beat_scheduler"),
        ("worker_concurrency", 8, "the setting worker_concurrency"),
        ("worker_prefetch_multiplier", 1, "the setting worker_prefetch_multiplier"),
        ("result_backend_transport_options", {}, "the setting result_backend_transport_options"),
    ],
)
def test_settings_that_would_differ_are_refused_when_the_app_starts(
    app: Celery, setting: str, value: Any, feature: str
) -> None:
    app.conf[setting] = value
    refused(app.venturi_queue, feature)


def test_worker_settings_name_the_command_line_flag(app: Celery) -> None:
    app.conf.worker_concurrency = 8
    with pytest.raises(NotSupported, match=r"venturi worker takes --concurrency \(-c\)"):
        app.venturi_queue()


def test_task_options(app: Celery) -> None:
    class MyTask(Task):
        pass

    refused(lambda: app.task(base=MyTask)(plain), "base='MyTask' (a custom Task class)")
    refused(lambda: app.task(serializer="pickle")(plain), "the 'pickle' serializer")
    refused(lambda: app.task(queue="emails")(plain), "to queue 'emails'")
    refused(lambda: app.task(expires=60)(plain), "the task option expires=")
    with pytest.raises(TypeError, match="unknown options bogus"):
        app.task(bogus=1)(plain)
    with pytest.raises(ConfigurationError, match="rate_limit"):
        app.task(rate_limit="fast")(plain)


def test_call_options(app: Celery) -> None:
    task = app.task(name="unsupported.plain")(plain)
    refused(lambda: task.apply_async((1,), link_error=task.s()), "apply_async(link_error=)")
    refused(lambda: task.apply_async((1,), task_id="abc"), "apply_async(task_id=)")
    refused(lambda: task.apply_async((1,), queue="emails"), "to queue 'emails'")
    refused(lambda: task.apply_async((1,), serializer="pickle"), "the 'pickle' serializer")
    refused(lambda: task.apply_async((1,), time_limit=5), "apply_async(time_limit=)")
    refused(lambda: task.apply_async((1,), headers={"a": 1}), "apply_async(headers=)")
    refused(lambda: task.s(1).link_error(task.s()), "link_error (error callbacks)")
    refused(task.apply, "Task.apply()")
    refused(lambda: task.map([1]), "Task.map()")
    refused(lambda: task.starmap([(1,)]), "Task.starmap()")
    refused(lambda: task.chunks([1], 1), "Task.chunks()")
    refused(lambda: group(group(task.s(1)), task.s(2)), "a group directly inside a group")
    with pytest.raises(TypeError, match="unknown options bogus"):
        task.apply_async((1,), bogus=True)


def test_results_app_and_beat(app: Celery) -> None:
    refused(lambda: AsyncResult("x", app=app).forget(), "AsyncResult.forget()")
    refused(lambda: AsyncResult("x", app=app).get(callback=print), "AsyncResult.get(callback=...)")
    refused(GroupResult(None, []).save, "GroupResult.save()")
    refused(lambda: app.control.inspect, "app.control.inspect")
    refused(lambda: Celery("x", loader="custom"), "Celery(loader=...)")
    refused(lambda: crontab(minute=0, nowfun=print), "crontab(nowfun=)")


def test_retry_beyond_the_tasks_budget_and_with_new_arguments(app: Celery) -> None:
    from venturi.contrib.celery.running import Request, current_request

    @app.task(bind=True, max_retries=2, name="unsupported.bound")
    def bound(self: Any) -> None: ...

    token = current_request.set(Request(id="x", task="unsupported.bound", called_directly=False))
    try:
        refused(lambda: bound.retry(max_retries=5), "self.retry(max_retries=5)")
        refused(lambda: bound.retry(args=(1,)), "self.retry(args=, kwargs=)")
    finally:
        current_request.reset(token)
