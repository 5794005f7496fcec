"""Schedules through the Flask extension and the Django module, which register before any
queue exists and replay onto each queue they build."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from flask import Flask

from venturi.contrib.flask import Venturi
from venturi.contrib.lazy import Registry
from venturi.errors import ConfigurationError, InvalidJob, UnknownKind
from venturi.schedules.schedule import Schedule


class _Target:
    def enqueue(self, kind: str, payload: Any = None, **options: Any) -> Any:
        raise AssertionError("not enqueued in these tests")


def _app(database_dsn: str, prefix: str, ext: Venturi) -> Flask:
    app = Flask(__name__)
    app.config.update(
        VENTURI_DSN=database_dsn, VENTURI_PREFIX=prefix, VENTURI_RETENTION="completed=2d"
    )
    ext.init_app(app)
    return app


def test_flask_periodic_and_schedule_reach_the_app_s_queue(database_dsn: str, prefix: str) -> None:
    ext = Venturi()

    @ext.periodic("reports.nightly", cron="0 3 * * *", tz="Europe/Berlin", max_attempts=2)
    def nightly(scheduled_at: datetime) -> None: ...

    ext.schedule("reports.nightly", every="1h", name="reports-hourly")
    with pytest.raises(ConfigurationError, match="at least 1s"):
        ext.periodic("bad", every=0.1)(nightly)
    with pytest.raises(UnknownKind):
        ext.schedule("missing", every=60)
    app = _app(database_dsn, prefix, ext)
    with app.app_context():
        queue = ext.queue
        try:
            assert set(queue.schedules) == {"reports.nightly", "reports-hourly"}
            nightly_schedule: Schedule = queue.schedules["reports.nightly"]
            assert nightly_schedule.timing.expression == "0 3 * * *"
            assert nightly_schedule.with_slot and nightly_schedule.max_attempts == 2
            assert "bad" not in queue.definitions
            assert queue.retention.completed == 2 * 86_400
        finally:
            ext.queue.close()


def test_registry_refuses_a_bad_schedule_before_keeping_anything() -> None:
    registry = Registry()

    def handler(size: int) -> None: ...

    with pytest.raises(InvalidJob, match="missing required keys 'size'"):
        registry.periodic(_Target(), "job", {"every": 60})(handler)
    assert registry.kinds == []
    registry.periodic(_Target(), "job", {"every": 60, "payload": {"size": 1}})(handler)
    with pytest.raises(ConfigurationError, match="'job' already exists"):
        registry.schedule("job", every=30, payload={"size": 2})
    with pytest.raises(ConfigurationError, match="'job' already exists"):
        registry.periodic(_Target(), "job2", {"every": 60, "name": "job", "payload": {"size": 1}})(
            handler
        )
    assert registry.kinds == ["job"]


def test_django_periodic_and_schedule_check_at_import() -> None:
    from venturi.contrib import django as integration

    before = integration.registry.kinds

    def handler(scheduled_at: datetime) -> None: ...

    # Refused before anything is kept (the module's registry is the project's own).
    with pytest.raises(ConfigurationError, match="not a known time zone"):
        integration.periodic("schedules.test", cron="0 3 * * *", tz="Nowhere/Never")(handler)
    with pytest.raises(UnknownKind, match="no handler is registered"):
        integration.schedule("schedules.unregistered", every=60)
    assert integration.registry.kinds == before
