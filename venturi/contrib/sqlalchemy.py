"""SQLAlchemy and venturi's transactions, both ways.

`psycopg_connection` gives the psycopg 3 connection beneath a SQLAlchemy session or
connection: passing it as ``conn=`` to `Queue.enqueue` puts the job in the session's
transaction (it commits with ``session.commit()``, disappears with ``session.rollback()``).

`session_for` gives a transactional job (``transactional=True``) a SQLAlchemy session on
``ctx.conn``, so the ORM's writes commit with the job's completion or not at all.

SQLAlchemy is imported only by `session_for`; any object with SQLAlchemy's shape works
for `psycopg_connection`.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from venturi.context import JobContext

if TYPE_CHECKING:  # SQLAlchemy is optional: imported where it is used
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session

_lent: contextvars.ContextVar[psycopg.Connection[Any] | None] = contextvars.ContextVar(
    "venturi_sqlalchemy_lent", default=None
)


def psycopg_connection(source: Any) -> psycopg.Connection[Any]:
    """The psycopg connection of a SQLAlchemy ``Session`` or ``Connection``.

    For a session this begins its transaction if none is open (as any query would), so
    the engine must use the psycopg 3 driver (``postgresql+psycopg://``). Raises
    `TypeError` for anything else.
    """
    if isinstance(source, psycopg.Connection):
        return source
    connection = source
    if callable(getattr(source, "connection", None)):  # a Session: connection() is a method
        connection = source.connection()
    proxied = getattr(connection, "connection", None)  # PoolProxiedConnection
    driver = getattr(proxied, "driver_connection", None)
    if isinstance(driver, _RunConnection):
        return driver.lent
    if isinstance(driver, psycopg.Connection):
        return driver
    raise TypeError(
        "expected a psycopg connection or a SQLAlchemy Session/Connection on the psycopg 3 "
        f"driver (postgresql+psycopg://), got {type(source).__name__}"
        + (f" whose driver connection is {type(driver).__name__}" if driver is not None else "")
    )


@contextmanager
def session_for(ctx: JobContext, **options: Any) -> Iterator[Session]:
    """A SQLAlchemy ``Session`` on the run's transaction (``ctx.conn``).

    ```python
    @queue.job("billing.charge", transactional=True, context=True)
    def charge(ctx, order_id):
        with session_for(ctx) as session:
            session.add(Charge(order_id=order_id))
    ```

    The session works in a savepoint of the run's transaction: leaving the block
    normally commits it (releases the savepoint), so its writes join the transaction
    that commits with the job's completion; leaving it by an exception rolls them back.
    ``session.commit()`` and ``session.rollback()`` inside the block act on that
    savepoint only: the run's transaction is venturi's to commit or roll back. Keyword
    ``options`` go to ``Session`` (``expire_on_commit``, ...). Raises
    `ConfigurationError` outside a transactional run, `ImportError` without SQLAlchemy.
    """
    from sqlalchemy.orm import Session

    token = _lent.set(ctx.conn)
    try:
        with _engine().connect() as connection:
            connection.begin()
            session = Session(bind=connection, join_transaction_mode="create_savepoint", **options)
            with session:
                yield session
                session.commit()
    finally:
        _lent.reset(token)


class _RunConnection:
    """The run's psycopg connection as SQLAlchemy's DBAPI connection: everything passes
    through but transaction control and closing, which stay with the run."""

    def __init__(self, lent: psycopg.Connection[Any]) -> None:
        self.lent = lent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lent, name)

    def commit(self) -> None:
        """The run's transaction commits with the job's completion, not before."""

    def rollback(self) -> None:
        """A failed run's transaction is rolled back by venturi."""

    def close(self) -> None:
        """The connection is the run's, returned to its pool by venturi."""

    def add_notice_handler(self, handler: Any) -> None:
        """Kept off the run's pooled connection, which outlives this session."""


def _lend() -> _RunConnection:
    lent = _lent.get()
    if lent is None:
        raise RuntimeError("venturi's SQLAlchemy engine connects only inside session_for")
    return _RunConnection(lent)


@functools.cache
def _engine() -> Engine:
    """One engine for every `session_for`: it never connects anywhere itself, each
    connection it hands out is the current run's."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    # Native hstore would look its type up through psycopg, which wants the connection
    # itself rather than its stand-in; SQLAlchemy's own hstore parsing serves instead.
    return create_engine(
        "postgresql+psycopg://",
        creator=_lend,
        poolclass=NullPool,
        pool_reset_on_return=None,
        use_native_hstore=False,
    )
