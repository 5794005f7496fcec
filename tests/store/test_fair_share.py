"""Fair kinds in the store: tags written by every enqueue path, claims in turn across
keys (work-conserving, priority first), weights, limits together with fairness, a kind
turning fair with jobs already written, and bad weights refused with nothing written."""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import Any

import pytest

from tests.support import Probe, migrate_before, wait_until
from venturi import ConfigurationError, NewJob, Queue
from venturi.errors import UnknownKind
from venturi.flow.limits import KindLimits, Rate
from venturi.prefix import Prefix
from venturi.store import copying
from venturi.store.copying import COPY_MIN_JOBS
from venturi.store.postgres import PostgresStore

LEASES = {"r": 30.0}


def fair(store: PostgresStore, **limits: Any) -> None:
    store.declare_kinds([KindLimits("r", fair=True, **limits)], "test")


def jobs(key: str | None, count: int, priority: int = 0) -> list[NewJob]:
    return [
        NewJob("r", {"key": key, "n": n}, concurrency_key=key, priority=priority)
        for n in range(count)
    ]


def claimed_keys(store: PostgresStore, limit: int, **options: Any) -> list[str | None]:
    return [job.concurrency_key for job in store.claim("w", LEASES, limit, **options)]


def drain_order(store: PostgresStore, batch: int = 1, **options: Any) -> list[str | None]:
    """Claim ``batch`` at a time until nothing is due, in the order claims returned."""
    order: list[str | None] = []
    while taken := store.claim("w", LEASES, batch, **options):
        order.extend(job.concurrency_key for job in taken)
    return order


def test_a_key_with_one_job_waits_one_turn_however_deep_another_keys_backlog(
    store: PostgresStore,
) -> None:
    fair(store)
    store.enqueue_many(jobs("big", COPY_MIN_JOBS * 4))  # by COPY
    store.enqueue_many(jobs("mid", 50))  # by one INSERT
    store.enqueue(NewJob("r", {"n": 0}, concurrency_key="small"))
    store.enqueue(NewJob("r", {"n": 0}))  # the jobs without a key share one turn
    first = claimed_keys(store, 4)
    assert Counter(first) == {"big": 1, "mid": 1, "small": 1, None: 1}


def test_keys_take_turns_and_a_lone_key_gets_every_claim(store: PostgresStore) -> None:
    fair(store)
    store.enqueue_many(jobs("a", 300) + jobs("b", 3) + jobs("c", 3))
    order = drain_order(store, batch=1)
    assert Counter(order[:9]) == {"a": 3, "b": 3, "c": 3}
    assert order[9:] == ["a"] * 297  # work-conserving: alone, "a" takes every claim


def test_an_unfair_kind_drains_first_in_first_out(store: PostgresStore) -> None:
    store.enqueue_many(jobs("a", 20) + jobs("b", 2))
    assert drain_order(store, batch=5, limited=frozenset()) == ["a"] * 20 + ["b"] * 2


def test_priority_still_comes_first(store: PostgresStore) -> None:
    fair(store)
    store.enqueue_many(jobs("a", 5) + jobs("b", 5))
    store.enqueue(NewJob("r", {"n": 9}, concurrency_key="urgent", priority=5))
    assert claimed_keys(store, 1) == ["urgent"]


def test_a_key_arriving_late_is_served_at_the_front_not_after_the_backlog(
    store: PostgresStore,
) -> None:
    fair(store)
    store.enqueue_many(jobs("big", 1000))
    assert claimed_keys(store, 100) == ["big"] * 100
    for n in range(3):
        store.enqueue(NewJob("r", {"n": n}, concurrency_key="late"))
    # Tagged where claims are: "late" alternates with "big" from the next claim on.
    assert Counter(claimed_keys(store, 6)) == {"big": 3, "late": 3}


def test_weights_share_claims_in_proportion(store: PostgresStore) -> None:
    fair(store)
    store.set_weights("r", {"one": 1, "two": 2, "four": 4})
    store.enqueue_many(jobs("one", 400) + jobs("two", 400) + jobs("four", 400))
    counts = Counter(claimed_keys(store, 700))
    assert counts == {"one": 100, "two": 200, "four": 400}


def test_new_weights_apply_to_pending_jobs_at_once(store: PostgresStore, probe: Probe) -> None:
    fair(store)
    store.enqueue_many(jobs("a", 300) + jobs("b", 300))
    store.set_weights("r", {"b": 3})
    assert Counter(claimed_keys(store, 200)) == {"a": 50, "b": 150}
    store.set_weights("r", {"b": None})  # back to the default
    assert store.reads.weights() == {}
    assert Counter(claimed_keys(store, 100)) == {"a": 50, "b": 50}


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"a": -1}, "above 0"),
        ({"a": 0}, "above 0"),
        ({"a": math.nan}, "above 0"),
        ({"a": math.inf}, "above 0"),
        ({"a": 2_000_000}, "at most"),
        ({"a": "3"}, "must be a number"),
        ({"a": True}, "must be a number"),
        ({"": 1}, "weight key"),
        ({3: 1}, "must be a str"),
        ({}, "non-empty mapping"),
        ([("a", 1)], "non-empty mapping"),
    ],
)
def test_bad_weights_are_refused_with_nothing_written(
    store: PostgresStore, probe: Probe, weights: Any, message: str
) -> None:
    fair(store)
    queue = Queue(store=store)
    with pytest.raises(ConfigurationError, match=message):
        # A good weight beside the bad one: it is not written either.
        queue.set_weights(
            "r", {"ok": 2, **weights} if isinstance(weights, dict) and weights else weights
        )
    assert probe.rows("SELECT count(*) FROM {fair_weights}") == [(0,)]


def test_weights_of_a_kind_that_is_not_fair_are_refused(store: PostgresStore, probe: Probe) -> None:
    store.declare_kinds([KindLimits("plain", concurrency=2)], "test")
    for kind in ("plain", "never-declared"):
        with pytest.raises(UnknownKind, match="not fair"):
            store.set_weights(kind, {"a": 2.0})
    assert probe.rows("SELECT count(*) FROM {fair_weights}") == [(0,)]


def test_the_database_refuses_a_weight_that_slipped_past_the_checks(
    store: PostgresStore, probe: Probe
) -> None:
    fair(store)
    with pytest.raises(Exception, match="fair_w_ck"):
        store.set_weights("r", {"a": math.nan})
    assert probe.rows("SELECT count(*) FROM {fair_weights}") == [(0,)]


def test_a_key_at_its_concurrency_limit_gives_its_turn_to_the_next(
    store: PostgresStore,
) -> None:
    fair(store, key_concurrency=2)
    store.enqueue_many(jobs("a", 50) + jobs("b", 50) + jobs("c", 1))
    first = Counter(claimed_keys(store, 10, limited=frozenset({"r"})))
    assert first == {"a": 2, "b": 2, "c": 1}
    assert claimed_keys(store, 10, limited=frozenset({"r"})) == []


@pytest.mark.parametrize("path", ["plain", "floored", "limited"])
def test_a_claim_cut_by_its_limit_takes_a_fair_kinds_smallest_tags_not_its_oldest_jobs(
    database_dsn: str, store: PostgresStore, path: str
) -> None:
    """Claimed beside another kind, a fair kind's share of the limit is decided by age
    and filled in tag order: a late key's first job takes its turn ahead of the backlog's
    next, however much older that is."""
    limits: dict[str, Any] = {"concurrency": 100} if path == "limited" else {}
    store.declare_kinds([KindLimits("r", fair=True, **limits), KindLimits("p", **limits)], "t")
    store.enqueue_many(jobs("big", 10))
    store.enqueue_many([NewJob("p", {"n": n}) for n in range(10)])
    store.enqueue(NewJob("r", {"n": 0}, concurrency_key="late"))
    claimer = PostgresStore.from_dsn(
        database_dsn, store.prefix, pool_size=1, floors_after_dead_rows=0
    )
    try:
        leases = {"r": 30.0, "p": 30.0}
        limited = frozenset(leases) if path == "limited" else frozenset()
        claiming = claimer if path == "floored" else store
        taken = claiming.claim("w", leases, 4, limited=limited)
    finally:
        claimer.close()
    # By age the fair kind's three oldest jobs come before the other kind's first.
    assert Counter(j.kind for j in taken) == {"r": 3, "p": 1}
    assert Counter(j.concurrency_key for j in taken if j.kind == "r") == {"big": 2, "late": 1}


def test_a_fair_kind_with_a_concurrency_takes_turns_within_it(store: PostgresStore) -> None:
    fair(store, concurrency=4)
    store.enqueue_many(jobs("a", 100) + jobs("b", 2) + jobs("c", 2))
    first = Counter(claimed_keys(store, 10, limited=frozenset({"r"})))
    assert sum(first.values()) == 4 and first["b"] >= 1 and first["c"] >= 1


def test_a_paused_fair_kind_is_not_claimed(store: PostgresStore) -> None:
    fair(store)
    store.enqueue_many(jobs("a", 3))
    store.pause_kinds(["r"])
    assert store.claim("w", LEASES, 10) == []
    assert store.claim("w", LEASES, 10, limited=frozenset({"r"})) == []
    store.resume_kinds(["r"])
    assert len(store.claim("w", LEASES, 10)) == 3


def test_turning_fair_tags_the_jobs_already_written(store: PostgresStore, probe: Probe) -> None:
    store.enqueue_many(jobs("big", 500) + jobs("small", 2))
    waiting = store.reads.pending_jobs("r")[-1].id.to_uuid()  # as a workflow's child
    probe.rows("UPDATE {jobs} SET status = 'waiting', parents_left = 1 WHERE id = %s", waiting)
    assert probe.rows("SELECT count(*) FROM {jobs} WHERE fair_tag IS NOT NULL") == [(0,)]
    fair(store)
    assert probe.rows("SELECT count(*) FROM {jobs} WHERE fair_tag IS NULL") == [(0,)]
    assert Counter(claimed_keys(store, 2)) == {"big": 1, "small": 1}
    fair(store)  # already fair: nothing is tagged again
    assert (state := store.reads.kinds()[0]).limits.fair and not state.limited


def test_workers_declaring_kinds_fair_at_once_never_deadlock(
    store: PostgresStore, probe: Probe
) -> None:
    """A fleet starting together: each worker declares a new fair kind (its row not
    written yet) and a limited kind, while others claim the limited kind. Each
    declaration locks the kinds' rows, then the jobs table; none fails (a deadlock
    or a lock timeout would raise here), and every job of the kinds is tagged."""
    declarers, claimers, rounds = 6, 2, 8
    store.enqueue_many([NewJob("limited", {"n": n}) for n in range(rounds * 40)])
    failures: list[BaseException] = []

    def declare(kind: str, start: threading.Barrier) -> None:
        start.wait()
        limits = [KindLimits(kind, fair=True), KindLimits("limited", concurrency=4)]
        store.declare_kinds(limits, "test")

    def claim(start: threading.Barrier) -> None:
        start.wait()
        for _ in range(5):
            store.claim("w", {"limited": 30.0}, 1, limited={"limited"})

    def guarded(run: Any, *args: Any) -> None:
        try:
            run(*args)
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    for round_ in range(rounds):
        kind = f"turning{round_}"
        store.enqueue_many([NewJob(kind, {"n": n}, concurrency_key=f"k{n % 3}") for n in range(30)])
        start = threading.Barrier(declarers + claimers)
        threads = [
            threading.Thread(target=guarded, args=(declare, kind, start)) for _ in range(declarers)
        ]
        threads += [threading.Thread(target=guarded, args=(claim, start)) for _ in range(claimers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert probe.rows(
        "SELECT count(*) FROM {jobs} WHERE kind LIKE 'turning%%' AND fair_tag IS NULL"
    ) == [(0,)]
    fair_kinds = probe.rows("SELECT count(*) FROM {kinds} WHERE fair")
    assert fair_kinds == [(rounds,)]


def test_every_enqueue_path_tags_a_fair_kinds_jobs_and_only_them(
    store: PostgresStore, probe: Probe
) -> None:
    fair(store)
    queue = Queue(store=store)
    queue.enqueue("r", {"n": 1}, concurrency_key="single")
    queue.enqueue("r", {"n": 2}, concurrency_key="deduped", dedup_key="d")
    queue.enqueue_many(jobs("many", 3))
    queue.enqueue_many(jobs("copied", COPY_MIN_JOBS))
    with queue.workflow() as flow:
        parent = flow.add_with("r", {"n": 3}, concurrency_key="graph")
        flow.add_with("r", {"n": 4}, concurrency_key="graph", depends_on=[parent])
    queue.enqueue("other", {"n": 5})
    queue.enqueue_many([NewJob("other", {"n": n}) for n in range(COPY_MIN_JOBS)])
    queue.enqueue_many([NewJob("other", {"n": n}) for n in range(COPY_MIN_JOBS)] + jobs("mixed", 2))
    rows = dict(probe.rows("SELECT kind, count(*) FROM {jobs} WHERE fair_tag IS NULL GROUP BY 1"))
    assert rows == {"other": 2 * COPY_MIN_JOBS + 1}
    spacing = probe.rows(
        "SELECT max(fair_tag) - min(fair_tag) FROM {jobs} WHERE concurrency_key = 'copied'"
    )
    assert spacing == [(COPY_MIN_JOBS - 1.0,)]


def test_a_kind_turning_fair_while_a_copy_prepares_tags_the_copys_jobs(
    database_dsn: str, store: PostgresStore, probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A COPY reads which of its kinds are fair before it writes. A declaration turning
    one fair in between waits for the COPY's transaction (the jobs table's lock is taken
    before that read), then tags the COPY's jobs with the ones written before."""
    declarer = PostgresStore.from_dsn(database_dsn, store.prefix, pool_size=2)
    declarations: list[threading.Thread] = []
    read_fairness = copying._fair_tags

    def declared_in_between(*args: Any) -> list[float | None]:
        declaration = threading.Thread(target=fair, args=(declarer,))
        declaration.start()
        declarations.append(declaration)
        wait_until(
            lambda: not declaration.is_alive() or lock_waits(probe),
            what="the declaration to end or to wait for a lock",
        )
        return read_fairness(*args)

    monkeypatch.setattr(copying, "_fair_tags", declared_in_between)
    try:
        store.enqueue_many(jobs("copied", COPY_MIN_JOBS))
        [declaration] = declarations
        declaration.join(timeout=30)
    finally:
        declarer.close()
    assert probe.rows("SELECT count(*) FROM {kinds} WHERE fair") == [(1,)]
    assert probe.rows("SELECT count(*) FROM {jobs} WHERE fair_tag IS NULL") == [(0,)]


def lock_waits(probe: Probe) -> bool:
    """Whether a session of this database waits to lock a table."""
    rows = probe.rows(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return bool(rows[0][0])


def test_a_single_enqueue_tags_its_job_after_its_keys_latest_and_never_before_the_due_front(
    store: PostgresStore, probe: Probe
) -> None:
    fair(store)
    store.set_weights("r", {"heavy": 4})
    store.enqueue_many(jobs("a", 3))  # tags 0, 1, 2
    assert claimed_keys(store, 1) == ["a"]  # the front of what is due moves to 1
    singles = [
        ("a", 0, 3.0),  # one step after its key's latest
        ("heavy", 0, 1.0),  # nothing pending: at the front of what is due
        ("heavy", 0, 1.25),  # a quarter step: its weight is 4
        (None, 0, 1.0),  # the jobs without a key are a share of their own
        (None, 0, 2.0),
        ("a", 1, 0.0),  # each priority keeps its own tags
    ]
    for key, priority, _ in singles:
        store.enqueue(NewJob("r", {}, concurrency_key=key, priority=priority))
    rows = probe.rows("SELECT concurrency_key, priority, fair_tag FROM {jobs} ORDER BY id OFFSET 3")
    assert rows == singles


def test_a_prefix_with_fair_jobs_pending_migrates_to_the_tag_function_and_goes_on(
    database_dsn: str, prefix: str
) -> None:
    assert migrate_before(database_dsn, prefix, "0018") == "0018_fair_tag_function"
    probe = Probe(database_dsn, prefix)
    store = PostgresStore.from_dsn(database_dsn, Prefix(prefix), pool_size=1)
    try:
        probe.rows(
            "INSERT INTO {kinds} (kind, declared_by, declared_at, fair) "
            "VALUES ('r', 't', now(), true)"
        )
        for tag in (0.0, 1.0):
            probe.rows(
                "INSERT INTO {jobs} (id, kind, payload, concurrency_key, fair_tag) "
                "VALUES (gen_random_uuid(), 'r', jsonb_build_object(), 'old', %s)",
                tag,
            )
        assert store.migrate()[0] == "0018_fair_tag_function"
        store.enqueue(NewJob("r", {}, concurrency_key="old"))
        store.enqueue(NewJob("other", {}))
        tags = probe.rows("SELECT kind, fair_tag FROM {jobs} ORDER BY fair_tag NULLS LAST")
        assert tags == [("r", 0.0), ("r", 1.0), ("r", 2.0), ("other", None)]
        assert claimed_keys(store, 4) == ["old", "old", "old"]
    finally:
        store.close()
        probe.close()


def test_stats_show_a_fair_kinds_top_keys(store: PostgresStore) -> None:
    fair(store)
    store.enqueue_many(jobs("big", 30) + jobs("mid", 10) + jobs(None, 2) + jobs("small", 1))
    store.claim("w", LEASES, 4)
    top = store.reads.fair_keys(limit=3)["r"]
    assert [k.key for k in top] == ["big", "mid", None]
    assert sum(k.due + k.running for k in store.reads.fair_keys()["r"]) == 43
    assert sum(k.running for k in store.reads.fair_keys()["r"]) == 4


def test_a_fair_kind_with_a_rate_takes_turns_within_it(store: PostgresStore) -> None:
    fair(store, rate=Rate(6, 60.0))
    store.enqueue_many(jobs("a", 100) + jobs("b", 100) + jobs("c", 100))
    first = Counter(claimed_keys(store, 50, limited=frozenset({"r"})))
    assert first == {"a": 2, "b": 2, "c": 2}
    assert claimed_keys(store, 50, limited=frozenset({"r"})) == []  # the rate is used up
