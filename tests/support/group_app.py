"""The queue a worker group's processes run in the tests.

``venturi worker --app tests.support.group_app:make_queue --processes N`` (cwd = the
repo root): every child builds this queue after it starts, on ``VENTURI_DSN`` under
``VENTURI_PREFIX``, with the ledger kinds of `tests.support.ledger` recording each run.
"""

from __future__ import annotations

import os

import venturi
from tests.support.ledger import Ledger, register


def make_queue() -> venturi.Queue:
    dsn, prefix = os.environ["VENTURI_DSN"], os.environ["VENTURI_PREFIX"]
    queue = venturi.Queue(dsn, prefix=prefix, pool_size=3)
    register(queue, Ledger(dsn, prefix, f"group:{os.getpid()}"), lease=5.0, max_attempts=25)
    return queue
