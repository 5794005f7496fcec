"""DESIGN §6 for the store layer: bad input raises a documented error naming the field and
the rule, and nothing is written."""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ulid import ULID

from tests.support import Probe
from venturi.errors import ConfigurationError, InvalidJob, InvalidPayload, VenturiError
from venturi.models import (
    MAX_DEDUP_KEY_LENGTH,
    MAX_KIND_LENGTH,
    SMALLINT_MAX,
    SMALLINT_MIN,
    CleanupCriteria,
    HistoryFilter,
    JobStatus,
    NewJob,
)
from venturi.prefix import Prefix
from venturi.settlements import Claim, Settlement
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


@pytest.mark.parametrize("size", [0, -1, True, 2.5, "4"])
def test_pool_size_must_be_a_positive_int(database_dsn: str, size: Any) -> None:
    name = f"poolsize{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigurationError, match="pool_size") as info:
        PostgresStore.from_dsn(database_dsn, Prefix(name), pool_size=size)
    assert repr(size) in str(info.value)
    running = [t.name for t in threading.enumerate() if name in t.name]
    assert not running, f"a refused store left its pool running: {running}"


def test_a_malformed_dsn_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="dsn"):
        PostgresStore.from_dsn("host=x port", Prefix("validation"))


@pytest.mark.parametrize(
    ("options", "error"),
    [({"max_payload_bytes": 0}, ConfigurationError), ({"no_such_option": 1}, TypeError)],
)
def test_a_refused_store_option_leaves_no_pool_running(
    database_dsn: str, options: dict[str, Any], error: type[Exception]
) -> None:
    name = f"refused{uuid.uuid4().hex[:8]}"
    [option] = options
    with pytest.raises(error, match=option) as info:
        PostgresStore.from_dsn(database_dsn, Prefix(name), **options)
    assert type(info.value) is error, repr(info.value)
    # ``info`` keeps the failed call's frames (and so any pool it opened) alive here.
    running = [t.name for t in threading.enumerate() if name in t.name]
    assert not running, f"a refused store left its pool running: {running}"


# --- against the database: the error, and nothing written -----------------------------


def _nothing_written(probe: Probe) -> None:
    assert probe.count("jobs") == 0
    assert probe.count("journal") == 0


def test_an_oversize_payload_is_refused_and_nothing_written(
    make_store: Callable[..., PostgresStore], prefix: str, database_dsn: str
) -> None:
    small = make_store(prefix, max_payload_bytes=64)
    small.migrate()
    probe = Probe(database_dsn, prefix)
    try:
        fits = {"t": "x" * (64 - len('{"t":""}'))}
        small.enqueue(NewJob("k", fits))
        probe.rows("DELETE FROM {jobs}")
        too_big = {"t": "x" * (65 - len('{"t":""}'))}
        with pytest.raises(InvalidPayload, match=r"payload.*65 bytes.*limit is 64"):
            small.enqueue(NewJob("k", too_big))
        with pytest.raises(InvalidPayload, match="max_payload_bytes"):
            small.enqueue_many([NewJob("k", {}), NewJob("k", too_big), NewJob("k", {})])
        with pytest.raises(InvalidPayload):
            small.enqueue(NewJob("k", too_big, dedup_key="d", on_duplicate="replace"))
        _nothing_written(probe)
    finally:
        probe.close()


def test_a_merge_function_returning_a_bad_payload_writes_nothing(
    store: PostgresStore, probe: Probe
) -> None:
    holder = store.enqueue(NewJob("k", {"n": 1}, dedup_key="d"))

    def to_list(old: dict[str, Any], new: dict[str, Any]) -> Any:
        return [old, new]

    def to_nan(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return {"n": math.nan}

    with pytest.raises(InvalidPayload, match="merge function"):
        store.enqueue(NewJob("k", {"n": 2}, dedup_key="d", on_duplicate=to_list))
    with pytest.raises(InvalidPayload, match="NaN"):
        store.enqueue(NewJob("k", {"n": 2}, dedup_key="d", on_duplicate=to_nan))
    job = store.get(holder)
    assert job is not None and job.payload == {"n": 1}
    assert probe.count("jobs") == 1
    assert probe.count("journal") == 0


def test_a_carry_that_is_not_json_fails_the_settlement_and_writes_nothing(
    store: PostgresStore, probe: Probe
) -> None:
    store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 30}, 1)
    with pytest.raises(InvalidPayload, match="carry"):
        store.settle(Claim.of(job), Settlement.retry(0, carry={"x": math.nan}))
    with pytest.raises(InvalidPayload, match="attachment"):
        store.settle(Claim.of(job), Settlement.complete(attachment={1, 2}))
    after = store.get(job.id)
    assert after is not None and after.status is JobStatus.CLAIMED
    assert after.failure_count == 0 and after.carry is None
    assert probe.count("journal") == 0


def test_unknown_job_ids_read_as_absent(store: PostgresStore, probe: Probe) -> None:
    unknown = ULID()
    assert store.get(unknown) is None
    assert store.get(str(unknown)) is None
    assert store.get(uuid.uuid4()) is None
    assert store.journal(unknown) == []
    assert store.cancel(unknown) is False
    assert store.requeue(unknown) is False
    with pytest.raises(InvalidJob, match="job id"):
        store.get("nope")
    _nothing_written(probe)


def test_delay_beyond_a_century_is_refused_before_sql() -> None:
    with pytest.raises(InvalidJob, match=r"delay .* more than"):
        NewJob("k", {}, delay=1e13)
