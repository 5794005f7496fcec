"""Which PostgreSQL the tests use: the one named, else a local server that answers,
else a throwaway embedded server (extra ``embedded``) — the order venturi's own tests use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

LOCAL_SERVER_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def database_for_tests(label: str = "venturi-test") -> Iterator[str]:
    """Yield the DSN of a PostgreSQL for tests.

    ``VENTURI_TEST_DSN`` if set; else the local server (``VENTURI_TEST_LOCAL_DSN``,
    default postgres@127.0.0.1:5432) if it answers; else an embedded throwaway server,
    started here and stopped (its data deleted) on exit. Raises RuntimeError saying what
    to do when none of them is available.
    """
    explicit = os.environ.get("VENTURI_TEST_DSN")
    if explicit:
        yield explicit
        return
    local = os.environ.get("VENTURI_TEST_LOCAL_DSN") or LOCAL_SERVER_DSN
    if _answers(local):
        yield local
        return
    from venturi.store.embedded import EmbeddedUnavailable, embedded_server

    try:
        server = embedded_server(label)
        started = server.__enter__()
    except EmbeddedUnavailable as exc:
        raise RuntimeError(
            f"no PostgreSQL for the tests: VENTURI_TEST_DSN is not set, {local} does not "
            f"answer, and {exc} (set VENTURI_TEST_DSN, or install venturi[embedded])"
        ) from exc
    try:
        yield started.dsn
    finally:
        server.__exit__(None, None, None)


def _answers(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except psycopg.Error:
        return False
