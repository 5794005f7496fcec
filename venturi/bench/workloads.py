"""venturi's side of `venturi bench`: enqueue, enqueue-many, drain, latency, backlog, the
drain of a kind with a concurrency limit, and of a transactional kind.

Every workload runs no-op jobs through the public API (`Queue`, `Worker`) under a fresh
prefix, then proves each job ran exactly once: by the in-process ledger of handler
starts, and in SQL (each job completed on its first claim, one journal row per job).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Final

import psycopg

from venturi.bench.support import (
    BENCH_KIND,
    BenchFailure,
    BenchSettings,
    Ledger,
    Settled,
    clock,
    compose,
    fetch_one,
    listening,
    new_prefix,
    percentile,
    set_fillfactor,
)
from venturi.client import Queue
from venturi.events import WorkerEvents
from venturi.models import NewJob
from venturi.prefix import Prefix
from venturi.store.connections import Preparation
from venturi.store.ids import new_ids
from venturi.worker.runtime import Worker

# Handler threads of the in-process latency workload's worker.
IN_PROCESS_LATENCY_CONCURRENCY = 4
# The backlog's future-visible rows spread over these priorities, some above the due
# jobs' priority 0, so a claim must step past higher-priority rows that are not yet due.
BACKLOG_PRIORITIES = 7
BACKLOG_OTHER_KINDS = 4


def latency_figures(series: str, ledger: Ledger, committed: list[float]) -> dict[str, float]:
    """p50, p95 and p99 in milliseconds from each job's commit to its handler's start.

    The NOTIFY can reach the worker before the enqueue's commit acknowledgement reaches
    the enqueuing thread; such a job started within the commit itself: 0 ms."""
    waits = [max(0.0, ledger.started_at(n) - at) * 1000 for n, at in enumerate(committed)]
    return {
        f"{series}.p50": percentile(waits, 0.50),
        f"{series}.p95": percentile(waits, 0.95),
        f"{series}.p99": percentile(waits, 0.99),
    }


# The ceilings on a prefix's own jobs table: its writes without venturi's checks, ids
# and fair tags (the table's defaults stand for every other column).
_OWN_INSERT_NOTIFY: Final = """
WITH inserted AS (
    INSERT INTO {jobs} (id, kind, payload) VALUES (%s, %s, %s::jsonb) RETURNING kind
)
SELECT pg_notify({channel}, inserted.kind) FROM inserted
"""
_OWN_COPY: Final = "COPY {jobs} (id, kind, payload) FROM STDIN (FORMAT BINARY)"
_OWN_COPY_TYPES: Final = ("uuid", "text", "jsonb")


class VenturiBench:
    """A queue under its own prefix with one no-op kind whose handler writes the ledger."""

    def __init__(
        self,
        settings: BenchSettings,
        label: str = "v",
        *,
        prepared_statements: Preparation = "auto",
        concurrency_limit: int | None = None,
        transactional: bool = False,
        job_seconds: float = 0.0,
        vacuum: bool = True,
    ) -> None:
        self.settings = settings
        self.vacuum = vacuum
        # Jobs every `sustain` round so far drained (and left in the table).
        self.sustained = 0
        self._first_rate: float | None = None
        self.prefix = new_prefix(label)
        self.ledger = Ledger()
        self.backlog = 0
        self.queue = Queue(
            settings.dsn,
            prefix=self.prefix,
            pool_size=8,
            prepared_statements=prepared_statements,
            retention=None,  # the rounds measure no pruning but the prune workload's own
        )
        self.queue.migrate()
        self.conn = psycopg.connect(settings.dsn, autocommit=True)
        set_fillfactor(self.conn, self.prefix, settings.fillfactor)
        ledger = self.ledger
        pause = threading.Event()  # never set: waits out job_seconds

        # With a concurrency limit, every claim takes the limited path (the kind's turn)
        # and every completion passes its place on (`venturi.worker.passing`). A
        # transactional kind completes each run in its own transaction (nothing else
        # written there): the cost of that completion against a batched one.
        @self.queue.job(
            BENCH_KIND, lease=60, concurrency=concurrency_limit, transactional=transactional
        )
        def noop(n: int) -> None:
            ledger.record(n)
            if job_seconds:
                pause.wait(job_seconds)

    def close(self) -> None:
        """Close the queue and drop the prefix's tables."""
        try:
            self.queue.drop_prefix()
        finally:
            self.queue.close()
            self.conn.close()

    # -- rounds -----------------------------------------------------------------------

    def reset(self, expected: int) -> None:
        """Remove the previous round's jobs (keeping any backlog) and arm the ledger."""
        if self.backlog:
            self.conn.execute(compose("DELETE FROM {jobs} WHERE status <> 'pending'", self.prefix))
        else:
            self.conn.execute(
                compose(
                    "TRUNCATE {journal}, {deps}, {steps}, {signals}, {waits}, {jobs}", self.prefix
                )
            )
        self.ledger.reset(expected)

    def enqueue_one(self) -> dict[str, float]:
        """``enqueue_jobs`` single enqueues, one transaction each, from one thread."""
        count = self.settings.enqueue_jobs
        self.reset(count)
        enqueue = self.queue.enqueue
        started = time.perf_counter()
        for n in range(count):
            enqueue(BENCH_KIND, {"n": n})
        elapsed = time.perf_counter() - started
        self._check_pending(count, "enqueue")
        return {"enqueue": count / elapsed}

    def enqueue_many(self) -> dict[str, float]:
        """``many_jobs`` jobs in `enqueue_many` batches of ``batch``, NewJob building timed."""
        count, batch = self.settings.many_jobs, self.settings.batch
        self.reset(count)
        started = time.perf_counter()
        for first in range(0, count, batch):
            jobs = [NewJob(BENCH_KIND, {"n": n}) for n in range(first, min(first + batch, count))]
            self.queue.enqueue_many(jobs)
        elapsed = time.perf_counter() - started
        self._check_pending(count, "enqueue-many")
        return {"enqueue-many": count / elapsed}

    def insert_notify_own_table(self) -> dict[str, float]:
        """The single-enqueue ceiling on this prefix's own jobs table: per transaction,
        one INSERT of the id, kind and payload (the table's defaults for the rest) and
        the notification, in one statement; ids and JSON made here, nothing checked."""
        count = self.settings.enqueue_jobs
        self.reset(count)
        query = compose(_OWN_INSERT_NOTIFY, self.prefix)
        started = time.perf_counter()
        with self.conn.cursor() as cur:
            for n, job_id in enumerate(new_ids(count)):
                params = (job_id.to_uuid(), BENCH_KIND, json.dumps({"n": n}))
                cur.execute(query, params)
        elapsed = time.perf_counter() - started
        self._check_pending(count, "insert+notify ceiling on the jobs table")
        return {"ceiling.insert_notify.own_table": count / elapsed}

    def copy_own_table(self) -> dict[str, float]:
        """The bulk ceiling on this prefix's own jobs table: a binary COPY of ``batch``
        rows (id, kind, payload) per transaction, then the notification; ids and JSON
        made here, nothing checked."""
        count, batch = self.settings.many_jobs, self.settings.batch
        self.reset(count)
        copy_query = compose(_OWN_COPY, self.prefix)
        notify = compose("SELECT pg_notify({channel}, %s)", self.prefix)
        started = time.perf_counter()
        with self.conn.cursor() as cur:
            for first in range(0, count, batch):
                size = min(batch, count - first)
                with self.conn.transaction():
                    with cur.copy(copy_query) as copy:
                        copy.set_types(_OWN_COPY_TYPES)
                        for n, job_id in enumerate(new_ids(size), first):
                            copy.write_row((job_id.to_uuid(), BENCH_KIND, {"n": n}))
                    cur.execute(notify, (BENCH_KIND,))
        elapsed = time.perf_counter() - started
        self._check_pending(count, "binary COPY ceiling on the jobs table")
        return {"ceiling.copy.own_table": count / elapsed}

    def drain(
        self, concurrency: int, key: str | None = None, count: int | None = None
    ) -> dict[str, float]:
        """Time a started, listening worker from the commit of ``count`` jobs (default
        ``jobs``) to the commit of the last one's settlement."""
        count = self.settings.jobs if count is None else count
        self.reset(count)
        elapsed = self.drain_timed(concurrency, count, f"drain c{concurrency}")
        self.verify(count, f"drain c{concurrency}")
        return {key or f"drain.c{concurrency}": count / elapsed}

    def drain_timed(self, concurrency: int, count: int, what: str) -> float:
        """Seconds a started, listening worker takes from the commit of ``count`` jobs to
        the commit of the last one's settlement."""
        settled = Settled(count)
        jobs = [NewJob(BENCH_KIND, {"n": n}) for n in range(count)]
        worker = self._started_worker(concurrency, settled)
        try:
            self.queue.enqueue_many(jobs)
            started = time.perf_counter()
            if not settled.countdown.done.wait(self.settings.timeout):
                raise BenchFailure(
                    f"{what}: {settled.countdown.count} of {count} settled "
                    f"within {self.settings.timeout:g}s"
                )
            return time.perf_counter() - started
        finally:
            worker.stop(timeout=30)

    def sustain(self, key: str) -> dict[str, float]:
        """One round of sustained load: drain ``jobs`` more jobs at concurrency 16 on top
        of every earlier round's, nothing deleted in between (as a busy queue between two
        prunes), so the dead row versions of every round so far stay until a vacuum
        removes them. Returns the round's rate, that rate against the first round's
        (``.of_first``), and the dead versions the server's statistics count after it."""
        count = self.settings.jobs
        self.ledger.reset(count)
        elapsed = self.drain_timed(16, count, key)
        self.sustained += count
        self._verify_sustained(count, key)
        rate = count / elapsed
        first = self._first_rate = self._first_rate or rate
        dead = fetch_one(
            self.conn,
            compose(
                "SELECT coalesce(max(n_dead_tup), 0) FROM pg_stat_user_tables"
                " WHERE relid = to_regclass(%s)",
                self.prefix,
            ),
            (Prefix(self.prefix).jobs,),
        )[0]
        return {key: rate, f"{key}.of_first.ratio": rate / first, f"{key}.dead_rows": dead}

    def restart_sustained(self) -> None:
        """Empty the tables and start counting sustained rounds afresh."""
        self.reset(0)
        self.sustained = 0
        self._first_rate = None

    def latency_in_place(self, series: str) -> dict[str, float]:
        """`latency` on the table as the sustained rounds left it (nothing removed, so a
        claim meets every dead row version those rounds left): ``series``.p50, .p95 and
        .p99 in milliseconds, the jobs checked as a sustained round's are."""
        count = self.settings.latency_samples
        self.ledger.reset(count)
        settled = Settled(count)
        worker = self._started_worker(IN_PROCESS_LATENCY_CONCURRENCY, settled)
        try:
            committed = self.paced_enqueues(count)
            if not settled.countdown.done.wait(self.settings.timeout):
                raise BenchFailure(f"{series}: {settled.countdown.count} of {count} settled")
        finally:
            worker.stop(timeout=30)
        self.sustained += count
        self._verify_sustained(count, series)
        return latency_figures(series, self.ledger, committed)

    def _verify_sustained(self, count: int, what: str) -> None:
        """This round's ``count`` jobs each ran once (the ledger); every round's
        completed on its first claim and was journaled once; nothing left pending or
        claimed."""
        self.ledger.check(count, what)
        completed, unfinished = fetch_one(
            self.conn,
            compose(
                "SELECT count(*) FILTER (WHERE status = 'completed' AND run_count = 1),"
                " count(*) FILTER (WHERE status IN ('pending', 'claimed')) FROM {jobs}",
                self.prefix,
            ),
        )
        rows, distinct = fetch_one(
            self.conn,
            compose("SELECT count(*), count(DISTINCT job_id) FROM {journal}", self.prefix),
        )
        if not completed == rows == distinct == self.sustained or unfinished:
            raise BenchFailure(
                f"{what}: wanted {self.sustained} jobs completed once: {completed} completed "
                f"on a first claim, {unfinished} unfinished, journal rows {rows} "
                f"({distinct} jobs)"
            )

    def latency(self, concurrency: int = IN_PROCESS_LATENCY_CONCURRENCY) -> dict[str, float]:
        """The secondary latency figure: the worker in this process (``concurrency``
        handler threads, idle), one enqueue every ``latency_interval`` s; milliseconds
        from the enqueue's commit (its return) to the handler's first line. A deployed
        worker runs in a process of its own: `venturi.bench.worker.latency` measures that."""
        count = self.settings.latency_samples
        self.reset(count)
        settled = Settled(count)
        worker = self._started_worker(concurrency, settled)
        try:
            committed = self.paced_enqueues(count)
            if not settled.countdown.done.wait(self.settings.timeout):
                raise BenchFailure(f"latency: {settled.countdown.count} of {count} settled")
        finally:
            worker.stop(timeout=30)
        self.verify(count, "latency")
        return latency_figures(f"latency.inprocess.c{concurrency}", self.ledger, committed)

    def paced_enqueues(self, count: int) -> list[float]:
        """Enqueue jobs 0 to ``count - 1``, one every ``latency_interval`` s; returns
        each enqueue's commit time (when `Queue.enqueue` returned, by `clock`)."""
        committed: list[float] = []
        pace = threading.Event()
        for n in range(count):
            self.queue.enqueue(BENCH_KIND, {"n": n})
            committed.append(clock())
            pace.wait(self.settings.latency_interval)
        return committed

    def _started_worker(self, concurrency: int, events: WorkerEvents) -> Worker:
        worker = self.queue.worker(
            concurrency=concurrency, events=events, poll_interval=5.0, vacuum=self.vacuum
        )
        return listening(worker)

    # -- checks -----------------------------------------------------------------------

    def _check_pending(self, count: int, what: str) -> None:
        pending = fetch_one(
            self.conn,
            compose("SELECT count(*) FROM {jobs} WHERE status = 'pending'", self.prefix),
        )[0]
        if pending != count + self.backlog:
            raise BenchFailure(f"{what}: {pending - self.backlog} pending jobs, wanted {count}")

    def busy(self) -> bool:
        """Whether a job is still pending or claimed (the backlog-free prefix only). Two
        probes of the partial indexes, cheap enough to poll while workers run."""
        query = compose(
            "SELECT EXISTS (SELECT FROM {jobs} WHERE status = 'pending' AND kind = %s)"
            " OR EXISTS (SELECT FROM {jobs} WHERE status = 'claimed')",
            self.prefix,
        )
        return bool(fetch_one(self.conn, query, (BENCH_KIND,))[0])

    def verify(self, count: int, what: str, *, ledger: bool = True) -> None:
        """Every job ran once (the ledger, when the handlers ran in this process),
        completed on its first claim and was journaled once; any backlog untouched."""
        if ledger:
            self.ledger.check(count, what)
        jobs = compose(
            "SELECT count(*) FILTER (WHERE status = 'completed' AND run_count = 1),"
            " count(*) FILTER (WHERE status <> 'pending'),"
            " count(*) FILTER (WHERE status = 'pending') FROM {jobs}",
            self.prefix,
        )
        completed, touched, pending = fetch_one(self.conn, jobs)
        journal = compose(
            "SELECT count(*), count(DISTINCT job_id),"
            " count(*) FILTER (WHERE outcome = 'completed') FROM {journal}",
            self.prefix,
        )
        rows, distinct, completions = fetch_one(self.conn, journal)
        problems = []
        if completed != count or touched != count:
            problems.append(f"{completed} completed on a first claim, {touched} touched")
        if pending != self.backlog:
            problems.append(f"{pending} pending, backlog was {self.backlog}")
        if not rows == distinct == completions == count:
            problems.append(f"journal rows {rows}, distinct jobs {distinct}")
        if problems:
            raise BenchFailure(f"{what}: wanted {count} jobs run once: " + "; ".join(problems))

    # -- backlog ----------------------------------------------------------------------

    def fill_backlog(self, size: int) -> None:
        """Add ``size`` pending rows no worker of ours may claim: half of our kind but
        visible tomorrow (at several priorities), half due now but of other kinds."""
        future = size // 2
        query = compose(
            """
            INSERT INTO {jobs} (id, kind, payload, priority, visible_at)
            SELECT lpad(to_hex(i), 32, '0')::uuid,
                   CASE WHEN i <= %(future)s THEN %(kind)s
                        ELSE 'bench.other' || (i %% %(others)s) END,
                   '{{}}'::jsonb,
                   (i %% %(priorities)s) - %(priorities)s / 2,
                   CASE WHEN i <= %(future)s
                        THEN now() + interval '1 day' + i * interval '1 millisecond'
                        ELSE now() - interval '1 minute' END
            FROM generate_series(1, %(size)s) AS i
            """,
            self.prefix,
        )
        params: dict[str, Any] = {
            "future": future,
            "kind": BENCH_KIND,
            "others": BACKLOG_OTHER_KINDS,
            "priorities": BACKLOG_PRIORITIES,
            "size": size,
        }
        self.conn.execute(query, params)
        self.conn.execute(compose("VACUUM (ANALYZE) {jobs}", self.prefix))
        self.backlog = size
