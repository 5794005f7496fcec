"""A hot standby of a `ThrowawayServer`: ``pg_basebackup -R`` of the running primary into
a temporary directory, started on a free port and replaying the primary's WAL stream;
`promote` makes it a primary of its own."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg

from tests.faults.server import SUPERUSER, ThrowawayServer
from venturi.bench.standby import free_port, server_user


class StandbyServer(ThrowawayServer):
    """A streaming replica of ``primary`` (which must be running); `start`, `promote`,
    `destroy`."""

    def __init__(self, primary: ThrowawayServer) -> None:
        with (primary.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host replication {SUPERUSER} 127.0.0.1/32 trust\n")
        primary.reload()
        self.bin_dir = primary.bin_dir
        self.ssl_capable = primary.ssl_capable
        self.user = server_user()
        self.root = Path(tempfile.mkdtemp(prefix="venturi-standby-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.root.chmod(0o755)
        self._chown(self.root)
        self._run(
            "pg_basebackup",
            *("-D", str(self.data), "-R", "-X", "stream", "-c", "fast"),
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", SUPERUSER),
        )
        self.write_conf(
            {
                "port": str(self.port),
                "unix_socket_directories": f"'{self.root}'",
                "hot_standby": "on",
                # The copy's settings are the primary's; once promoted, this server has no
                # standby of its own to wait for (a cluster manager re-points the rest).
                "synchronous_standby_names": "''",
            }
        )

    def replayed(self, lsn: str) -> bool:
        """Whether this standby has replayed the primary's WAL up to ``lsn``."""
        with psycopg.connect(self.dsn) as conn:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
        return bool(row and row[0])

    def promote(self) -> None:
        """``pg_ctl promote``, returning once this server accepts writes."""
        self._pg_ctl("promote")
