"""The pools venturi opens itself, closed at interpreter exit if nobody closed them."""

from __future__ import annotations

import atexit
import functools
import weakref
from typing import Any, Final

from psycopg_pool import ConnectionPool

# Pools venturi opened, while they live. On Python 3.13 the garbage collector reaches an
# unclosed pool only after the interpreter has stopped its daemon threads, and the pool's
# __del__ then waits 5 s for each of its threads (20 s and four warnings at exit);
# closing the ones still open at exit, while their threads still run, takes milliseconds.
_OWNED_POOLS: Final[weakref.WeakSet[ConnectionPool[Any]]] = weakref.WeakSet()


def open_owned(pool: ConnectionPool[Any]) -> None:
    """Open a pool venturi owns; it is closed at interpreter exit if nobody closed it."""
    _close_owned_pools_at_exit()
    _OWNED_POOLS.add(pool)
    pool.open(wait=False)


@functools.cache
def _close_owned_pools_at_exit() -> None:
    atexit.register(_close_owned_pools)


def _close_owned_pools() -> None:
    for pool in list(_OWNED_POOLS):
        pool.close()
