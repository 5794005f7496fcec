"""The psycopg 3 connection beneath a SQLAlchemy session or connection.

Passing it as ``conn=`` to `Queue.enqueue` puts the job in the session's transaction:
it commits with ``session.commit()`` and disappears with ``session.rollback()``.
SQLAlchemy is not imported here; any object with SQLAlchemy's shape works.
"""

from __future__ import annotations

from typing import Any

import psycopg


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
    if isinstance(driver, psycopg.Connection):
        return driver
    raise TypeError(
        "expected a psycopg connection or a SQLAlchemy Session/Connection on the psycopg 3 "
        f"driver (postgresql+psycopg://), got {type(source).__name__}"
        + (f" whose driver connection is {type(driver).__name__}" if driver is not None else "")
    )
