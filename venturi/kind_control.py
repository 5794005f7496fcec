"""Controlling kinds from a `Queue`, cluster-wide: pausing and resuming them, and reading
each kind's flow control as the database holds it."""

from __future__ import annotations

from collections.abc import Callable

from venturi.limits import KindState, checked_kinds
from venturi.reading import Reads
from venturi.store.protocol import Store


class KindControl(Reads):
    """`Queue`'s flow control operations (a mixin over its store)."""

    store: Store
    # `Queue._check_process`: raises `ForkedError` in a child of the queue's process.
    _check_process: Callable[[], None]

    def pause(self, *kinds: str) -> list[str]:
        """Pause ``kinds`` for every worker, until `resume`; returns those newly paused.

        Workers stop claiming them at once (the claim reads the flag); running jobs
        finish, enqueues are still accepted, and the pause outlives worker restarts.
        """
        self._check_process()
        return self.store.pause_kinds(checked_kinds(kinds))

    def resume(self, *kinds: str) -> list[str]:
        """Resume paused ``kinds`` (idle workers are woken); returns those that were paused."""
        self._check_process()
        return self.store.resume_kinds(checked_kinds(kinds))

    def paused(self) -> set[str]:
        """The kinds paused now."""
        self._check_process()
        return {state.kind for state in self.reads.kinds() if state.paused}

    def kinds(self) -> list[KindState]:
        """Each kind's flow control as the database holds it: paused, the latest
        declared limits (and who declared them), and its jobs claimed now."""
        self._check_process()
        return self.reads.kinds()
