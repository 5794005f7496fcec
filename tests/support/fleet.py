"""Starting, signalling and reading the logs of worker processes (`worker_process`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from tests.support import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
_serial = itertools.count(1)


class WorkerProcess:
    """One ``python -m tests.support.worker_process`` child; its stdout and stderr go to
    one log file."""

    def __init__(self, dsn: str, prefix: str, log_dir: Path, **options: Any) -> None:
        self.name = f"{options.pop('label', 'w')}{next(_serial)}"
        self.log_path = log_dir / f"{self.name}.log"
        args = [
            sys.executable,
            "-m",
            "tests.support.worker_process",
            dsn,
            prefix,
            "--name",
            self.name,
        ]
        for key, value in options.items():
            if value is not None:
                args += [f"--{key.replace('_', '-')}", str(value)]
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=_child_env()
        )
        self.pid = self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[tuple[float, str]]:
        """(wall-clock time, line) for every timestamped log line."""
        out: list[tuple[float, str]] = []
        for line in self.log().splitlines():
            stamp, _, rest = line.partition(" ")
            with contextlib.suppress(ValueError):
                out.append((float(stamp), rest))
        return out

    def wait_started(self, timeout: float = 60.0) -> None:
        def started() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited early:\n{self.log()}")
            return f"worker {self.name} started" in self.log()

        wait_until(started, timeout, interval=0.05, what=f"{self.name} to start")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the worker listens (it printed ``ready``): from then on an
        enqueue wakes it without waiting for a poll."""

        def ready() -> bool:
            lines = self.log().splitlines()
            if "not listening" in lines or self.proc.poll() is not None:
                raise AssertionError(f"{self.name} never listened:\n{self.log()}")
            return "ready" in lines

        wait_until(ready, timeout, interval=0.05, what=f"{self.name} to listen")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def wait_exit(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (graceful); SIGKILL if it has not exited within ``timeout``."""
        if self.alive:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
        self.reap(timeout)

    def reap(self, timeout: float) -> None:
        """Wait for the process to exit (SIGKILL after ``timeout``) and close its log.

        Sends no SIGTERM itself: a second one tells a worker to release its running
        jobs at once."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


class Fleet:
    """Every worker process a test started; `close` stops whatever is still running."""

    def __init__(self, dsn: str, prefix: str, log_dir: Path, **defaults: Any) -> None:
        self.dsn = dsn
        self.prefix = prefix
        self.log_dir = log_dir
        self.defaults = defaults
        self.workers: list[WorkerProcess] = []

    def spawn(self, *, wait: bool = True, **options: Any) -> WorkerProcess:
        worker = WorkerProcess(self.dsn, self.prefix, self.log_dir, **{**self.defaults, **options})
        self.workers.append(worker)
        if wait:
            worker.wait_started()
        return worker

    @property
    def alive(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.alive]

    def close(self) -> None:
        deadline = time.monotonic() + 60
        for worker in self.workers:
            if worker.alive:
                worker.signal(signal.SIGCONT)
                worker.signal(signal.SIGTERM)
        for worker in self.workers:
            worker.reap(max(1.0, deadline - time.monotonic()))

    def logs(self) -> str:
        return "\n".join(f"--- {w.name} (pid {w.pid})\n{w.log()}" for w in self.workers)
