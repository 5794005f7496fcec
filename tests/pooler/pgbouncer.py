"""A throwaway PgBouncer in transaction mode in front of the test database."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support import wait_until

# PgBouncer's warning for a server message that arrives while no client is linked to
# that server connection: a NOTIFY for a LISTEN left on a pooled server connection.
NOT_LINKED = "when not linked"
SERVER_CONNECTIONS = 8


def find_pgbouncer() -> str | None:
    """The pgbouncer binary (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _unprivileged_user() -> pwd.struct_passwd:
    """Who runs pgbouncer when we are root: ``postgres`` where PostgreSQL's packages made
    that user, else ``nobody``."""
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return pwd.getpwnam("nobody")


class PgBouncer:
    """pgbouncer as a subprocess on a free 127.0.0.1 port, ``pool_mode = transaction``,
    trust auth, ``SERVER_CONNECTIONS`` server connections per database and user (fewer
    than the tests' clients, so clients share them). Started as root, it runs as an
    unprivileged user (`_unprivileged_user`), since pgbouncer refuses to run as root."""

    def __init__(self, binary: str, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        params = conninfo_to_dict(server_dsn)
        host = str(params.get("host") or "127.0.0.1")
        port = int(params.get("port") or 5432)
        self.user = str(params.get("user") or pwd.getpwuid(os.getuid()).pw_name)
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="venturi-pgbouncer-"))
        self.log = self.dir / "pgbouncer.log"
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.dir / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"admin_users = {self.user}\n"
            "max_client_conn = 400\n"
            f"default_pool_size = {SERVER_CONNECTIONS}\n"
            f"logfile = {self.log}\n"
            f"pidfile = {self.dir / 'pgbouncer.pid'}\n"
        )
        self.dsn = make_conninfo(server_dsn, host="127.0.0.1", port=str(self.port))
        self._binary = binary
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> None:
        extra: dict[str, Any] = {}
        if os.geteuid() == 0:
            owner = _unprivileged_user()
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            extra = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        self.dir.chmod(0o755)
        with open(self.dir / "stderr.log", "wb") as stderr:
            self._process = subprocess.Popen(
                [self._binary, str(self.dir / "pgbouncer.ini")],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                **extra,
            )

        def answers() -> bool:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return True
            except psycopg.OperationalError as exc:
                if self._process is None or self._process.poll() is not None:
                    output = self.output()
                    self.stop()
                    raise RuntimeError(f"pgbouncer exited: {exc}\n{output}") from None
                return False

        try:
            wait_until(answers, timeout, interval=0.05, what="pgbouncer to accept connections")
        except AssertionError:
            output = self.output()
            self.stop()
            raise RuntimeError(f"pgbouncer did not come up:\n{output}") from None

    def output(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")
            for path in (self.dir / "stderr.log", self.log)
            if path.exists()
        )

    def log_size(self) -> int:
        """Where the log ends now: pass it to `not_linked` to count what came after."""
        return self.log.stat().st_size if self.log.exists() else 0

    def log_tail(self, since: int = 0) -> str:
        """What PgBouncer logged after offset ``since``."""
        with open(self.log, "rb") as log:
            log.seek(since)
            return log.read().decode(errors="replace")

    def not_linked(self, since: int = 0) -> int:
        """How many "not linked" warnings PgBouncer logged after offset ``since``."""
        return self.log_tail(since).count(NOT_LINKED)

    def reconnect(self) -> None:
        """Have PgBouncer replace every server connection once it is released (its admin
        console's RECONNECT), dropping whatever session state a test left on them."""
        admin = make_conninfo(self.dsn, dbname="pgbouncer")
        with psycopg.connect(admin, autocommit=True) as conn:
            # The console speaks the simple query protocol only.
            result = conn.pgconn.exec_(b"RECONNECT")
        assert result.status == pq.ExecStatus.COMMAND_OK, result.error_message

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
