"""`session_for`: a SQLAlchemy session on a transactional run's ``ctx.conn``, whose ORM
writes commit with the job's completion or not at all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", minversion="2.0")

from sqlalchemy import Integer, String, create_engine, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import venturi
from tests.support import wait_until
from venturi import JobContext, Queue
from venturi.contrib.sqlalchemy import psycopg_connection, session_for
from venturi.errors import ConfigurationError

WAIT = 30.0


@pytest.fixture
def queue(database_dsn: str, prefix: str) -> Iterator[Queue]:
    instance = Queue(database_dsn, prefix=prefix, pool_size=4)
    instance.migrate()
    yield instance
    instance.close()


@pytest.fixture
def model(database_dsn: str, prefix: str) -> Iterator[type[Any]]:
    """A mapped class on a table of this test's own."""

    class Base(DeclarativeBase):
        pass

    class Charge(Base):
        __tablename__ = f"{prefix}_charges"
        id: Mapped[int] = mapped_column(Integer, primary_key=True)
        order_id: Mapped[int] = mapped_column(Integer)
        note: Mapped[str] = mapped_column(String(50), default="")

    engine = create_engine(database_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    Base.metadata.create_all(engine)
    yield Charge
    Base.metadata.drop_all(engine)
    engine.dispose()


def _charges(database_dsn: str, model: type[Any]) -> list[tuple[int, str]]:
    engine = create_engine(database_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with Session(engine) as session:
            found = session.execute(select(model.order_id, model.note).order_by(model.id))
            return [(row[0], row[1]) for row in found]
    finally:
        engine.dispose()


def _outcomes(queue: Queue, job_id: object) -> list[str]:
    return [e.outcome.value for e in queue.journal(str(job_id))]


def test_orm_writes_commit_with_the_completion(
    queue: Queue, model: type[Any], database_dsn: str
) -> None:
    @queue.job("billing.charge", transactional=True, context=True)
    def charge(ctx: JobContext, order_id: int) -> None:
        with session_for(ctx) as session:
            session.add(model(order_id=order_id, note="first"))
            session.commit()  # into the run's transaction: releases the session's savepoint
            session.add(model(order_id=order_id, note="undone"))
            session.flush()
            session.rollback()  # back to the session's (new) savepoint only
            session.add(model(order_id=order_id, note="second"))
            # The follow-up job joins the same transaction.
            queue.enqueue("billing.receipt", {}, conn=psycopg_connection(session))
        with session_for(ctx) as session:  # a second session sees the first's writes
            assert session.scalar(text("SELECT count(*) FROM " + model.__tablename__)) == 2

    job_id = charge.enqueue(order_id=5)
    assert queue.drain(kinds=["billing.charge"]) == 1
    assert _outcomes(queue, job_id) == ["completed"]
    assert _charges(database_dsn, model) == [(5, "first"), (5, "second")]
    assert [j.kind for j in queue.history()].count("billing.receipt") == 1


def test_an_exception_rolls_the_orm_writes_and_the_follow_up_back(
    queue: Queue, model: type[Any], database_dsn: str
) -> None:
    @queue.job("billing.charge", transactional=True, context=True, backoff=lambda n: 3600)
    def charge(ctx: JobContext, order_id: int) -> None:
        with session_for(ctx) as session:
            session.add(model(order_id=order_id))
            queue.enqueue("billing.receipt", {}, conn=psycopg_connection(session))
        raise ValueError("card declined")

    job_id = charge.enqueue(order_id=5)
    assert queue.drain(kinds=["billing.charge"]) == 1
    assert _outcomes(queue, job_id) == ["retried"]
    assert _charges(database_dsn, model) == []
    assert [j.kind for j in queue.history()] == ["billing.charge"]


def test_a_cancelled_run_commits_no_orm_write(
    queue: Queue, model: type[Any], database_dsn: str
) -> None:
    written = threading.Event()
    fenced: list[venturi.JobRecord] = []

    class Fenced(venturi.WorkerEvents):
        def job_settled(self, job: venturi.JobRecord, *args: Any) -> None:
            if args[1] is None:
                fenced.append(job)

    @queue.job("billing.charge", transactional=True, context=True, lease=1.0)
    def charge(ctx: JobContext, order_id: int) -> None:
        with session_for(ctx) as session:
            session.add(model(order_id=order_id))
        written.set()
        ctx.stopping.wait(WAIT)

    job_id = charge.enqueue(order_id=5)
    with queue.worker(concurrency=1, poll_interval=1, events=Fenced()):
        assert written.wait(WAIT)
        assert queue.cancel(str(job_id))
        wait_until(lambda: fenced, timeout=WAIT, what="the completion to be fenced")
    assert _charges(database_dsn, model) == []
    assert _outcomes(queue, job_id) == ["cancelled"]


def test_session_for_needs_a_transactional_run(queue: Queue) -> None:
    @queue.job("plain", context=True)
    def plain(ctx: JobContext) -> None:
        with session_for(ctx):
            pass

    job_id = plain.enqueue()
    assert queue.drain() == 1
    [entry] = queue.journal(str(job_id))
    assert entry.outcome.value == "retried"
    assert ConfigurationError.__name__ in (entry.note or "")
    assert "transactional=True" in (entry.note or "")
