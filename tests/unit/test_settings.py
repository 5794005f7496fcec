"""One settings schema for the Flask and Django integrations: every rule holds in both,
and both raise the one settings error (Django's is also `ImproperlyConfigured`)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from venturi import ConfigurationError
from venturi.contrib.django.conf import VenturiSettings
from venturi.contrib.flask import FlaskSettings
from venturi.contrib.settings import QueueSettings, SettingsError

INTEGRATIONS = [
    pytest.param(FlaskSettings, "VENTURI_{}", id="flask"),
    pytest.param(VenturiSettings, "VENTURI['{}']", id="django"),
]

BAD_VALUES = [
    ("pool_size", 0),
    ("pool_size", -3),
    ("pool_size", True),
    ("pool_size", "4"),
    ("max_payload_bytes", 0),
    ("max_payload_bytes", 1.5),
    ("strict", 1),
    ("prefix", ""),
    ("prefix", None),
    ("listen_dsn", ""),
    ("listen_dsn", 5432),
    ("testing", "eager"),
    ("testing", True),
    ("testing", ""),
]

GOOD_VALUES = [
    ("pool_size", None),
    ("pool_size", 1),
    ("max_payload_bytes", 1),
    ("strict", True),
    ("prefix", "jobs"),
    ("listen_dsn", None),
    ("listen_dsn", "host=db"),
    ("testing", None),
    ("testing", "inline"),
    ("testing", "manual"),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
@pytest.mark.parametrize(("schema", "spelling"), INTEGRATIONS)
def test_each_shared_rule_refuses_a_bad_value_naming_the_key(
    schema: type[QueueSettings], spelling: str, field: str, value: Any
) -> None:
    key = spelling.format(field.upper())
    with pytest.raises(SettingsError, match=re.escape(key)) as info:
        schema(**{field: value})
    assert isinstance(info.value, ConfigurationError)
    assert isinstance(info.value, schema.error)


@pytest.mark.parametrize(("field", "value"), GOOD_VALUES)
@pytest.mark.parametrize(("schema", "spelling"), INTEGRATIONS)
def test_each_shared_rule_takes_a_good_value(
    schema: type[QueueSettings], spelling: str, field: str, value: Any
) -> None:
    assert getattr(schema(**{field: value}), field) == value


def test_django_errors_are_also_improperly_configured() -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape("VENTURI['POOL_SIZE']")):
        VenturiSettings(pool_size=0)


@pytest.mark.parametrize(("schema", "spelling"), INTEGRATIONS)
def test_unknown_keys_are_refused(schema: type[QueueSettings], spelling: str) -> None:
    typo = spelling.format("POOLSIZE").removeprefix("VENTURI['").removesuffix("']")
    with pytest.raises(SettingsError, match="POOLSIZE"):
        schema.from_keys({typo: 2}, "keys")


def test_both_hand_the_queue_the_same_options() -> None:
    given: dict[str, Any] = {"prefix": "p", "pool_size": 3, "strict": True, "listen_dsn": "host=db"}
    assert FlaskSettings(**given).queue_options() == VenturiSettings(**given).queue_options()


def test_flask_worker_keys_follow_the_same_rules() -> None:
    with pytest.raises(SettingsError, match="VENTURI_WORKER_CONCURRENCY"):
        FlaskSettings(worker_concurrency=0)
    with pytest.raises(SettingsError, match="VENTURI_WORKER_STOP_TIMEOUT must be positive"):
        FlaskSettings(worker_stop_timeout=0)
    with pytest.raises(SettingsError, match="VENTURI_WORKER_POLL_INTERVAL must be seconds"):
        FlaskSettings(worker_poll_interval="5s")
    settings = FlaskSettings(worker_kinds=["a", "b"], worker_poll_interval=timedelta(minutes=1))
    assert (settings.worker_kinds, settings.worker_poll_interval) == (("a", "b"), 60.0)
    with pytest.raises(SettingsError, match="VENTURI\\['AUTODISCOVER'\\]"):
        VenturiSettings(autodiscover=["jobs", 3])
