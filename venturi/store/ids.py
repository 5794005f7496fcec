"""Job ids: ULIDs that strictly increase within one process.

A ULID is 48 bits of Unix milliseconds then 80 random bits, stored as a uuid whose byte
order is its sort order. Fresh random bits for every id would order two ids of one
millisecond at random; this source instead adds one to the previous id whenever the
clock has not moved past it (same millisecond, or a clock stepped back), so the ids one
process makes sort in the order it made them and history can page by id alone.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from ulid import ULID

_RANDOM_BITS = 80
_RANDOM_BYTES = _RANDOM_BITS // 8
_ID_BYTES = 16
# Random bytes read from the system at a time: one read per 400 milliseconds with ids.
_RANDOM_BLOCK = 4000


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class IdSource:
    """Makes strictly increasing ULIDs; thread-safe.

    ``clock`` returns Unix milliseconds. After ``os.fork()`` the child must call
    `forget` (the module's default source does so itself): otherwise parent and child
    would both continue from the same previous id and could make the same next one.
    """

    def __init__(self, clock: Callable[[], int] = _wall_clock_ms) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._last = 0
        self._random = b""
        self._random_at = 0

    def _random_bits(self) -> int:
        """80 random bits from the system's source (as `secrets.randbits`), read a block
        at a time: a system call for every millisecond a single enqueue started in cost
        it a few microseconds. Called under the lock."""
        at = self._random_at
        if at + _RANDOM_BYTES > len(self._random):
            self._random, at = os.urandom(_RANDOM_BLOCK), 0
        self._random_at = at + _RANDOM_BYTES
        return int.from_bytes(self._random[at : at + _RANDOM_BYTES], "big")

    def new(self) -> ULID:
        """The next id: later than every id this source made before."""
        with self._lock:
            now = self.clock()
            if now > self._last >> _RANDOM_BITS:
                self._last = (now << _RANDOM_BITS) | self._random_bits()
            else:
                # Same millisecond, or the clock stepped back. Reading the clock under
                # the lock keeps id order equal to the order the threads got here; an
                # overflow of the random bits carries into the milliseconds, which
                # keeps the order too.
                self._last += 1
            return ULID.from_int(self._last)

    def new_many(self, count: int) -> list[ULID]:
        """``count`` ids in order, as ``count`` calls of `new` in a row would make them
        within one millisecond: one clock reading and one lock for the batch."""
        if count <= 0:
            return []
        with self._lock:
            now = self.clock()
            if now > self._last >> _RANDOM_BITS:
                first = (now << _RANDOM_BITS) | self._random_bits()
            else:
                first = self._last + 1
            self._last = first + count - 1
        return [ULID(value.to_bytes(_ID_BYTES, "big")) for value in range(first, first + count)]

    def forget(self) -> None:
        """Start afresh in a forked child: new random bits (none of the block read before
        the fork, which the parent goes on using), and a lock no thread holds."""
        self._lock = threading.Lock()
        self._last = 0
        self._random = b""
        self._random_at = 0


_default = IdSource()
# A forked child continues from a copy of the parent's state; without this both would
# make the same id next when they enqueue within one millisecond.
os.register_at_fork(after_in_child=_default.forget)


def new_id() -> ULID:
    """A new job id, later than every other this process made."""
    return _default.new()


def new_ids(count: int) -> list[ULID]:
    """``count`` new job ids in order, later than every other this process made."""
    return _default.new_many(count)
