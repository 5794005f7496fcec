"""The apps of this process: every live one (shared tasks join each), and the current
one (the last made, unless made with ``set_as_current=False``)."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from venturi.errors import ConfigurationError

if TYPE_CHECKING:
    from .app import Celery

_apps: list[weakref.ref[Celery]] = []
_current: list[weakref.ref[Celery]] = []
_apps_lock = threading.Lock()


def all_apps() -> list[Celery]:
    """Every live app of this process."""
    with _apps_lock:
        return [app for ref in _apps if (app := ref()) is not None]


def current_app() -> Celery:
    """The app made last (or set as current): shared tasks and ``AsyncResult(id)`` use it."""
    with _apps_lock:
        app = _current[-1]() if _current else None
    if app is None:
        raise ConfigurationError("no Celery app exists: create one with Celery('proj')")
    return app


def remember(app: Celery, *, as_current: bool) -> None:
    """Add ``app`` to the live apps (and make it the current one)."""
    with _apps_lock:
        _apps.append(weakref.ref(app))
        if as_current:
            _current.append(weakref.ref(app))


def make_current(app: Celery) -> None:
    """Make ``app`` the current app."""
    with _apps_lock:
        _current.append(weakref.ref(app))
