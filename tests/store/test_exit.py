"""A process that opened a queue and exits without closing it exits at once and quietly.

On Python 3.13 an unclosed psycopg pool is only reached by the garbage collector after
the interpreter has stopped its daemon threads, and the pool's ``__del__`` then waits 5 s
for each of its four threads and prints a warning each time; venturi closes the pools it
opened that are still open at exit, while those threads still run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys

    import venturi

    queue = venturi.Queue(sys.argv[1], prefix=sys.argv[2], pool_size=2)
    queue.migrate()
    queue.enqueue("exit.job", {})
    side = queue.store.sibling()  # a second pool venturi owns, as a worker's side store
    side.reads.stats()
    print("left open")
    """
)


def test_a_queue_left_open_does_not_hold_up_the_exit(
    tmp_path: Path, database_dsn: str, prefix: str
) -> None:
    # A pool __del__ that waits shows in stderr ("couldn't stop thread ... within 5.0
    # seconds"), so nothing printed there means no thread was waited for.
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, database_dsn, prefix],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "left open\n", "")
