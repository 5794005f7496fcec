"""The queue a worker group's processes run in the tests.

``venturi worker --app tests.support.group_app:make_queue --processes N`` (cwd = the
repo root): every child builds this queue after it starts, on ``VENTURI_DSN`` under
``VENTURI_PREFIX``, with the ledger kinds of `tests.support.ledger` recording each run,
and `GROW_KIND`, whose runs keep memory allocated for the rest of the process.
"""

from __future__ import annotations

import os
from typing import Final

import venturi
from tests.support.ledger import Ledger, register

GROW_KIND: Final = "test.grow"
_kept: list[bytes] = []


def make_queue() -> venturi.Queue:
    dsn, prefix = os.environ["VENTURI_DSN"], os.environ["VENTURI_PREFIX"]
    queue = venturi.Queue(dsn, prefix=prefix, pool_size=3)
    register(queue, Ledger(dsn, prefix, f"group:{os.getpid()}"), lease=5.0, max_attempts=25)

    @queue.job(GROW_KIND)
    def grow(mb: int) -> None:
        _kept.append(b"\x01" * (mb * 1024 * 1024))  # written, so resident

    return queue
