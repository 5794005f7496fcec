"""`StopEvent`: a run's ``ctx.stopping``, a `threading.Event` that costs a flag to build."""

from __future__ import annotations

import threading
from typing import ClassVar


class StopEvent(threading.Event):
    """A `threading.Event` that keeps only a flag until somebody waits on it.

    Every claimed run gets one (`JobContext.stopping`), and building a plain Event (a
    Condition around a new lock) was 15% of a no-op drain's time holding the GIL in the
    worker; most runs are never stopped and their handlers never wait, so the Event
    a `wait` blocks on is made by the first `wait`.

    `is_set` reads the flag without a lock. `set`, `clear` and the first `wait` take
    one lock shared by every instance (they are rare), so a `set` either comes before a
    `wait` looks at the flag or finds the Event that `wait` blocks on: none is lost.
    """

    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        # threading.Event.__init__ (its Condition) is what this class leaves out.
        self._stop_flag = False
        self._waited: threading.Event | None = None

    def is_set(self) -> bool:
        return self._stop_flag

    def set(self) -> None:
        with self._shared_lock:
            self._stop_flag = True
            waited = self._waited
        if waited is not None:
            waited.set()

    def clear(self) -> None:
        with self._shared_lock:
            self._stop_flag = False
            if self._waited is not None:
                self._waited.clear()

    def wait(self, timeout: float | None = None) -> bool:
        with self._shared_lock:
            if self._stop_flag:
                return True
            if self._waited is None:
                self._waited = threading.Event()
            waited = self._waited
        return waited.wait(timeout)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {'set' if self._stop_flag else 'unset'}>"
