"""A `venturi worker --processes N` supervisor as a test's subprocess, read from its log.

Its children run `tests.support.group_app` (the ledger kinds) on the test's prefix; the
supervisor logs one line per child started, running, and ended, which the helpers read.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from tests.support import wait_until
from tests.support.fleet import REPO_ROOT

APP = "tests.support.group_app:make_queue"
_RUNNING = re.compile(r"worker process (\d+) is running")
_ENDED = re.compile(r"worker process (\d+) ended")


class GroupProcess:
    """``python -m venturi worker --app APP --processes N [args]``; stdout and stderr go
    to ``log_path``."""

    def __init__(self, dsn: str, prefix: str, log_path: Path, *args: str, app: str = APP) -> None:
        self.log_path = log_path
        command = [sys.executable, "-m", "venturi", "worker", "--app", app, *args]
        env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_PREFIX": prefix}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.pop("PYTEST_CURRENT_TEST", None)
        self._log: IO[bytes] = log_path.open("wb")
        self.proc = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def running(self) -> list[int]:
        """Children that reported they run and have not ended, in order of start."""
        text = self.log()
        ended = {int(pid) for pid in _ENDED.findall(text)}
        return [int(pid) for pid in _RUNNING.findall(text) if int(pid) not in ended]

    def ever_started(self) -> set[int]:
        return {int(pid) for pid in re.findall(r"worker process (\d+) started", self.log())}

    def wait_running(self, count: int, timeout: float = 60.0) -> list[int]:
        def enough() -> list[int] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"the supervisor exited early:\n{self.log()}")
            pids = self.running()
            return pids if len(pids) >= count else None

        return wait_until(enough, timeout, interval=0.05, what=f"{count} running children")

    def wait_logged(self, text: str, timeout: float = 60.0) -> None:
        wait_until(lambda: text in self.log(), timeout, interval=0.05, what=repr(text))

    def signal(self, signum: int = signal.SIGTERM) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)

    def wait_exit(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def close(self) -> None:
        """Stop the group (SIGKILL to it and its children when it does not stop)."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                for pid in self.ever_started():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its parent's wait counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
