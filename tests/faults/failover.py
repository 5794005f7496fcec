"""A primary and its streaming standby, switched over under load, and what the switch did.

`ReplicatedPair` runs a throwaway primary and a hot standby of it (`StandbyServer`,
synchronous or asynchronous) behind one multi-host DSN with
``target_session_attrs=read-write``, the way an application reaches a Patroni or
pg_auto_failover cluster. Its three switches end with the standby promoted:

- `switchover`: a planned switch, the primary stopped fast (sessions ended with 57P01,
  its remaining WAL sent to the standby) before the promotion;
- `crash`: the primary stopped immediately (no shutdown checkpoint, nothing more sent);
- `demote_in_place`: the primary made read-only (``default_transaction_read_only = on``
  and a reload, the way some managed services leave the old writer) and left running
  beside the promoted standby.

`run_switch` puts two worker processes (`tests.support.worker_process`) and two
enqueuing processes (`tests.faults.enqueuer_process`) on the pair, switches it mid-run and
returns a `SwitchRun`: the figures the invariants are checked on, read from the new
primary.
"""

from __future__ import annotations

import contextlib
import enum
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

import attrs
import psycopg
from psycopg import sql
from ulid import ULID

from tests.faults.scenario import prepare
from tests.faults.server import ThrowawayServer, find_binaries
from tests.scaling.standby import StandbyServer
from tests.support import wait_until
from tests.support.fleet import REPO_ROOT, Fleet, _child_env

LEASE: Final = 10.0  # heartbeats every ~3.3 s: a switch of a few seconds keeps every lease
REAPER_INTERVAL: Final = 0.5
CONCURRENCY: Final = 16
# The bound: workers run jobs again within this many seconds of the promotion.
RESUME_WITHIN: Final = 15.0
# A claim expired longer ago than this is stuck: a reaper should have taken it back.
STUCK_AFTER: Final = REAPER_INTERVAL + 5.0
# Log lines of a worker thread that ended (restarted, or the worker stopped itself).
THREAD_DEATHS: Final = (
    "failed; restarting it",
    "keeps failing; giving up",
    "hit a fatal database error",
    "is stopping itself",
)


class Switch(enum.Enum):
    SWITCHOVER = "planned switchover"
    CRASH = "crash"
    DEMOTE_IN_PLACE = "primary demoted in place"


class ReplicatedPair:
    """A running primary and hot standby; ``synchronous`` makes every commit wait until
    the standby has flushed it (``synchronous_standby_names = '*'``,
    ``synchronous_commit = on``)."""

    def __init__(self, *, synchronous: bool) -> None:
        found = find_binaries()
        assert found is not None, "no PostgreSQL binaries"
        self.synchronous = synchronous
        self.primary = ThrowawayServer(*found)
        self.primary.write_conf(
            {
                "synchronous_commit": "on" if synchronous else "local",
                "synchronous_standby_names": "'*'" if synchronous else "''",
                "wal_sender_timeout": "5s",
            }
        )
        self.standby: StandbyServer | None = None
        try:
            self.primary.start()
            self.standby = StandbyServer(self.primary)
            self.standby.write_conf({"wal_receiver_timeout": "5s"})
            self.standby.start()
            wait_until(self._streaming, 60, 0.05, "the standby to stream from the primary")
        except BaseException:
            self.destroy()
            raise

    @property
    def new_primary(self) -> StandbyServer:
        assert self.standby is not None
        return self.standby

    @property
    def dsn(self) -> str:
        """Both hosts, for the one that takes writes (libpq tries them in order)."""
        return (
            f"host=127.0.0.1,127.0.0.1 port={self.primary.port},{self.new_primary.port}"
            " user=postgres dbname=postgres target_session_attrs=read-write"
        )

    def _streaming(self) -> bool:
        with psycopg.connect(self.primary.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchone()
        return row is not None and row[0] == ("sync" if self.synchronous else "async")

    def switch(self, how: Switch) -> datetime:
        """Switch as ``how`` says; returns when the promotion was asked for (the moment
        the figures count from). The standby accepts writes when this returns."""
        if how is Switch.SWITCHOVER:
            self.primary.stop()
        elif how is Switch.CRASH:
            self.primary._pg_ctl("-m", "immediate", "stop")
        else:
            self._make_read_only()
        promoted_at = datetime.now(UTC)
        self.new_primary.promote()
        return promoted_at

    def _make_read_only(self) -> None:
        """``default_transaction_read_only = on`` and a reload, then wait until no write
        started before it is still open, so every commit made on this primary reached
        the standby before it is promoted (a later one would wait for it forever)."""
        with psycopg.connect(self.primary.dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            conn.execute("SELECT pg_reload_conf()")

            def no_writer_left() -> bool:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()"
                ).fetchone()
                return row is not None and row[0] == 0

            wait_until(no_writer_left, 30, 0.01, "the writes open at the demotion to end")

    def destroy(self) -> None:
        if self.standby is not None:
            self.standby.destroy()
        self.primary.destroy()


@contextlib.contextmanager
def replicated_pair(*, synchronous: bool) -> Iterator[ReplicatedPair]:
    pair = ReplicatedPair(synchronous=synchronous)
    try:
        yield pair
    finally:
        pair.destroy()


class EnqueuerProcess:
    """One ``python -m tests.faults.enqueuer_process`` child, its acknowledged ids in
    ``acks`` and its log beside them."""

    def __init__(self, dsn: str, prefix: str, log_dir: Path, name: str, batch: int) -> None:
        self.acks = log_dir / f"{name}.acks"
        self.log_path = log_dir / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *("-m", "tests.faults.enqueuer_process", dsn, prefix, str(self.acks)),
                *("--rate", "25", "--batch", str(batch)),
            ],
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=_child_env(),
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def acknowledged(self) -> list[ULID]:
        if not self.acks.exists():
            return []
        lines = self.acks.read_text().splitlines()
        return [ULID.from_str(line[3:]) for line in lines if line.startswith("ok ")]

    def failed_calls(self) -> int:
        if not self.acks.exists():
            return 0
        return sum(1 for line in self.acks.read_text().splitlines() if line.startswith("err "))

    def stop(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._log.close()
        return code


@attrs.frozen
class SwitchRun:
    """What one switch under load did, read on the new primary afterwards."""

    switch: Switch
    synchronous: bool
    enqueued: int  # job rows on the new primary (acknowledged or not)
    acknowledged: int  # ids the enqueuers were given back
    completed: int
    missing: int  # acknowledged ids the new primary lacks
    double_completed: int  # completed jobs without exactly one completing journal row
    stuck: int  # the most claims seen at once expired past STUCK_AFTER, after the switch
    thread_deaths: int
    first_completion: float  # seconds from the promotion to the first completion after it
    workers_exit_codes: tuple[int, ...]
    failed_enqueue_calls: int
    adopted: int  # jobs a worker found claimed in its name by a claim whose answer was lost
    pool_drops: int  # pools that dropped their connections on leaving the old primary
    acknowledged_ids: tuple[ULID, ...] = attrs.field(repr=False)

    def line(self) -> str:
        mode = "sync" if self.synchronous else "async"
        return (
            f"{self.switch.value} ({mode}): enqueued {self.enqueued}, acknowledged "
            f"{self.acknowledged}, completed {self.completed}, missing {self.missing}, "
            f"double-completed {self.double_completed}, stuck {self.stuck}, thread deaths "
            f"{self.thread_deaths}, promotion -> first completion {self.first_completion:.2f}s "
            f"(failed enqueue calls {self.failed_enqueue_calls}, lost claim answers adopted "
            f"{self.adopted}, pool drops {self.pool_drops})"
        )


class Reader:
    """Reads the prefix's tables on the new primary, reconnecting when a read fails."""

    def __init__(self, dsn: str, prefix: str) -> None:
        self.dsn = dsn
        self.jobs = sql.Identifier(f"{prefix}_jobs")
        self.journal = sql.Identifier(f"{prefix}_journal")
        self._conn: psycopg.Connection[Any] | None = None

    def rows(self, query: sql.Composed, params: Any = None) -> list[tuple[Any, ...]]:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=3)
            return self._conn.execute(query, params).fetchall()
        except psycopg.OperationalError:
            self.close()
            raise

    def scalar(self, query: sql.Composed, params: Any = None) -> Any:
        return self.rows(query, params)[0][0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def stuck_claims(reader: Reader) -> int:
    """Claims whose lease expired more than `STUCK_AFTER` seconds ago."""
    return int(
        reader.scalar(
            sql.SQL(
                "SELECT count(*) FROM {} WHERE status = 'claimed'"
                " AND claim_expires_at < now() - make_interval(secs => %s)"
            ).format(reader.jobs),
            (STUCK_AFTER,),
        )
    )


def double_completed(reader: Reader) -> int:
    """Completed jobs without exactly one ``completed`` journal row, plus jobs of any
    status with more than one."""
    return int(
        reader.scalar(
            sql.SQL(
                "SELECT count(*) FROM {jobs} AS j WHERE (SELECT count(*) FROM {journal} AS r"
                " WHERE r.job_id = j.id AND r.outcome = 'completed')"
                " <> CASE WHEN j.status = 'completed' THEN 1 ELSE 0 END"
            ).format(jobs=reader.jobs, journal=reader.journal)
        )
    )


def missing(reader: Reader, acknowledged: list[ULID]) -> int:
    """How many of ``acknowledged`` the prefix's jobs table lacks."""
    return int(
        reader.scalar(
            sql.SQL(
                "SELECT count(*) FROM unnest(%s::uuid[]) AS a (id)"
                " WHERE NOT EXISTS (SELECT FROM {} AS j WHERE j.id = a.id)"
            ).format(reader.jobs),
            ([i.to_uuid() for i in acknowledged],),
        )
    )


def thread_deaths(logs: str) -> int:
    return sum(logs.count(line) for line in THREAD_DEATHS)


class Sampler:
    """Counts stuck claims on the new primary every half second, in a thread, keeping
    the most seen at once; `stop` returns it."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._stop = threading.Event()
        self.most = 0
        self._thread = threading.Thread(target=self._run, name="test-stuck-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(psycopg.Error):
                self.most = max(self.most, stuck_claims(self._reader))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.most


def run_switch(
    pair: ReplicatedPair,
    prefix: str,
    how: Switch,
    make_fleet: Callable[..., Fleet],
    log_dir: Path,
    *,
    warm_up: int = 300,
    after: int = 400,
) -> SwitchRun:
    """Two enqueuers and two workers (concurrency `CONCURRENCY`) on ``pair``; ``how``
    switches it once ``warm_up`` jobs completed; the load goes on until ``after`` more
    completed on the new primary, then every acknowledged job must settle there."""
    prepare(pair.dsn, prefix).close()
    fleet = make_fleet(
        pair.dsn,
        prefix,
        concurrency=CONCURRENCY,
        lease=LEASE,
        reaper_interval=REAPER_INTERVAL,
        pool_size=4,
        poll_interval=5.0,
    )
    workers = [fleet.spawn(wait=False) for _ in range(2)]
    for worker in workers:
        worker.wait_ready()
    enqueuers = [
        EnqueuerProcess(pair.dsn, prefix, log_dir, "enqueue-one", batch=1),
        EnqueuerProcess(pair.dsn, prefix, log_dir, "enqueue-many", batch=4),
    ]
    old = Reader(pair.primary.dsn, prefix)
    reader = Reader(pair.new_primary.dsn, prefix)
    try:
        completed = sql.SQL("SELECT count(*) FROM {} WHERE status = 'completed'").format(old.jobs)
        wait_until(lambda: old.scalar(completed) >= warm_up, 120, 0.1, "the warm-up")
        old.close()
        promoted_at = pair.switch(how)
        sampler = Sampler(reader)
        first = _first_completion(reader, promoted_at)
        after_switch = sql.SQL(
            "SELECT count(*) FROM {} WHERE outcome = 'completed' AND recorded_at > %s"
        ).format(reader.journal)
        wait_until(
            lambda: reader.scalar(after_switch, (promoted_at,)) >= after,
            120,
            0.1,
            f"{after} completions on the new primary",
        )
        codes = [enqueuer.stop() for enqueuer in enqueuers]
        assert codes == [0, 0], "\n".join(e.log() for e in enqueuers)
        unfinished = sql.SQL(
            "SELECT count(*) FROM {} WHERE status NOT IN ('completed', 'dead', 'cancelled')"
        ).format(reader.jobs)
        wait_until(lambda: reader.scalar(unfinished) == 0, 120, 0.2, "every job to settle")
        stuck = sampler.stop()
        assert all(w.alive for w in workers), fleet.logs()
        for worker in workers:
            worker.stop()
        acknowledged = [i for e in enqueuers for i in e.acknowledged()]
        logs = fleet.logs() + "".join(e.log() for e in enqueuers)
        return SwitchRun(
            switch=how,
            synchronous=pair.synchronous,
            enqueued=int(reader.scalar(sql.SQL("SELECT count(*) FROM {}").format(reader.jobs))),
            acknowledged=len(acknowledged),
            completed=int(reader.scalar(completed_on(reader))),
            missing=missing(reader, acknowledged),
            double_completed=double_completed(reader),
            stuck=stuck,
            thread_deaths=thread_deaths(logs),
            first_completion=first,
            workers_exit_codes=tuple(w.proc.returncode for w in workers),
            failed_enqueue_calls=sum(e.failed_calls() for e in enqueuers),
            adopted=logs.count("whose answer was lost; running it"),
            pool_drops=logs.count("to reconnect to the primary"),
            acknowledged_ids=tuple(acknowledged),
        )
    finally:
        for enqueuer in enqueuers:
            if enqueuer.proc.poll() is None:
                enqueuer.stop()
        fleet.close()
        reader.close()
        old.close()


def completed_on(reader: Reader) -> sql.Composed:
    return sql.SQL("SELECT count(*) FROM {} WHERE status = 'completed'").format(reader.jobs)


def _first_completion(reader: Reader, promoted_at: datetime) -> float:
    """Seconds from ``promoted_at`` to the first completion the new primary recorded
    after it; waits for one (`RESUME_WITHIN` plus a margin to see how late it is)."""
    query = sql.SQL(
        "SELECT min(recorded_at) FROM {} WHERE outcome = 'completed' AND recorded_at > %s"
    ).format(reader.journal)

    def first() -> tuple[float] | None:
        with contextlib.suppress(psycopg.OperationalError):
            at = reader.scalar(query, (promoted_at,))
            if at is not None:
                return ((at - promoted_at).total_seconds(),)
        return None

    return wait_until(first, RESUME_WITHIN + 45, 0.05, "a completion on the new primary")[0]
