"""DESIGN §6 for values: bad input raises a documented error naming the field and the
rule, before anything reaches the database."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ulid import ULID

from venturi.errors import ConfigurationError, InvalidJob, InvalidPayload, VenturiError
from venturi.models import (
    MAX_DEDUP_KEY_LENGTH,
    MAX_KIND_LENGTH,
    SMALLINT_MAX,
    SMALLINT_MIN,
    CleanupCriteria,
    HistoryFilter,
    NewJob,
)
from venturi.prefix import Prefix
from venturi.settlements import Settlement
from venturi.store.postgres import PostgresStore

NAIVE = datetime(2030, 1, 1, 12, 0)  # naive on purpose

# (what is wrong, NewJob keyword arguments, error class, words the message must hold)
BAD_JOBS: list[tuple[str, dict[str, Any], type[Exception], tuple[str, ...]]] = [
    ("empty kind", {"kind": ""}, InvalidJob, ("kind", "empty")),
    ("over-long kind", {"kind": "k" * (MAX_KIND_LENGTH + 1)}, InvalidJob, ("kind", "at most")),
    ("kind not a str", {"kind": 12}, InvalidJob, ("kind", "str")),
    ("kind with a space", {"kind": "send email"}, InvalidJob, ("kind", "ASCII")),
    ("kind with unicode", {"kind": "sénd"}, InvalidJob, ("kind", "ASCII")),
    ("payload a list", {"payload": [1, 2]}, InvalidPayload, ("payload", "JSON object")),
    ("payload a str", {"payload": "{}"}, InvalidPayload, ("payload", "JSON object")),
    ("payload None", {"payload": None}, InvalidPayload, ("payload", "JSON object")),
    (
        "payload not serialisable",
        {"payload": {"when": datetime.now(UTC)}},
        InvalidPayload,
        ("payload.when", "not JSON-serialisable"),
    ),
    (
        "payload holding a set",
        {"payload": {"s": {1}}},
        InvalidPayload,
        ("payload.s", "not JSON-serialisable"),
    ),
    (
        "payload holding bytes",
        {"payload": {"b": b"x"}},
        InvalidPayload,
        ("payload.b", "not JSON-serialisable"),
    ),
    ("payload NaN", {"payload": {"x": math.nan}}, InvalidPayload, ("payload.x", "NaN")),
    (
        "payload Infinity deep",
        {"payload": {"a": [1, {"b": math.inf}]}},
        InvalidPayload,
        ("payload.a[1].b", "Infinity"),
    ),
    ("payload -Infinity", {"payload": {"x": -math.inf}}, InvalidPayload, ("payload.x", "NaN")),
    ("payload key not a str", {"payload": {1: "one"}}, InvalidPayload, ("payload", "key")),
    ("payload NUL", {"payload": {"t": "a\x00b"}}, InvalidPayload, ("payload.t", "NUL")),
    (
        "payload lone surrogate",
        {"payload": {"t": "\ud800"}},
        InvalidPayload,
        ("payload.t", "Unicode"),
    ),
    (
        "priority above smallint",
        {"priority": SMALLINT_MAX + 1},
        InvalidJob,
        ("priority", "smallint"),
    ),
    (
        "priority below smallint",
        {"priority": SMALLINT_MIN - 1},
        InvalidJob,
        ("priority", "smallint"),
    ),
    ("priority a float", {"priority": 1.5}, InvalidJob, ("priority", "int")),
    ("priority a bool", {"priority": True}, InvalidJob, ("priority", "int")),
    ("naive at", {"at": NAIVE}, InvalidJob, ("at", "timezone-aware")),
    ("at not a datetime", {"at": "2030-01-01"}, InvalidJob, ("at", "datetime")),
    ("negative delay", {"delay": -1}, InvalidJob, ("delay", "negative")),
    ("negative timedelta", {"delay": timedelta(seconds=-0.5)}, InvalidJob, ("delay", "negative")),
    ("NaN delay", {"delay": math.nan}, InvalidJob, ("delay", "finite")),
    ("infinite delay", {"delay": math.inf}, InvalidJob, ("delay", "finite")),
    ("delay a str", {"delay": "5"}, InvalidJob, ("delay", "seconds")),
    ("delay with at", {"delay": 5, "at": datetime.now(UTC)}, InvalidJob, ("delay", "at")),
    ("empty dedup_key", {"dedup_key": ""}, InvalidJob, ("dedup_key",)),
    (
        "over-long dedup_key",
        {"dedup_key": "k" * (MAX_DEDUP_KEY_LENGTH + 1)},
        InvalidJob,
        ("dedup_key",),
    ),
    ("dedup_key not a str", {"dedup_key": 5}, InvalidJob, ("dedup_key", "str")),
    ("dedup_key with NUL", {"dedup_key": "a\x00"}, InvalidJob, ("dedup_key", "NUL")),
    (
        "unknown on_duplicate",
        {"dedup_key": "k", "on_duplicate": "merge"},
        InvalidJob,
        ("on_duplicate",),
    ),
    (
        "on_duplicate without a key",
        {"on_duplicate": "replace"},
        InvalidJob,
        ("on_duplicate", "dedup_key"),
    ),
    ("max_attempts zero", {"max_attempts": 0}, InvalidJob, ("max_attempts", "at least 1")),
    ("max_attempts a str", {"max_attempts": "3"}, InvalidJob, ("max_attempts", "int")),
    ("max_attempts a bool", {"max_attempts": True}, InvalidJob, ("max_attempts", "int")),
    (
        "max_attempts above int4",
        {"max_attempts": 2**31},
        InvalidJob,
        ("max_attempts", "at most"),
    ),
    ("payload None", {"payload": None}, InvalidPayload, ("payload", "NoneType")),
]


def _build(kwargs: dict[str, Any]) -> NewJob:
    return NewJob(**{"kind": "valid.kind", **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "error", "words"), [c[1:] for c in BAD_JOBS], ids=[c[0] for c in BAD_JOBS]
)
def test_a_bad_new_job_is_refused_naming_the_field(
    kwargs: dict[str, Any], error: type[Exception], words: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        _build(kwargs)
    assert isinstance(info.value, VenturiError)
    assert isinstance(info.value, ValueError)
    for word in words:
        assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"


def test_good_boundaries_are_accepted() -> None:
    longest = _build({"kind": "k" * MAX_KIND_LENGTH, "priority": SMALLINT_MAX})
    assert (longest.kind, longest.priority) == ("k" * MAX_KIND_LENGTH, SMALLINT_MAX)
    key = "k" * MAX_DEDUP_KEY_LENGTH
    lowest = _build({"priority": SMALLINT_MIN, "delay": 0, "dedup_key": key})
    assert (lowest.priority, lowest.delay_seconds, lowest.dedup_key) == (SMALLINT_MIN, 0.0, key)
    payload = {"n": 2**62, "f": 1.5, "u": "é✓"}
    later = _build({"delay": timedelta(minutes=5), "payload": payload})
    assert later.delay_seconds == 300.0 and json.loads(later.payload_json) == payload
    at = datetime.now(UTC)
    once = _build({"at": at, "max_attempts": 1})
    assert (once.at, once.delay_seconds, once.max_attempts) == (at, None, 1)
    most = _build({"max_attempts": 2**31 - 1})
    assert (most.max_attempts, most.payload, most.payload_json) == (2**31 - 1, {}, "{}")
    assert _build({}).payload is not _build({}).payload  # each job its own empty dict


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Settlement.retry(-1), ("retry delay", "negative")),
        (lambda: Settlement.retry(math.inf), ("retry delay", "finite")),
        (lambda: Settlement.pause(delay=-2), ("pause delay", "negative")),
        (lambda: Settlement.pause(delay=1, at=datetime.now(UTC)), ("after", "until")),
        (lambda: Settlement.pause(at=NAIVE), ("until", "timezone-aware")),
        (lambda: HistoryFilter(status="running"), ("status", "pending")),
        (lambda: HistoryFilter(finished_since=NAIVE), ("finished_since", "timezone-aware")),
        (lambda: HistoryFilter(finished_until=NAIVE), ("finished_until", "timezone-aware")),
        (lambda: CleanupCriteria(finished_before=NAIVE), ("finished_before", "timezone-aware")),
        (lambda: CleanupCriteria(datetime.now(UTC), status="pending"), ("status", "terminal")),
        (lambda: CleanupCriteria(datetime.now(UTC), status="claimed"), ("status", "terminal")),
    ],
)
def test_bad_settlements_and_filters_are_refused(
    make: Callable[[], object], words: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidJob) as info:
        make()
    for word in words:
        assert word in str(info.value)


def test_bad_job_ids_are_refused() -> None:
    from venturi.models import to_uuid

    with pytest.raises(InvalidJob, match="job id"):
        to_uuid("not-an-id")
    with pytest.raises(InvalidJob, match="job id"):
        to_uuid(12345)  # type: ignore[arg-type]
    ulid = ULID()
    assert to_uuid(str(ulid)) == to_uuid(ulid) == ulid.to_uuid()
    assert to_uuid(str(ulid.to_uuid())) == ulid.to_uuid()


def test_a_malformed_dsn_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="dsn"):
        PostgresStore.from_dsn("host=x port", Prefix("validation"))


def test_delay_beyond_a_century_is_refused_before_sql() -> None:
    with pytest.raises(InvalidJob, match=r"delay .* more than"):
        NewJob("k", {}, delay=1e13)
