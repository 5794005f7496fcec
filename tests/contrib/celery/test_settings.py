"""How an app reads its settings: keywords, ``conf``, ``config_from_object`` (modules,
text, classes, mappings, namespaces) and ``config_from_envvar``, and what the queue is
built from."""

from __future__ import annotations

from datetime import timedelta

import pytest

from venturi.contrib.celery import Celery, NotSupported
from venturi.contrib.celery.config import queue_options, settings_from
from venturi.contrib.settings import SettingsError
from venturi.errors import ConfigurationError
from venturi.schedules.retention import Retention


class CelerySettings:
    CELERY_TIMEZONE = "Europe/Paris"
    CELERY_TASK_DEFAULT_RETRY_DELAY = 5
    OTHER_SETTING = "not ours"
    celery_lowercase = "not in the namespace"


def test_a_namespace_takes_only_its_names_lower_cased() -> None:
    assert settings_from(CelerySettings, "CELERY", silent=False) == {
        "timezone": "Europe/Paris",
        "task_default_retry_delay": 5,
    }


def test_text_sources_and_missing_modules() -> None:
    found = settings_from("tests.contrib.celery.proj.celeryconfig", None, silent=False)
    assert found["timezone"] == "Europe/Berlin" and "timedelta" not in found
    assert "crontab" not in found  # the module's imports are not settings
    assert settings_from("no.such.module", None, silent=True) == {}
    with pytest.raises(ImportError):
        settings_from("no.such.module", None, silent=False)


def test_settings_given_to_the_app_win_over_its_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Celery("settings", set_as_current=False, timezone="UTC")
    app.config_from_object({"timezone": "Asia/Tokyo", "task_default_retry_delay": 7})
    monkeypatch.setenv("CELERY_CONFIG", "tests.contrib.celery.proj.celeryconfig")
    app.config_from_envvar("CELERY_CONFIG")
    conf = app.configured()
    assert conf.timezone == "UTC" and conf["task_default_retry_delay"] == 7
    assert "beat_schedule" in conf  # from the module named by the variable

    @app.task
    def slow() -> None: ...

    assert slow.default_retry_delay == 7
    with pytest.raises(ConfigurationError, match="CELERY_UNSET is not set"):
        app.config_from_envvar("CELERY_UNSET")


def test_the_queue_is_built_from_venturi_settings_or_a_postgres_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VENTURI_PREFIX", "from_env")
    broker = {"broker_url": "postgresql://db/app", "result_expires": timedelta(hours=2)}
    options = queue_options(broker)
    assert options["dsn"] == "postgresql://db/app" and options["prefix"] == "from_env"
    assert options["retention"] == Retention(completed=7200.0)
    chosen = {"broker_url": "redis://cache", "venturi_dsn": "dbname=x", "venturi_prefix": "p"}
    assert queue_options(chosen)["dsn"] == "dbname=x" and queue_options(chosen)["prefix"] == "p"
    assert queue_options({"broker_url": "redis://cache"})["dsn"] is None  # VENTURI_DSN
    shared = queue_options({"venturi_pool_size": 3, "venturi_read_dsn": "host=replica"})
    assert shared["pool_size"] == 3 and shared["read_dsn"] == "host=replica"


def test_venturi_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="venturi_pool_size must be a positive int"):
        queue_options({"venturi_pool_size": 0})
    with pytest.raises(SettingsError, match="unknown settings venturi_prefx; venturi reads"):
        queue_options({"venturi_prefx": "typo"})
    with pytest.raises(NotSupported, match="venturi_testing"):
        queue_options({"venturi_testing": "inline"})


def test_config_from_object_after_the_queue_was_built(celery_env: str) -> None:
    app = Celery("late", set_as_current=False)
    app.venturi_queue()
    with pytest.raises(ConfigurationError, match="after the app's queue was built"):
        app.config_from_object({"timezone": "UTC"})
    app.close()
