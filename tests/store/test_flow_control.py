"""Flow control in the store: pausing, declarations (the latest wins), and claims of
limited kinds within their concurrency, key and rate limits."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support import Probe
from venturi import ConfigurationError, InvalidJob, NewJob, Queue
from venturi.errors import StoreError
from venturi.flow.limits import KindLimits, Rate
from venturi.store import sqlfiles
from venturi.store.postgres import PostgresStore

LEASES = {"k": 30.0}


def enqueue(store: PostgresStore, count: int, key: str | None = None, kind: str = "k") -> None:
    store.enqueue_many([NewJob(kind, {"n": i}, concurrency_key=key) for i in range(count)])


def test_a_paused_kind_is_not_claimed_by_either_path_and_resumes(store: PostgresStore) -> None:
    enqueue(store, 3)
    assert store.pause_kinds(["k"]) == ["k"]
    assert store.pause_kinds(["k"]) == []  # already paused
    assert store.claim("w", LEASES, 10) == []
    assert store.claim("w", LEASES, 10, limited={"k"}) == []
    assert store.seconds_until_visible(["k"]) is None  # paused jobs wake no one
    assert [s.kind for s in store.reads.kinds() if s.paused] == ["k"]
    assert store.resume_kinds(["k"]) == ["k"]
    assert store.resume_kinds(["k"]) == []
    assert len(store.claim("w", LEASES, 10)) == 3


def test_the_latest_declaration_wins_and_keeps_the_pause(store: PostgresStore) -> None:
    store.pause_kinds(["k"])
    store.declare_kinds([KindLimits("k", concurrency=5)], "old-deploy")
    store.declare_kinds([KindLimits("k", concurrency=2, rate=Rate(10, 60.0))], "new-deploy")
    (state,) = store.reads.kinds()
    assert state.limits == KindLimits("k", concurrency=2, rate="10/m")
    assert state.declared_by == "new-deploy" and state.paused
    store.declare_kinds([KindLimits("k")], "unlimited-deploy")
    (state,) = store.reads.kinds()
    assert not state.limited and state.declared_by == "unlimited-deploy"


def test_the_plain_claim_leaves_a_limited_kind_alone(store: PostgresStore) -> None:
    enqueue(store, 5)
    store.declare_kinds([KindLimits("k", concurrency=2)], "someone")
    assert store.claim("w", LEASES, 10) == []  # a worker that has not heard of the limit
    assert len(store.claim("w", LEASES, 10, limited={"k"})) == 2
    assert store.claim("w", LEASES, 10, limited={"k"}) == []
    (state,) = store.reads.kinds()
    assert state.running == 2


def test_a_limited_claim_frees_a_place_when_a_run_ends(store: PostgresStore) -> None:
    from venturi.settlements import Claim, Settlement

    enqueue(store, 3)
    store.declare_kinds([KindLimits("k", concurrency=1)], "someone")
    (first,) = store.claim("w", LEASES, 10, limited={"k"})
    assert store.claim("w", LEASES, 10, limited={"k"}) == []
    store.settle(Claim.of(first), Settlement.complete())
    assert len(store.claim("w", LEASES, 10, limited={"k"})) == 1


def test_each_key_runs_within_its_limit_and_others_pass(store: PostgresStore) -> None:
    enqueue(store, 5, key="hot")
    enqueue(store, 1, key="a")
    enqueue(store, 1, key="b")
    store.declare_kinds([KindLimits("k", key_concurrency=2)], "someone")
    claimed = store.claim("w", LEASES, 10, limited={"k"})
    keys = sorted(j.concurrency_key or "" for j in claimed)
    assert keys == ["a", "b", "hot", "hot"]
    assert store.claim("w", LEASES, 10, limited={"k"}) == []


def test_a_rate_stops_claims_until_its_window_has_room(store: PostgresStore) -> None:
    enqueue(store, 5)
    store.declare_kinds([KindLimits("k", rate="3/h")], "someone")
    assert store.seconds_until_rate_room(["k"]) == 0
    assert len(store.claim("w", LEASES, 10, limited={"k"})) == 3
    assert store.claim("w", LEASES, 10, limited={"k"}) == []
    room = store.seconds_until_rate_room(["k"])
    assert room is not None and 3500 < room <= 3600


def test_limited_kinds_are_claimed_beside_plain_ones(store: PostgresStore) -> None:
    enqueue(store, 4)
    enqueue(store, 4, kind="plain")
    store.declare_kinds([KindLimits("k", concurrency=1)], "someone")
    claimed = store.claim("w", {"k": 30.0, "plain": 30.0}, 10, limited={"k"})
    assert sorted(j.kind for j in claimed) == ["k", "plain", "plain", "plain", "plain"]


def test_a_concurrency_key_is_stored_and_read_back(store: PostgresStore) -> None:
    job_id = store.enqueue(NewJob("k", concurrency_key="customer:42"))
    record = store.reads.get(job_id)
    assert record is not None and record.concurrency_key == "customer:42"


@pytest.mark.parametrize(
    ("key", "rule"),
    [("", "1 to 255"), ("x" * 256, "1 to 255"), (42, "must be a str"), ("a\x00b", "NUL")],
)
def test_a_bad_concurrency_key_is_refused(key: object, rule: str) -> None:
    with pytest.raises(InvalidJob, match=rule):
        NewJob("k", concurrency_key=key)


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"concurrency": -3}, "concurrency must be at least 1"),
        ({"concurrency": 1.5}, "concurrency must be an int"),
        ({"key_concurrency": 0}, "key_concurrency must be at least 1"),
        ({"rate": "50"}, "must read N/s"),
        ({"rate": "50/d"}, "must read N/s"),
        ({"rate": "0/s"}, "within"),
        ({"rate": "-1/s"}, "must read N/s"),
        ({"rate": "1.5/s"}, "must read N/s"),
        ({"rate": "100000/s"}, "within"),
        ({"rate": 50}, "must be a str"),
    ],
)
def test_bad_limits_are_refused_at_registration(
    database_dsn: str, prefix: str, options: dict[str, Any], rule: str
) -> None:
    queue = Queue(database_dsn, prefix=prefix)
    try:
        with pytest.raises(ConfigurationError, match=rule):
            queue.job("k", **options)(lambda: None)
        assert "k" not in queue.definitions
    finally:
        queue.close()


def test_keys_must_match_the_kinds_key_limit(database_dsn: str, prefix: str) -> None:
    with Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
        queue.job("keyed", key_concurrency=1)(lambda: None)
        queue.job("plain")(lambda: None)
        with pytest.raises(InvalidJob, match="needs a concurrency_key"):
            queue.enqueue("keyed", {})
        with pytest.raises(InvalidJob, match="has no key_concurrency"):
            queue.enqueue("plain", {}, concurrency_key="a")
        with pytest.raises(InvalidJob, match="needs a concurrency_key"):
            queue.enqueue_many([NewJob("keyed", {})])
        with pytest.raises(InvalidJob, match="has no key_concurrency"):
            queue.enqueue_many([NewJob("plain", {}, concurrency_key="a")])
        assert queue.stats().total("pending") == 0


@pytest.mark.parametrize("kind", ["", "bad kind", "x" * 129, 7])
def test_pausing_a_bad_kind_name_is_refused_and_writes_nothing(
    database_dsn: str, prefix: str, kind: object
) -> None:
    with Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
        with pytest.raises(InvalidJob, match="kind"):
            queue.pause("good", kind)  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match="kind"):
            queue.resume(kind)  # type: ignore[arg-type]
        assert queue.kinds() == []
        with pytest.raises(ConfigurationError, match="at least one kind"):
            queue.pause()


def test_pause_survives_a_new_queue_and_shows_in_stats(
    database_dsn: str, prefix: str, store: PostgresStore
) -> None:
    with Queue(database_dsn, prefix=prefix) as queue:
        assert queue.pause("emails.send", "sms.send") == ["emails.send", "sms.send"]
        queue.enqueue("emails.send", {})  # enqueues are still accepted
    with Queue(database_dsn, prefix=prefix) as queue:
        assert queue.paused() == {"emails.send", "sms.send"}
        (stats,) = queue.stats().kinds
        assert stats.kind == "emails.send" and stats.paused and stats.pending == 1
    probe = Probe(database_dsn, prefix)
    try:
        assert probe.count("kinds", "paused") == 2
    finally:
        probe.close()


def test_a_job_functions_enqueue_takes_the_concurrency_key(database_dsn: str, prefix: str) -> None:
    with Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()

        @queue.job("crm.sync", key_concurrency=1)
        def sync(customer_id: int) -> None:
            pass

        @queue.job("keyed.param")
        def takes_key(concurrency_key: str) -> None:
            pass

        job_id = sync.enqueue(customer_id=42, concurrency_key="customer:42")
        record = queue.get(job_id)
        assert record is not None and record.concurrency_key == "customer:42"
        assert record.payload == {"customer_id": 42}
        other = queue.get(sync.enqueue_with({"customer_id": 7}, concurrency_key="customer:7"))
        assert other is not None and other.concurrency_key == "customer:7"
        with pytest.raises(InvalidJob, match="needs a concurrency_key"):
            sync.enqueue(customer_id=1)
        plain = queue.get(takes_key.enqueue(concurrency_key="payload"))
        assert plain is not None and plain.payload == {"concurrency_key": "payload"}
        assert plain.concurrency_key is None


def test_a_failing_limited_claim_claims_nothing_and_gives_the_turn_back(
    store: PostgresStore, probe: Probe, database_dsn: str
) -> None:
    """The limited claim's lock and claim are one transaction ended by the pipeline's
    Sync: a claim that fails after the lock (a lease no timestamp can hold) rolls back,
    claims nothing and leaves the kind's row unlocked for the next claimer."""
    store.declare_kinds([KindLimits("k", concurrency=2)], "test")
    enqueue(store, 3)
    with pytest.raises(StoreError, match="interval out of range"):
        store.claim("w", {"k": float("inf")}, 2, limited={"k"})
    assert probe.count("jobs", "status = 'claimed'") == 0
    with psycopg.connect(database_dsn, autocommit=True) as other:
        locked = sql.SQL("SELECT kind FROM {} WHERE kind = 'k' FOR UPDATE NOWAIT").format(
            sql.Identifier(f"{store.prefix.name}_kinds")
        )
        assert other.execute(locked).fetchall() == [("k",)]
    assert len(store.claim("w", LEASES, 2, limited={"k"})) == 2


def _relations(plan: dict[str, Any]) -> set[str]:
    found = {plan["Relation Name"]} if "Relation Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= _relations(child)
    return found


def test_the_limits_workers_reread_come_without_reading_a_job(
    database_dsn: str, store: PostgresStore
) -> None:
    """Workers re-read the kinds' limits every few seconds: a count of claimed jobs
    there would step over every dead claimed version while vacuum is held back."""
    store.declare_kinds([KindLimits("k", concurrency=2), KindLimits("j")], "w")
    store.pause_kinds(["j"])
    assert sorted(
        (limits.kind, limits.concurrency, paused) for limits, paused in store.reads.kind_limits()
    ) == [("j", None, True), ("k", 2, False)]
    for name, reads_jobs in (("kind_limits", False), ("kinds", True)):
        explain = b"EXPLAIN (FORMAT JSON) " + sqlfiles.statement(name, store.prefix)
        with psycopg.connect(database_dsn) as conn:
            row = conn.execute(explain).fetchone()
        assert row is not None
        assert (store.prefix.jobs in _relations(row[0][0]["Plan"])) is reads_jobs, name
