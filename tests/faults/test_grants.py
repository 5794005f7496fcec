"""The Security page's grants, run as written against the real server with the roles it
describes: each role can do its part and no more; what the page says a role without
grants can still do (LISTEN/NOTIFY, the advisory locks) is true; and so is what it says
venturi logs (ids and kinds, never payloads; notes cut to 16,000 characters).

The SQL is read from the page (docs/howto/security.md, the ```sql block after each
``% grants: NAME`` marker), so the page and this test cannot drift apart."""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from werkzeug.test import Client

import venturi
from tests.support import wait_until
from venturi.cli.main import build_cli
from venturi.dashboard import Dashboard
from venturi.prefix import Prefix
from venturi.schedules.retention import Retention
from venturi.store.postgres import PostgresStore

PAGE = Path(__file__).parents[2] / "docs" / "howto" / "security.md"
ROLES = ("owner", "worker", "enqueuer", "reader")
WAIT = 30.0


def page_sql(name: str) -> str:
    """The ```sql block that follows ``% grants: NAME`` on the Security page."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"^% grants: {name}\n```sql\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert found, f"the Security page has no sql block marked 'grants: {name}'"
    return found.group(1)


@attrs.frozen
class Grants:
    """The page's four roles under names of this test's own, and their DSNs."""

    prefix: str
    names: dict[str, str]
    dsns: dict[str, str]

    def adapt(self, statements: str, database: str) -> str:
        """The page's SQL for this test: its prefix, its role names, its database."""
        text = re.sub(r"\bshop_", f"{self.prefix}_", statements)
        for role, name in self.names.items():
            text = re.sub(rf"\bjobs_{role}\b", name, text)
        return text.replace("DATABASE app ", f'DATABASE "{database}" ')

    def queue(self, role: str, **options: Any) -> venturi.Queue:
        return venturi.Queue(self.dsns[role], prefix=self.prefix, pool_size=4, **options)

    def connect(self, role: str) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsns[role], autocommit=True)


def _dsn_as(dsn: str, role: str, password: str) -> str:
    params = conninfo_to_dict(dsn)
    params.update(user=role, password=password)
    return make_conninfo("", **params)


def _run(dsn: str, statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statements.encode())  # several statements: the simple protocol


def _drop_roles(dsn: str, names: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            role = sql.Identifier(name)
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))  # the owner's tables too
            conn.execute(sql.SQL("DROP ROLE {}").format(role))


@pytest.fixture
def grants(database_dsn: str, prefix: str) -> Iterator[Grants]:
    """The page's roles created by its SQL, the prefix migrated by the owner role, and
    the page's grants run as that owner; roles and tables dropped afterwards."""
    tag = secrets.token_hex(4)
    names = {role: f"venturi_g{tag}_{role}" for role in ROLES}
    passwords = {role: secrets.token_urlsafe(12) for role in ROLES}
    dsns = {role: _dsn_as(database_dsn, names[role], passwords[role]) for role in ROLES}
    made = Grants(prefix, names, dsns)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        database = conn.info.dbname
    try:
        _run(database_dsn, made.adapt(page_sql("roles"), database))
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            for role in ROLES:  # the page leaves passwords to the reader
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(names[role]), sql.Literal(passwords[role])
                    )
                )
        with made.queue("owner") as owner:
            owner.migrate()
        for role in ("worker", "enqueuer", "reader"):
            _run(dsns["owner"], made.adapt(page_sql(role), database))
        yield made
    finally:
        _drop_roles(database_dsn, list(names.values()))


def _refused(attempt: Callable[[], object]) -> str:
    """The first line of the permission error ``attempt`` raised (it must raise one)."""
    with pytest.raises((venturi.StoreError, psycopg.errors.InsufficientPrivilege)) as denied:
        attempt()
    error = denied.value
    if isinstance(error, venturi.StoreError):
        assert isinstance(error.__cause__, psycopg.errors.InsufficientPrivilege), error
        assert not isinstance(error, venturi.StoreUnavailable)  # permanent, not retried
    assert "permission denied" in str(error) or "must be owner" in str(error), error
    return str(error).splitlines()[0]


def _ddl_refused(grants: Grants, role: str) -> None:
    jobs = sql.Identifier(f"{grants.prefix}_jobs")
    for statement in (
        sql.SQL("DROP TABLE {}").format(jobs),
        sql.SQL("ALTER TABLE {} ADD COLUMN intruder int").format(jobs),
        sql.SQL("TRUNCATE {}").format(jobs),
        sql.SQL("CREATE TABLE {} (x int)").format(sql.Identifier(f"{grants.prefix}_intruder")),
    ):
        with grants.connect(role) as conn:
            _refused(lambda s=statement: conn.execute(s))  # type: ignore[misc]


def _status(queue: venturi.Queue, job_id: object) -> str | None:
    record = queue.get(str(job_id))
    return None if record is None else record.status.value


def test_the_worker_role_does_all_a_worker_does_and_no_ddl(grants: Grants) -> None:
    # Cancelled jobs are kept half a second: the worker's retention prunes them soon.
    queue = grants.queue("worker", retention=Retention(cancelled=0.5, every=1))
    seen: list[str] = []

    @queue.job("ok")
    def ok(n: int) -> int:
        return n

    @queue.job("flaky", max_attempts=3, backoff=venturi.constant(0))
    def flaky(fail: bool) -> str:
        if fail and not seen:
            seen.append("failed once")
            raise RuntimeError("first run fails")
        return "done"

    @queue.job("poison", max_attempts=1)
    def poison() -> None:
        raise venturi.Fail("cannot be helped")

    @queue.job("slow", lease=1, context=True)
    def slow(ctx: venturi.JobContext) -> str:
        ctx.stopping.wait(2.5)  # past its lease: only the heartbeat keeps it
        return "outlived its lease"

    @queue.job("orphan", lease=1)
    def orphan() -> str:
        return "recovered"

    @queue.job("limited", concurrency=1)
    def limited() -> None: ...

    @queue.periodic("tick", every=1)
    def tick() -> None: ...

    with queue:
        ids = {
            "ok": ok.enqueue(n=1),
            "flaky": flaky.enqueue(fail=True),
            "poison": poison.enqueue(),
            "slow": slow.enqueue(),
            "limited": limited.enqueue(),
        }
        # A claim whose worker "crashed": its lease lapses and the reaper takes it back.
        ids["orphan"] = orphan.enqueue()
        assert [j.id for j in queue.store.claim("crashed-worker", {"orphan": 1.0}, 1)] == [
            ids["orphan"]
        ]
        doomed = queue.enqueue("ok", {"n": 2}, delay=3600)
        assert queue.cancel(doomed)
        assert queue.pause("limited") and queue.resume("limited")
        with queue.worker(concurrency=4, poll_interval=1):
            wanted = {
                "ok": "completed",
                "flaky": "completed",
                "poison": "dead",
                "slow": "completed",
                "limited": "completed",
                "orphan": "completed",
            }
            wait_until(
                lambda: {k: _status(queue, v) for k, v in ids.items()} == wanted,
                timeout=WAIT,
                what=f"the worker role's jobs to end as {wanted}",
            )
            wait_until(
                lambda: any(
                    j.kind == "tick" and j.status.value == "completed" for j in queue.history()
                ),
                timeout=WAIT,
                what="a run of the periodic schedule",
            )
            wait_until(lambda: queue.get(doomed) is None, timeout=WAIT, what="the prune")
            assert [w.name for w in queue.workers()], "the worker registry has no row"
        outcomes = [e.outcome.value for e in queue.journal(ids["orphan"])]
        assert outcomes == ["recovered", "completed"]
        assert {k.kind for k in queue.kinds()} >= {"limited"}
    _ddl_refused(grants, "worker")


def test_the_enqueuer_role_enqueues_and_reads_but_cannot_claim_or_settle(
    grants: Grants,
) -> None:
    with grants.queue("enqueuer") as app, grants.queue("owner") as owner:
        with grants.connect("reader") as listener:
            listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"{grants.prefix}_jobs")))
            job_id = app.enqueue("mail", {"to": "a@example.com"})
            heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
        assert heard == ["mail"], "the enqueue's NOTIFY did not arrive"
        kept = app.enqueue("mail", {"v": 1}, dedup_key="user:1")
        assert app.enqueue("mail", {"v": 2}, dedup_key="user:1") == kept
        assert app.enqueue("mail", {"v": 3}, dedup_key="user:1", on_duplicate="replace") == kept
        many = app.enqueue_many([app.new_job("mail", {"n": n}) for n in range(3)])
        with app.workflow() as flow:
            parent = flow.add("mail", n=10)
            child = flow.add("mail", depends_on=[parent], n=11)
        record = app.get(kept)
        assert record is not None and record.payload == {"v": 3}
        assert [e.outcome.value for e in app.journal(kept)] == ["merged", "merged"]
        assert _status(app, child) == "waiting"
        pending_signal = app.enqueue("mail", {"n": 98})
        assert app.signal(pending_signal, "packed", 1) is False  # kept; nothing waits yet
        signalled = app.get(pending_signal)
        assert signalled is not None and signalled.durable is not None
        assert [s.payload for s in signalled.durable.signals] == [1]

        @owner.job("mail")
        def mail(**_: Any) -> str:
            return "sent"

        result: list[object] = []
        waiter = threading.Thread(target=lambda: result.append(app.result(job_id, timeout=WAIT)))
        waiter.start()
        owner.drain()
        waiter.join(WAIT)
        assert result == ["sent"]

        pending = app.enqueue("mail", {"n": 99})
        refused = {
            "claim": _refused(lambda: app.store.claim("intruder", {"mail": 30.0}, 1)),
            "cancel": _refused(lambda: app.cancel(pending)),
            "requeue": _refused(lambda: app.requeue(job_id)),
            "cleanup": _refused(lambda: app.cleanup(finished_before=owner.store.now())),
        }
        print(f"\nthe enqueuer role was refused: {refused}")
        jobs = sql.Identifier(f"{grants.prefix}_jobs")
        with grants.connect("enqueuer") as conn:
            for statement in (
                sql.SQL("UPDATE {} SET status = 'claimed', claimed_by = 'me'").format(jobs),
                sql.SQL("UPDATE {} SET run_count = run_count + 1").format(jobs),
                sql.SQL("DELETE FROM {}").format(jobs),
            ):
                _refused(lambda s=statement: conn.execute(s))  # type: ignore[misc]
        assert _status(owner, pending) == "pending" and len(many) == 3
    _ddl_refused(grants, "enqueuer")


DASHBOARD_PAGES = ("/", "/jobs", "/dead", "/workers", "/kinds", "/schedules", "/workflows")


def test_the_reader_role_reads_every_dashboard_page_and_command_but_writes_nothing(
    grants: Grants, database_dsn: str
) -> None:
    with grants.queue("owner") as owner:

        @owner.job("mail", max_attempts=1)
        def mail(n: int) -> int:
            if n < 0:
                raise venturi.Fail("bad address")
            return n

        done = mail.enqueue(n=1)
        mail.enqueue(n=-1)
        with owner.workflow() as flow:
            parent = flow.add("mail", n=2)
            flow.add("mail", depends_on=[parent], n=3)
        owner.drain()
        owner.pause("mail")
        pending = mail.enqueue(n=4)
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(f"{grants.prefix}_jobs")))
    with grants.queue("reader") as reader:
        client = Client(Dashboard(reader, read_only=True))
        pages = [*DASHBOARD_PAGES, f"/jobs/{done}", f"/workflows/{flow.id}"]
        answered = {page: client.get(page).status_code for page in pages}
        assert answered == dict.fromkeys(pages, 200)
        estimated = reader.store.reads.overview(exact_below=1)  # from ANALYZE's statistics
        assert estimated.estimated
        refused = {
            "enqueue": _refused(lambda: reader.enqueue("mail", {"n": 5})),
            "cancel": _refused(lambda: reader.cancel(pending)),
            "requeue": _refused(lambda: reader.requeue(done)),
            "resume": _refused(lambda: reader.resume("mail")),
            "claim": _refused(lambda: reader.store.claim("intruder", {"mail": 30.0}, 1)),
        }
        print(f"\nthe reader role was refused: {refused}")
    cli = build_cli()
    env = {"VENTURI_DSN": grants.dsns["reader"], "VENTURI_PREFIX": grants.prefix}
    for command in (
        ["stats"],
        ["history"],
        ["job", str(done)],
        ["dead"],
        ["kinds"],
        ["schedules"],
        ["workers"],
        ["healthcheck"],
    ):
        ran = CliRunner().invoke(cli, command, env=env)
        assert ran.exit_code == 0, (command, ran.output)
    _ddl_refused(grants, "reader")


@pytest.fixture
def outsider(database_dsn: str) -> Iterator[str]:
    """A role of this database granted nothing at all: only PUBLIC's CONNECT."""
    name, password = f"venturi_out_{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
    try:
        yield _dsn_as(database_dsn, name, password)
    finally:
        _drop_roles(database_dsn, [name])


def test_a_role_without_grants_listens_and_notifies_on_the_prefix_s_channels(
    database_dsn: str, prefix: str, outsider: str
) -> None:
    channel = sql.Identifier(Prefix(prefix).channel)
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
        with psycopg.connect(outsider, autocommit=True) as spy:
            _refused(lambda: spy.execute(sql.SQL("SELECT * FROM {}").format(channel)))
            spy.execute(sql.SQL("LISTEN {}").format(channel))
            queue.enqueue("payroll.run", {"secret": "stays in the row"})
            heard = [n.payload for n in spy.notifies(timeout=5, stop_after=1)]
            # The kind and the moment reach it; the payload does not.
            assert heard == ["payroll.run"]
            with psycopg.connect(database_dsn, autocommit=True) as worker_side:
                worker_side.execute(sql.SQL("LISTEN {}").format(channel))
                spy.execute(sql.SQL("NOTIFY {}, 'wake up'").format(channel))
                woken = [n.payload for n in worker_side.notifies(timeout=5, stop_after=1)]
            assert woken == ["wake up"]
            spy.execute(sql.SQL("LISTEN {}").format(sql.Identifier(Prefix(prefix).done_channel)))
            estimate = spy.execute(
                "SELECT reltuples FROM pg_class WHERE relname = %s", (Prefix(prefix).jobs,)
            ).fetchone()
            assert estimate is not None, "the catalogs show the jobs table"


def test_a_role_without_grants_can_hold_the_migration_and_prune_locks(
    database_dsn: str, prefix: str, outsider: str
) -> None:
    keys = Prefix(prefix)
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()
    store = PostgresStore.from_dsn(
        database_dsn, Prefix(prefix), pool_size=2, migration_lock_timeout=0.5
    )
    try:
        with psycopg.connect(outsider, autocommit=True) as squatter:
            row = squatter.execute(
                "SELECT pg_try_advisory_lock(%s), pg_try_advisory_lock(%s)",
                (keys.lock_key, keys.prune_lock_key),
            ).fetchone()
            assert row == (True, True)
            with pytest.raises(venturi.MigrationLockTimeout):
                store.migrate()
            assert store.prune(Retention(completed=1), threading.Event()) is None  # skipped
            # Released here: a closed session's locks go only when its backend has exited,
            # which the next statement can overtake.
            squatter.execute("SELECT pg_advisory_unlock_all()")
        assert store.prune(Retention(completed=1), threading.Event()) is not None
        assert store.migrate() == []
    finally:
        store.close()


def test_worker_logs_name_jobs_but_never_show_their_payloads(
    database_dsn: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = secrets.token_hex(16)
    with venturi.Queue(database_dsn, prefix=prefix) as queue:
        queue.migrate()

        @queue.job("leaky", max_attempts=2, backoff=venturi.constant(0), context=True)
        def leaky(ctx: venturi.JobContext, card: str) -> None:
            ctx.note("x" * 20_000)
            raise RuntimeError("card refused")

        job_id = leaky.enqueue(card=secret)
        with (
            caplog.at_level(logging.DEBUG, logger="venturi"),
            queue.worker(concurrency=1, poll_interval=1),
        ):
            wait_until(lambda: _status(queue, job_id) == "dead", timeout=WAIT, what="dead")
        logged = "\n".join(record.getMessage() + repr(vars(record)) for record in caplog.records)
        assert str(job_id) in logged and "leaky" in logged and "card refused" in logged
        assert secret not in logged
        notes = [e.note or "" for e in queue.journal(job_id)]
        assert notes and all(len(note) <= 16_000 for note in notes)
        assert all(secret not in note for note in notes)
