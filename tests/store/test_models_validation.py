"""DESIGN §6 for the store layer: bad input raises a documented error naming the field and
the rule, and nothing is written."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from ulid import ULID

from tests.support import Probe
from venturi.errors import ConfigurationError, InvalidJob, InvalidPayload
from venturi.models import (
    JobStatus,
    NewJob,
)
from venturi.prefix import Prefix
from venturi.settlements import Claim, Settlement
from venturi.store.postgres import PostgresStore


@pytest.mark.parametrize("size", [0, -1, True, 2.5, "4"])
def test_pool_size_must_be_a_positive_int(database_dsn: str, size: Any) -> None:
    name = f"poolsize{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigurationError, match="pool_size") as info:
        PostgresStore.from_dsn(database_dsn, Prefix(name), pool_size=size)
    assert repr(size) in str(info.value)
    running = [t.name for t in threading.enumerate() if name in t.name]
    assert not running, f"a refused store left its pool running: {running}"


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
        # The limit counts UTF-8 bytes, not characters: 65 characters, 57 of them 2 bytes.
        wide = {"t": "é" * (65 - len('{"t":""}'))}
        with pytest.raises(InvalidPayload, match=r"payload.*122 bytes.*limit is 64"):
            small.enqueue(NewJob("k", wide))
        with pytest.raises(InvalidPayload, match="max_payload_bytes"):
            small.enqueue_many([NewJob("k", wide)] * 200)  # the COPY path
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
    job = store.reads.get(holder)
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
    after = store.reads.get(job.id)
    assert after is not None and after.status is JobStatus.CLAIMED
    assert after.failure_count == 0 and after.carry is None
    assert probe.count("journal") == 0


def test_unknown_job_ids_read_as_absent(store: PostgresStore, probe: Probe) -> None:
    unknown = ULID()
    assert store.reads.get(unknown) is None
    assert store.reads.get(str(unknown)) is None
    assert store.reads.get(uuid.uuid4()) is None
    assert store.reads.journal(unknown) == []
    assert store.cancel(unknown) is False
    assert store.requeue(unknown) is False
    with pytest.raises(InvalidJob, match="job id"):
        store.reads.get("nope")
    _nothing_written(probe)
