"""The store a queue's reads go to when it has a ``read_dsn``: a small pool of read-only
connections to a replica (or to the primary as a read-only role)."""

from __future__ import annotations

from typing import Any, Final

from venturi.prefix import Prefix
from venturi.store.dsn import connect_defaults, parse_dsn
from venturi.store.owned_pools import open_owned
from venturi.store.postgres import PostgresStore
from venturi.store.statements import Preparation, check_preparation, new_pool

# Dashboard reads are short and few at a time; the pool opens connections only when a
# read asks for one, so a queue that never reads holds none on the read server.
READ_POOL_SIZE: Final = 2
READ_APPLICATION_NAME: Final = "venturi-read"
READ_ONLY_OPTION: Final = "-c default_transaction_read_only=on"


def read_only_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """Connect keywords for a read DSN's ``params``: every transaction read-only (added to
    the DSN's own ``options``), so a write sent there by mistake fails instead of landing
    on a database the queue does not write to; ``application_name`` unless the DSN sets
    one, so the connections are told apart in ``pg_stat_activity``."""
    options = " ".join(part for part in (params.get("options"), READ_ONLY_OPTION) if part)
    keywords: dict[str, Any] = {"options": options}
    if "application_name" not in params:
        keywords["application_name"] = READ_APPLICATION_NAME
    return keywords


def open_read_store(
    dsn: str,
    prefix: Prefix,
    *,
    pool_timeout: float,
    prepared_statements: Preparation,
) -> PostgresStore:
    """A store on ``dsn`` under ``prefix`` whose pool of `READ_POOL_SIZE` read-only
    connections opens them on demand; closed with the queue. Raises `ConfigurationError`
    (naming ``read_dsn``) for a DSN that does not parse."""
    params = parse_dsn(dsn, "read_dsn")
    kwargs = {**connect_defaults(params), **read_only_keywords(params)}
    name = f"venturi-{prefix.name}-read"
    prepared = check_preparation(prepared_statements)
    pool = new_pool(dsn, kwargs, READ_POOL_SIZE, pool_timeout, name, min_size=0, prepared=prepared)
    store = PostgresStore(pool, prefix, owns_pool=True)
    open_owned(pool)
    return store
