"""One worker process of a group, as its supervisor sees it: the process, its report
pipe and what it last reported."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from venturi.processes.channel import CHILD_ENV, ChildSettings, Report

logger = logging.getLogger("venturi.processes")


class ChildProcess:
    """Starts ``command`` as a fresh interpreter in a session of its own (a terminal's
    Ctrl-C reaches only the supervisor, which forwards it), its report pipe on an
    inherited descriptor."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        max_jobs: int | None,
        metrics: bool,
    ) -> None:
        read_fd, write_fd = os.pipe()
        settings = ChildSettings(write_fd, os.getpid(), max_jobs, metrics)
        try:
            self.proc = subprocess.Popen(
                list(command),
                env={**env, CHILD_ENV: settings.encode()},
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.fd: int | None = read_fd  # open until `close`, so its number is never reused
        self.eof = False
        self.pid = self.proc.pid
        self.started_at = time.monotonic()
        self.report = Report()
        self.ready = False
        # Resident memory when it first reported ready.
        self.rss_at_start = 0
        self.signals_sent = 0
        self._partial = b""

    def read(self) -> bool:
        """Take in what the child wrote; True when it became ready just now."""
        was_ready = self.ready
        while self.fd is not None and not self.eof:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:  # end of file: the child closed its pipe or exited
                self.eof = True
                break
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            for line in lines:
                try:
                    self.report = Report.decode(line)
                except ValueError:
                    logger.warning("worker process %d wrote a bad report: %r", self.pid, line)
                    continue
                if self.report.ready and not self.ready:
                    self.ready, self.rss_at_start = True, self.report.rss
        return self.ready and not was_ready

    def exit_code(self) -> int | None:
        """The exit status once it ended (negative: the signal that ended it)."""
        code = self.proc.poll()
        if code is not None:
            self.read()  # the reports it wrote before it ended
        return code

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_stop(self) -> None:
        """SIGTERM: the first stops it gracefully, a second releases its running jobs."""
        self.signals_sent += 1
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def close(self) -> None:
        """Release the pipe and reap the process (once it ended)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(0)


def describe_exit(code: int) -> str:
    """``status 1`` or ``signal SIGKILL``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"status {code}"
