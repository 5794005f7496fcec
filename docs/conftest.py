"""Run every ```python block of the documentation against a real PostgreSQL.

Sybil collects the blocks of each page in ``docs/**/*.md`` and runs them in order, in
one namespace per page. Each page gets a schema of its own: the environment variable
``VENTURI_DSN`` points at the test database with that schema first on the search path,
so an example writes ``venturi.Queue(prefix="emails")`` exactly as an application
would, and two pages (or two runs) never see each other's tables. After the page, the
workers and queues it left open are stopped and closed and the schema is dropped.
The conventions for writing examples are in ``docs/development.md``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.sql
import pytest
from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser

import venturi
from tests.contrib.django.project import database_settings
from venturi.testing import database_for_tests

DOCS = Path(__file__).parent

# The server is found once for the whole run (an embedded fallback is started once and
# stopped at the end), not once per page.
_session = contextlib.ExitStack()
_server_dsn: list[str] = []

# Variables a page's examples may read or set; each page starts from the values the
# run began with, whatever the previous page did.
_PAGE_ENVIRONMENT = ("VENTURI_DSN", "VENTURI_PREFIX", "VENTURI_LISTEN_DSN", "VENTURI_READ_DSN")


def server_dsn() -> str:
    """The PostgreSQL the examples use: the one the test suite uses
    (`venturi.testing.database_for_tests`)."""
    if not _server_dsn:
        _server_dsn.append(_session.enter_context(database_for_tests("venturi-docs")))
    return _server_dsn[0]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the embedded server, if one was started for the examples."""
    _session.close()


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Run the documentation's examples after every other test of the session.

    Django can be configured once per process: the test suite's Django tests configure
    it for their example project, and a page's ``configure_django`` then works on top
    of that configuration, which it could not do the other way round.
    """
    pages = [item for item in items if DOCS in Path(str(item.path)).parents]
    others = [item for item in items if DOCS not in Path(str(item.path)).parents]
    items[:] = others + pages


def page_schema() -> str:
    """A schema name used by one page in this run alone."""
    return f"docs_{uuid.uuid4().hex[:16]}"


def schema_dsn(dsn: str, schema: str) -> str:
    """``dsn`` with ``schema`` first on the search path (and ``public`` after it, where
    extensions live)."""
    return psycopg.conninfo.make_conninfo(dsn, options=f"-c search_path={schema},public")


@contextlib.contextmanager
def page_database() -> Iterator[str]:
    """Create the page's schema and point ``VENTURI_DSN`` at it; on exit restore the
    environment and drop the schema with everything in it."""
    base = server_dsn()
    schema = page_schema()
    saved = {name: os.environ.get(name) for name in _PAGE_ENVIRONMENT}
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(schema)))
    dsn = schema_dsn(base, schema)
    for name in _PAGE_ENVIRONMENT:
        os.environ.pop(name, None)
    os.environ["VENTURI_DSN"] = dsn
    try:
        yield dsn
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(schema)
                )
            )


def django_for_page(stack: contextlib.ExitStack) -> Any:
    """The ``configure_django(**settings)`` a page calls in an invisible block.

    Django is configured once per process, so the first page that calls it configures
    it (``DATABASES`` from ``VENTURI_DSN``, ``INSTALLED_APPS`` with venturi's app, and
    the page's settings) and later pages re-point the database connection at their own
    schema and apply their settings with ``override_settings`` until the page ends.
    """

    def configure_django(**page_settings: Any) -> None:
        import django
        from django.conf import settings
        from django.db import connections
        from django.test.utils import override_settings

        from venturi.contrib.django import reset_queue

        database = database_settings(os.environ["VENTURI_DSN"])
        if not settings.configured:
            settings.configure(
                DEBUG=False,
                SECRET_KEY="venturi-docs",
                USE_TZ=True,
                ALLOWED_HOSTS=["testserver"],
                DATABASES={"default": database},
                INSTALLED_APPS=["django.contrib.contenttypes", "venturi.contrib.django"],
                DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
                **page_settings,
            )
            django.setup()
        else:
            connections.close_all()
            settings_dict = connections["default"].settings_dict
            before = dict(settings_dict)
            settings_dict.update(database)

            def restore() -> None:
                settings_dict.clear()
                settings_dict.update(before)

            stack.callback(restore)
            override = override_settings(**page_settings)
            override.enable()
            stack.callback(override.disable)
        reset_queue()
        stack.callback(connections.close_all)
        stack.callback(reset_queue)

    return configure_django


def close_leftovers(namespace: dict[str, Any]) -> None:
    """Stop the workers and close the queues a page left open, so that dropping its
    schema never races a worker still claiming from it."""
    values = list(namespace.values())
    for value in values:
        if isinstance(value, venturi.Worker):
            value.stop(timeout=10)
    for value in values:
        if isinstance(value, venturi.Queue):
            value.close()


def setup(namespace: dict[str, Any]) -> None:
    """Before a page's first example: its own schema, a module name for code that asks
    for one (``Flask(__name__)``), and the Django helper for invisible set-up blocks."""
    stack = contextlib.ExitStack()
    stack.enter_context(page_database())
    namespace["_page_cleanup"] = stack
    namespace["__name__"] = "docs_page"
    namespace["configure_django"] = django_for_page(stack)


def teardown(namespace: dict[str, Any]) -> None:
    """After a page's last example: close what it left open, then drop its schema."""
    try:
        close_leftovers(namespace)
    finally:
        stack = namespace["_page_cleanup"]
        assert isinstance(stack, contextlib.ExitStack)
        stack.close()


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["*.md", "**/*.md"],
    excludes=["_build/**"],
    setup=setup,
    teardown=teardown,
).pytest()
