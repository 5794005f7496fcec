"""Django's own connection, as venturi uses it: the queue's database alias, its psycopg 3
connection (where an enqueue joins ``transaction.atomic()``), and a lender of it that a
testing queue runs every statement on, inside the test's transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connections, transaction

from .conf import VenturiSettings


def database_alias() -> str:
    """The ``DATABASES`` alias the queue lives in."""
    return VenturiSettings.load().database


def django_connection(using: str | None = None) -> psycopg.Connection[Any]:
    """Django's own psycopg 3 connection for ``using`` (the queue's database by default).

    Opens it if needed. Work done on it joins the thread's current ``transaction.atomic()``
    block, exactly like the ORM's queries.
    """
    wrapper = connections[using or database_alias()]
    wrapper.ensure_connection()
    raw = wrapper.connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError(
            f"database {wrapper.alias!r} is not on psycopg 3 (got {type(raw).__name__}); "
            "venturi joins Django transactions only through psycopg 3"
        )
    return raw


class DjangoConnectionLender:
    """Lends Django's own connection to the queue (a `venturi.store.connections.Lender`):
    each statement runs in the thread's current transaction (a ``TestCase``'s) as a
    savepoint, so a failing one leaves that transaction usable."""

    def __init__(self, alias: str, conninfo: str) -> None:
        self.alias = alias
        self.conninfo = conninfo

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        # Django's atomic(): a savepoint inside the caller's transaction (rolled back
        # alone if the statement fails), else a transaction of its own.
        with transaction.atomic(using=self.alias):
            yield django_connection(self.alias)
