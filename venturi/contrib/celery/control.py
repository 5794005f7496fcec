"""``app.on_after_configure`` and ``app.control``: the parts of Celery's signals and
remote control that a venturi app has."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .exceptions import NotSupported

if TYPE_CHECKING:
    from .app import Celery


class Signal:
    """``app.on_after_configure.connect``: called with ``sender=app`` before the app's
    schedules are read (where Celery apps call ``add_periodic_task``)."""

    def __init__(self) -> None:
        self.receivers: list[Callable[..., Any]] = []

    def connect(self, receiver: Callable[..., Any] | None = None, **_: Any) -> Any:
        if receiver is None:
            return self.connect
        self.receivers.append(receiver)
        return receiver

    def send(self, sender: Celery) -> None:
        for receiver in self.receivers:
            receiver(sender=sender)


class Control:
    """``app.control``: ``revoke`` only (venturi's cancel)."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def revoke(self, task_id: str | Sequence[str], terminate: bool = False, **_: Any) -> None:
        ids = [task_id] if isinstance(task_id, str) else list(task_id)
        for one in ids:
            self._app.venturi_queue().cancel(one)

    def __getattr__(self, name: str) -> Any:
        raise NotSupported(
            f"app.control.{name}", "use venturi stats, venturi workers or the dashboard"
        )
