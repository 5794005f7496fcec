"""Every write of `PostgresStore` passes through its hooks: each way of writing new
jobs runs inside `StoreHook.around_enqueue`, each settlement reaches
`StoreHook.after_settle`. The store's public operations are listed by introspection, so
a new operation that is neither covered here nor named as writing no job and settling
no run fails the suite."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import pytest
from ulid import ULID

from tests.support import complete_in, complete_many, recover, wait_until
from venturi.flow.limits import KindLimits
from venturi.models import NewJob, Outcome
from venturi.settlements import Claim, Settlement
from venturi.store import copying, enqueueing
from venturi.store.copying import COPY_MIN_JOBS
from venturi.store.hooks import EnqueueWrite, Settled, StoreHook
from venturi.store.ids import new_id
from venturi.store.postgres import PostgresStore

# The public operations that write no new job and settle no run, each with why.
NOT_HOOKED: dict[str, str] = {
    **dict.fromkeys(
        [
            "await_job",
            "check_schema",
            "claimed_by",
            "find_stale",
            "horizon_holder",
            "next_visible_at",
            "now",
            "ping",
            "schedule_states",
            "schema_script",
            "seconds_until_rate_room",
            "seconds_until_visible",
            "server",
            "vacuum_health",
        ],
        "reads (the rest are the ReadStore's, which writes nothing)",
    ),
    **dict.fromkeys(
        [
            "close",
            "connection",
            "transaction",
            "notifier",
            "finished_notifier",
            "sibling",
            "with_prefix",
            "from_dsn",
            "from_pool",
        ],
        "connections and stores, no write of their own",
    ),
    **dict.fromkeys(
        [
            "migrate",
            "drop_prefix",
            "prune",
            "cleanup",
            "sync_schedules",
            "declare_kinds",
            "set_weights",
            "pause_kinds",
            "resume_kinds",
            "beat_worker",
            "leave_worker",
            "notify",
            "advance_clock",
            "dead_rows",
            "vacuum_jobs",
        ],
        "schema, housekeeping and control rows: no job written, no run settled",
    ),
    **dict.fromkeys(
        ["durable_state", "first_signal", "job_outcome", "steps_of"],
        "a durable run's reads of its steps, signals and children",
    ),
    **dict.fromkeys(
        ["record_step", "record_wait", "signal", "wake_signalled"],
        "a durable run's steps and wait, and signals: no job written (a spawned child goes "
        "through enqueue), no run settled (a suspended run ends in a pause settlement)",
    ),
    **dict.fromkeys(
        ["claim", "extend_lease"],
        "a run starts or keeps its lease: nothing for a layer to end",
    ),
    **dict.fromkeys(
        ["cancel", "requeue", "requeue_dead", "requeue_with_children", "retry_now"],
        "an operator's change of a stored job, not a run's settlement: an abandoned run's "
        "span ends when the job's next run starts",
    ),
    **dict.fromkeys(
        ["fire_schedule", "trigger_schedule"],
        "a schedule's jobs are written by the schedule's own statement (fired by the "
        "worker's scheduler or triggered by an operator), from no job spec",
    ),
}


class Recording(StoreHook):
    """Notes every write it sees."""

    def __init__(self) -> None:
        self.enqueued: list[tuple[list[str], list[ULID]]] = []
        self.settled: list[Settled] = []

    def around_enqueue(
        self, jobs: Sequence[NewJob], conn: psycopg.Connection[Any] | None, write: EnqueueWrite
    ) -> list[ULID]:
        ids = write(jobs)
        self.enqueued.append(([j.kind for j in jobs], ids))
        return ids

    def after_settle(self, settled: Sequence[Settled]) -> None:
        self.settled.extend(settled)


def _claimed(store: PostgresStore, limited: frozenset[str] = frozenset()) -> Claim:
    store.enqueue(NewJob("k"))
    [job] = store.claim("w", {"k": 30.0}, 1, limited=limited)
    return Claim.of(job)


def _enqueue(store: PostgresStore, hook: Recording) -> None:
    job_id = store.enqueue(NewJob("k"))
    assert hook.enqueued == [(["k"], [job_id])]


def _enqueue_with_parents(store: PostgresStore, hook: Recording) -> None:
    parent = store.enqueue(NewJob("k"))
    child = store.enqueue(NewJob("k", depends_on=[parent]))
    assert hook.enqueued == [(["k"], [parent]), (["k"], [child])]  # once each


def _enqueue_many_values(store: PostgresStore, hook: Recording) -> None:
    ids = store.enqueue_many([NewJob("k"), NewJob("k", delay=5)])
    assert hook.enqueued == [(["k", "k"], ids)]


def _enqueue_many_copy(
    store: PostgresStore, hook: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies: list[int] = []
    real = copying.copy_jobs

    def counted(conn: Any, prefix: Any, ids: Sequence[ULID], *args: Any, **kw: Any) -> None:
        copies.append(len(ids))
        real(conn, prefix, ids, *args, **kw)

    monkeypatch.setattr(enqueueing, "copy_jobs", counted)
    ids = store.enqueue_many([NewJob("k") for _ in range(COPY_MIN_JOBS)])
    assert copies == [COPY_MIN_JOBS]  # the COPY path indeed
    assert hook.enqueued == [(["k"] * COPY_MIN_JOBS, ids)]


def _enqueue_many_on_callers_connection(store: PostgresStore, hook: Recording) -> None:
    with store.transaction() as conn:
        ids = store.enqueue_many([NewJob("k"), NewJob("k")], conn=conn)
    assert hook.enqueued == [(["k", "k"], ids)]


def _enqueue_graph(store: PostgresStore, hook: Recording) -> None:
    ids = [new_id(), new_id()]
    store.enqueue_graph([NewJob("k"), NewJob("k", depends_on=[ids[0]])], ids, new_id())
    assert hook.enqueued == [(["k", "k"], ids)]


def _settle(store: PostgresStore, hook: Recording) -> None:
    done, retried = _claimed(store), _claimed(store)
    store.settle(done, Settlement.complete())
    store.settle(retried, Settlement.retry(60))
    assert [(s.claim, s.outcome) for s in hook.settled] == [
        (done, Outcome.COMPLETED),
        (retried, Outcome.RETRIED),
    ]


def _settle_many(store: PostgresStore, hook: Recording) -> None:
    dead, paused = _claimed(store), _claimed(store)
    store.settle_many([(dead, Settlement.dead()), (paused, Settlement.pause(60))])
    assert [(s.claim, s.outcome) for s in hook.settled] == [
        (dead, Outcome.DEAD),
        (paused, Outcome.PAUSED),
    ]


def _complete_many(store: PostgresStore, hook: Recording) -> None:
    first, second = _claimed(store), _claimed(store)
    store.cancel(second.job_id)  # fenced out
    complete_many(store, [(first, Settlement.complete()), (second, Settlement.complete())])
    assert [(s.claim, s.outcome) for s in hook.settled] == [
        (first, Outcome.COMPLETED),
        (second, None),
    ]


def _complete_in(store: PostgresStore, hook: Recording) -> None:
    claim = _claimed(store)
    with store.transaction() as conn:
        assert complete_in(store, conn, claim, Settlement.complete())
    assert [(s.claim, s.outcome) for s in hook.settled] == [(claim, Outcome.COMPLETED)]


def _recover(store: PostgresStore, hook: Recording) -> None:
    store.enqueue(NewJob("k"))
    [job] = store.claim("vanished", {"k": 0.001}, 1)
    wait_until(lambda: store.find_stale() != [], 5, what="the lease to lapse")
    assert recover(store, job) is Outcome.RECOVERED
    assert [(s.claim, s.outcome) for s in hook.settled] == [(Claim.of(job), Outcome.RECOVERED)]


def _settle_and_pass(store: PostgresStore, hook: Recording) -> None:
    store.declare_kinds([KindLimits("k", concurrency=1)], "test")
    claim = _claimed(store, limited=frozenset({"k"}))
    store.enqueue(NewJob("k"))
    _, passed = store.settle_and_pass(claim, Settlement.complete(), "k", 30.0)
    assert len(passed) == 1
    assert [(s.claim, s.outcome) for s in hook.settled] == [(claim, Outcome.COMPLETED)]


Exercise = Callable[..., None]
# Each hooked operation, with every way it writes.
WRITE_PATHS: dict[str, list[Exercise]] = {
    "enqueue": [_enqueue, _enqueue_with_parents],
    "enqueue_many": [_enqueue_many_values, _enqueue_many_copy, _enqueue_many_on_callers_connection],
    "enqueue_graph": [_enqueue_graph],
    "settle": [_settle, _complete_in],
    "settle_many": [_settle_many, _complete_many, _recover],
    "settle_and_pass": [_settle_and_pass],
}


def unclassified(store_class: type) -> list[str]:
    """Public operations of ``store_class`` neither exercised here nor in `NOT_HOOKED`."""
    public = [
        name for name, _ in inspect.getmembers(store_class, callable) if not name.startswith("_")
    ]
    return sorted(set(public) - set(WRITE_PATHS) - set(NOT_HOOKED))


def test_every_public_operation_is_a_hooked_write_or_named_as_none() -> None:
    assert unclassified(PostgresStore) == []
    gone = (set(WRITE_PATHS) | set(NOT_HOOKED)) - set(dir(PostgresStore))
    assert not gone, f"listed here but no longer on the store: {sorted(gone)}"


def test_a_new_write_operation_fails_the_enumeration() -> None:
    class FasterStore(PostgresStore):
        def enqueue_fast(self, job: NewJob) -> ULID:
            return self._enqueue(job, None)

    assert unclassified(FasterStore) == ["enqueue_fast"]


@pytest.mark.parametrize(
    "exercise",
    [pytest.param(e, id=e.__name__.strip("_")) for es in WRITE_PATHS.values() for e in es],
)
def test_each_write_path_passes_through_the_hooks(
    store: PostgresStore, exercise: Exercise, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = Recording()
    store.hooks.add(hook)
    if "monkeypatch" in inspect.signature(exercise).parameters:
        exercise(store, hook, monkeypatch)
    else:
        exercise(store, hook)


def test_a_siblings_writes_pass_through_the_same_hooks(store: PostgresStore) -> None:
    hook = Recording()
    store.hooks.add(hook)
    side = store.sibling()
    try:
        job_id = side.enqueue(NewJob("k"))
    finally:
        side.close()
    assert hook.enqueued == [(["k"], [job_id])]
