"""Job ids: one process's ULIDs strictly increase, across threads, within a millisecond,
when the clock steps back, and a forked child never continues its parent's sequence."""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest
from ulid import ULID

from venturi.store import ids
from venturi.store.ids import IdSource, new_id

RANDOM_BITS = 80


def _frozen_yielding_clock() -> int:
    """One millisecond for ever; yielding to other threads on each reading, so a step
    that was not atomic would interleave with the others."""
    time.sleep(0)
    return 1_700_000_000_000


def _make_in_threads(source: IdSource, threads: int, each: int) -> list[list[int]]:
    made: list[list[int]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def run(out: list[int]) -> None:
        start.wait()
        out.extend(int(source.new()) for _ in range(each))

    workers = [threading.Thread(target=run, args=(out,)) for out in made]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return made


def test_ids_strictly_increase_under_many_threads_within_one_millisecond() -> None:
    # A frozen clock puts every id in one millisecond: each must be the one before it
    # plus one, so the ids of all threads together form one gapless run. Each trial's
    # threads start together on a fresh source, where the first ids are drawn at random.
    for trial in range(30):
        source = IdSource(clock=_frozen_yielding_clock)
        made = _make_in_threads(source, threads=8, each=200)
        for seq in made:
            assert all(a < b for a, b in itertools.pairwise(seq)), f"{trial}: ids went back"
        every = sorted(i for seq in made for i in seq)
        assert len(set(every)) == len(every), f"trial {trial}: two threads got the same id"
        assert every[-1] - every[0] + 1 == len(every), f"trial {trial}: ids left a gap"
        assert {i >> RANDOM_BITS for i in every} == {1_700_000_000_000}


def test_the_process_ids_strictly_increase_under_many_threads() -> None:
    made = _make_in_threads(ids._default, threads=16, each=2000)
    for seq in made:
        assert all(a < b for a, b in itertools.pairwise(seq))
    every = [i for seq in made for i in seq]
    assert len(set(every)) == len(every)
    assert int(new_id()) > max(every)


def test_a_clock_step_back_or_a_full_millisecond_keeps_the_order() -> None:
    readings = iter([5, 5, 3, 3, 9])
    source = IdSource(clock=lambda: next(readings))
    made = [source.new() for _ in range(5)]
    assert all(a < b for a, b in itertools.pairwise(made))
    assert [u.milliseconds for u in made] == [5, 5, 5, 5, 9]
    assert int(made[1]) == int(made[0]) + 1

    full = IdSource(clock=lambda: 7)
    full._last = (7 << RANDOM_BITS) | (2**RANDOM_BITS - 1)
    carried = full.new()
    assert (carried.milliseconds, int(carried) % 2**RANDOM_BITS) == (8, 0)
    assert full.new() > carried


def test_ids_are_ulids_of_the_wall_clock() -> None:
    before = ULID()
    made = new_id()
    assert isinstance(made, ULID)
    assert before.milliseconds <= made.milliseconds <= ULID().milliseconds


def _id_made_in_a_child() -> ULID:
    """The next id a forked child of this process makes."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(write, new_id().bytes)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = ULID(pipe.read())
    os.waitpid(pid, 0)
    return child


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_continue_the_parents_sequence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One millisecond for parent and child: a child that kept the parent's last id
    # would make exactly the id the parent makes next.
    monkeypatch.setattr(ids._default, "clock", lambda: 1_700_000_000_000)
    new_id()
    child = _id_made_in_a_child()
    assert child != new_id(), "the child made the parent's next id"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_random_bits_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # Parent and child both move on to the next millisecond, where each id takes fresh
    # random bits: a child that went on reading the parent's block of them would draw
    # the very bits the parent draws next, and make the parent's id.
    now = [1_700_000_000_000]
    monkeypatch.setattr(ids._default, "clock", lambda: now[0])
    monkeypatch.setattr(ids._default, "_last", 0)  # each millisecond here draws its bits
    new_id()
    now[0] += 1
    child = _id_made_in_a_child()
    assert child != new_id(), "the child drew the parent's random bits"


def test_each_millisecond_takes_random_bits_across_blocks_of_them() -> None:
    ticks = itertools.count(1_700_000_000_000)
    source = IdSource(clock=lambda: next(ticks))
    drawn = [int(source.new()) & (2**RANDOM_BITS - 1) for _ in range(2_000)]  # five blocks
    assert len(set(drawn)) == len(drawn)
    for bit in range(RANDOM_BITS):  # every bit both set and clear somewhere
        assert 0 < sum(value >> bit & 1 for value in drawn) < len(drawn)


def test_a_batch_of_ids_continues_the_sequence_like_single_ids() -> None:
    readings = iter([5, 5, 5, 9])
    source = IdSource(clock=lambda: next(readings))
    first = source.new()
    batch = source.new_many(4)
    after = source.new()  # still millisecond 5: the batch moved the sequence on by 4
    made = [first, *batch, after]
    assert [int(u) - int(first) for u in made] == [0, 1, 2, 3, 4, 5]
    assert {u.milliseconds for u in made} == {5}
    assert source.new_many(0) == []
    fresh = source.new_many(3)  # a later millisecond: fresh random bits, in order
    assert [u.milliseconds for u in fresh] == [9, 9, 9]
    assert int(fresh[0]) > int(after) and int(fresh[2]) - int(fresh[0]) == 2


def test_the_process_batches_and_single_ids_strictly_increase() -> None:
    made = [new_id(), *ids.new_ids(1000), new_id(), *ids.new_ids(3)]
    assert all(a < b for a, b in itertools.pairwise(made))
