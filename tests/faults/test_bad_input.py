"""Bad input, generated: every enqueue either round-trips exactly or is refused with the
documented error and nothing written.

Runs on the private server, so "nothing written" can be checked by diffing whole tables
(and, for prefixes, the catalog) with no other test writing meanwhile.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import venturi
from tests.faults.server import ThrowawayServer
from tests.support import drop_prefix, fresh_prefix
from venturi.durations import MAX_DELAY_SECONDS
from venturi.models import MAX_KIND_LENGTH, SMALLINT_MAX, SMALLINT_MIN
from venturi.prefix import MAX_PREFIX_LENGTH
from venturi.settlements import MAX_NOTE_CHARS, storable_text

LIMIT = 4096  # max_payload_bytes of the queue under test
REFUSALS = (venturi.InvalidJob, venturi.InvalidPrefix, ValueError, TypeError)
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    # CI explores the same examples every run, so a landing never hangs on a coin toss;
    # local runs keep drawing new ones.
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Target:
    """A queue on a fresh prefix of the private server, and a table differ."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.prefix = fresh_prefix("badinput")
        self.queue = venturi.Queue(dsn, prefix=self.prefix, max_payload_bytes=LIMIT)
        self.queue.migrate()
        self.conn = psycopg.connect(dsn, autocommit=True)

    def snapshot(self) -> tuple[Any, ...]:
        """Every row of the prefix's jobs and journal tables, as text digests."""
        digest = "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) FROM {} t"
        row = self.conn.execute(
            psycopg.sql.SQL(f"SELECT ({digest}), ({digest})").format(
                psycopg.sql.Identifier(f"{self.prefix}_jobs"),
                psycopg.sql.Identifier(f"{self.prefix}_journal"),
            )
        ).fetchone()
        assert row is not None
        return tuple(row)

    def refused(self, call: Any, *args: Any, **kwargs: Any) -> BaseException | None:
        """Run ``call``; if it raises, check it is a documented refusal that wrote nothing."""
        before = self.snapshot()
        try:
            call(*args, **kwargs)
        except REFUSALS as exc:
            assert str(exc), f"{type(exc).__name__} with no message"
            assert self.snapshot() == before, f"refused ({exc}) but the tables changed"
            return exc
        return None

    def round_trip(
        self, kind: str, payload: Any, **options: Any
    ) -> tuple[venturi.JobRecord | None, BaseException | None]:
        """Enqueue through `refused`: the job as read back (None if refused), the refusal."""
        jobs: list[venturi.JobRecord] = []

        def enqueue() -> None:
            job = self.queue.get(self.queue.enqueue(kind, payload, **options))
            assert job is not None
            jobs.append(job)

        error = self.refused(enqueue)
        return (jobs[0] if jobs else None), error

    def close(self) -> None:
        self.queue.close()
        self.conn.close()
        drop_prefix(self.dsn, self.prefix)


@pytest.fixture(scope="module")
def target(own_server_session: ThrowawayServer) -> Iterator[Target]:
    own_server_session.ensure_running()
    instance = Target(own_server_session.dsn)
    yield instance
    instance.close()


def same(a: Any, b: Any) -> bool:
    """Equal values of exactly equal types, all the way down (and -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
exact_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15).filter(
        lambda f: not (f == 0 and math.copysign(1.0, f) < 0)
    )
    | text
)
exact_values = st.recursive(
    exact_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
exact_payloads = st.dictionaries(text, exact_values, max_size=6)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


hostile_values = st.sampled_from(
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        -0.0,
        1e16,
        1e300,
        -1.5e20,
        "a\x00b",
        "\ud800",
        "x\udfffy",
        b"bytes",
        {1, 2},
        object(),
        datetime(2024, 1, 1, tzinfo=UTC),
        {1: "int key"},
        {None: "None key"},
        {(1, 2): "tuple key"},
        {"ok": {"\x00": "NUL key"}},
        {"\ud800": "surrogate key"},
        _nested(200),
        "x" * (LIMIT + 1),
        10**5000,
    ]
)


@SETTINGS
@given(payload=exact_payloads)
def test_json_payloads_round_trip_exactly(target: Target, payload: dict[str, Any]) -> None:
    assume(len(json.dumps(payload, ensure_ascii=False).encode()) < LIMIT)
    job_id = target.queue.enqueue("bad.input", payload)
    job = target.queue.get(job_id)
    assert job is not None
    assert same(job.payload, payload), (job.payload, payload)


@SETTINGS
@given(good=exact_payloads, key=text, bad=hostile_values)
def test_hostile_payloads_are_refused_and_write_nothing(
    target: Target, good: dict[str, Any], key: str, bad: Any
) -> None:
    payload = {**good, key: bad}
    error = target.refused(target.queue.enqueue, "bad.input", payload)
    assert isinstance(error, venturi.InvalidPayload), f"{bad!r} was accepted: {error}"
    assert "payload" in str(error)


@SETTINGS
@given(number=st.floats(allow_nan=False, allow_infinity=False) | st.integers())
def test_numbers_round_trip_or_are_refused(target: Target, number: float | int) -> None:
    """jsonb keeps numbers as numeric: floats that would come back changed (-0.0 as 0.0,
    1e16 and up as ints) are refused; everything else comes back exactly."""
    payload = {"n": number}
    job, error = target.round_trip("n", payload)
    if error is None:
        assert job is not None and same(job.payload, payload), (job, payload)
    else:
        assert isinstance(error, venturi.InvalidPayload) and "payload.n" in str(error)
        assert isinstance(number, float)
        assert abs(number) >= 1e16 or (number == 0 and math.copysign(1.0, number) < 0)


@SETTINGS
@given(payload=st.one_of(st.lists(exact_values), text, st.integers(), st.none()))
def test_a_payload_that_is_not_an_object_is_refused(target: Target, payload: Any) -> None:
    assume(payload is not None)  # None means "no payload": {}
    error = target.refused(target.queue.enqueue, "bad.input", payload)
    assert isinstance(error, venturi.InvalidPayload)


# Printable ASCII (punctuation included) beside any text, so a loosened rule shows.
kinds = (
    st.text(max_size=MAX_KIND_LENGTH + 10)
    | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=MAX_KIND_LENGTH + 2)
    | st.sampled_from(
        [
            "",
            "a" * (MAX_KIND_LENGTH + 1),
            "k" * MAX_KIND_LENGTH,
            "emails.send'; DROP TABLE x; --",
            "em\u0430ils.send",  # Cyrillic a
            "emails\x00send",
            "kind with spaces",
            "\uff45mails",  # fullwidth e
            "emails!send",
            "emails~send",
            ".emails",
            "-emails",
            "_emails.send:v2/eu-west",
        ]
    )
)


@SETTINGS
@given(kind=kinds)
@example(kind="emails!send")  # printable ASCII outside the rule, tried on every run
@example(kind=".emails")
def test_kinds_round_trip_or_are_refused(target: Target, kind: str) -> None:
    # The documented rule: ASCII letters, digits and _ . : / -, starting with one of the
    # first three (a letter, digit or _), at most MAX_KIND_LENGTH characters.
    valid = bool(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*", kind, re.ASCII)) and (
        len(kind) <= MAX_KIND_LENGTH
    )
    error = target.refused(target.queue.enqueue, kind, {})
    if valid:
        assert error is None, f"a valid kind {kind!r} was refused: {error}"
        [job] = target.queue.history(kind=kind, limit=1)
        assert job.kind == kind
    else:
        assert isinstance(error, venturi.InvalidJob) and "kind" in str(error), (kind, error)


@SETTINGS
@given(priority=st.integers(min_value=-(2**20), max_value=2**20) | st.sampled_from([True, 1.5]))
def test_priorities_round_trip_or_are_refused(target: Target, priority: Any) -> None:
    job, error = target.round_trip("bad.input", {}, priority=priority)
    valid = type(priority) is int and SMALLINT_MIN <= priority <= SMALLINT_MAX
    if valid:
        assert error is None and job is not None and job.priority == priority
    else:
        assert isinstance(error, venturi.InvalidJob) and "priority" in str(error)


delays = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.timedeltas()
)


def _seconds(delay: Any) -> float:
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


@SETTINGS
@given(delay=delays)
def test_delays_round_trip_or_are_refused(target: Target, delay: Any) -> None:
    job, error = target.round_trip("bad.input", {}, delay=delay)
    seconds = _seconds(delay)
    if math.isfinite(seconds) and 0 <= seconds <= MAX_DELAY_SECONDS:
        assert error is None and job is not None, error
        waited = (job.visible_at - job.created_at).total_seconds()
        assert abs(waited - seconds) <= 1e-6 * max(1.0, seconds * 1e-9), (waited, seconds)
    else:
        assert isinstance(error, venturi.InvalidJob) and "delay" in str(error)


offsets = st.builds(timezone, st.timedeltas(-timedelta(hours=23), timedelta(hours=23)))
moments = (
    st.datetimes(timezones=st.none())
    | st.datetimes(timezones=st.timezones() | offsets)
    | st.builds(
        datetime.replace,
        st.sampled_from([datetime.min, datetime.max, datetime(1, 1, 2), datetime(9999, 12, 30)]),
        tzinfo=offsets,
    )
)


def _readable(at: datetime) -> bool:
    """Whether Python could read ``at`` back from timestamptz in any session time zone."""
    try:
        utc = at.astimezone(UTC)
    except OverflowError:
        return False
    return datetime(1, 1, 2, tzinfo=UTC) <= utc <= datetime(9999, 12, 30, tzinfo=UTC)


@SETTINGS
@given(at=moments)
def test_times_round_trip_or_are_refused(target: Target, at: datetime) -> None:
    job, error = target.round_trip("bad.input", {}, at=at)
    if at.tzinfo is not None and at.utcoffset() is not None and _readable(at):
        assert error is None and job is not None, error
        # In UTC: Python compares a wall time inside a DST fold unequal to every other
        # zone's (PEP 495), though both name the same instant.
        assert job.visible_at == at.astimezone(UTC)
    else:
        assert isinstance(error, venturi.InvalidJob) and "at" in str(error), error


prefixes = st.text(max_size=MAX_PREFIX_LENGTH + 5) | st.sampled_from(
    [
        "",
        "Jobs",
        "1jobs",
        "jobs-x",
        "jobs; DROP TABLE pg_class; --",
        'jobs"x',
        "\u0458obs",  # Cyrillic je
        "jobs\x00",
        "a" * (MAX_PREFIX_LENGTH + 1),
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=prefixes)
def test_prefixes_are_valid_or_refused_before_any_sql(target: Target, name: str) -> None:
    valid = bool(re.fullmatch(r"[a-z][a-z0-9_]*", name, re.ASCII)) and (
        len(name) <= MAX_PREFIX_LENGTH
    )
    if valid:
        with venturi.Queue(target.dsn, prefix=name) as queue:
            queue.migrate()
        tables = target.conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname IN (%s, %s, %s, %s, %s)",
            (
                f"{name}_jobs",
                f"{name}_journal",
                f"{name}_kinds",
                f"{name}_schedules",
                f"{name}_schema_history",
            ),
        ).fetchone()
        drop_prefix(target.dsn, name)
        assert tables == (5,)
        return
    relations = "SELECT count(*), coalesce(max(oid::int8), 0) FROM pg_class"
    before = target.conn.execute(relations).fetchone()
    with pytest.raises(venturi.InvalidPrefix, match="prefix"):
        venturi.Queue(target.dsn, prefix=name).migrate()
    assert target.conn.execute(relations).fetchone() == before


def test_one_bad_job_in_a_batch_writes_none_of_it(target: Target) -> None:
    batch = [venturi.NewJob("bad.input", {"n": n}) for n in range(5)]
    batch.insert(3, venturi.NewJob("bad.input", {"blob": "x" * LIMIT}))
    error = target.refused(target.queue.enqueue_many, batch)
    assert isinstance(error, venturi.InvalidPayload) and "limit" in str(error)


# Text a handler hands back, as no payload could carry it (NUL, lone surrogates) and
# longer than the journal keeps.
handed_texts = st.text(st.characters(exclude_categories=()), min_size=1, max_size=40) | (
    st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfffy", "é\x00" * 9_000])
)
_HANDED: dict[str, str] = {}


def _handing_kind(queue: venturi.Queue) -> str:
    """A kind whose handler hands back `_HANDED`'s text the way its payload says."""
    kind = "bad.handed"
    if kind in queue.definitions:
        return kind

    @queue.job(kind, context=True, max_attempts=1)
    def handed(ctx: venturi.JobContext, how: str) -> None:
        text = _HANDED["text"]
        if how == "note":
            ctx.note(text)
        elif how == "fail":
            raise venturi.Fail(text)
        elif how == "retry":
            raise venturi.Retry(note=text)
        else:
            raise ValueError(text)

    return kind


@SETTINGS
@given(text=handed_texts, how=st.sampled_from(["note", "fail", "retry", "raise"]))
def test_any_text_a_handler_hands_back_settles_in_one_run(
    target: Target, text: str, how: str
) -> None:
    kind = _handing_kind(target.queue)
    _HANDED["text"] = text
    job_id = target.queue.enqueue(kind, {"how": how})
    assert target.queue.drain(kinds=[kind]) == 1
    job = target.queue.get(job_id)
    assert job is not None and job.run_count == 1
    assert job.status == ("completed" if how == "note" else "dead")
    (entry,) = target.queue.journal(job_id)
    assert entry.note is not None and len(entry.note) <= MAX_NOTE_CHARS
    if how != "raise":
        assert entry.note == storable_text(text)
    elif len(text) < 100:
        assert f"ValueError: {storable_text(text)}" in entry.note
