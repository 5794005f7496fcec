"""The way to the database: the `Store` protocol and its PostgreSQL implementation."""

from venturi.store.postgres import PostgresStore
from venturi.store.protocol import Notifier, Store

__all__ = ["Notifier", "PostgresStore", "Store"]
