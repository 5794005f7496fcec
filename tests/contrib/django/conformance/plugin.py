"""The pytest plugin of the conformance run: Django configured on the test database with
the stand-ins as its ``TASKS``, a venturi prefix of its own for each test, database
access for Django's SimpleTestCase classes, and the deliberate differences expected to
fail. Loaded with ``-p`` by ``python -m tests.contrib.django.conformance``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

import pytest

from tests.contrib.django.conformance.differences import DIFFERENCES
from tests.contrib.django.project import build_settings
from tests.support import SHARED_SERVER_DSN, drop_prefix, fresh_prefix, server_answers

if TYPE_CHECKING:
    from django.test import SimpleTestCase

STAND_INS = "tests.contrib.django.conformance.backends"
_servers = ExitStack()
_dsn: list[str] = []


def _database_dsn() -> str:
    """As the suite finds its database: VENTURI_TEST_DSN, the shared server, else an
    embedded one for this run."""
    explicit = os.environ.get("VENTURI_TEST_DSN")
    if explicit:
        return explicit
    if server_answers(SHARED_SERVER_DSN):
        return SHARED_SERVER_DSN
    from venturi.store.embedded import embedded_server

    return _servers.enter_context(embedded_server("venturi-conformance")).dsn


def pytest_configure(config: pytest.Config) -> None:
    import django
    from django.conf import settings

    from venturi.contrib.django.tasks import register_backend

    _dsn.append(_database_dsn())
    project = build_settings(_dsn[0], "unused", "unused")
    settings.configure(
        DEBUG=False,
        SECRET_KEY="venturi-conformance",
        USE_TZ=True,
        DATABASES=project["DATABASES"],
        INSTALLED_APPS=["venturi.contrib.django"],
        # Django's own test settings leave TASKS at its default, ImmediateBackend.
        TASKS={"default": {"BACKEND": f"{STAND_INS}.ImmediateBackend"}},
    )
    # Django's ImmediateBackend runs a task once, so the kinds of the aliases the tests
    # run tasks on get one attempt; registered first, before any backend registers them
    # with the default.
    for alias in ("default", "immediate"):
        for queues in ([], ["default"]):
            register_backend(alias, {"QUEUES": queues, "OPTIONS": {"MAX_ATTEMPTS": 1}})
    django.setup()


def pytest_unconfigure(config: pytest.Config) -> None:
    _servers.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    failures = _failures()
    seen = set()
    for item in items:
        cls = getattr(item, "cls", None)
        if _simple(cls):
            # SimpleTestCase refuses queries; venturi's results live in the database.
            cls.databases = {"default"}
        key = f"{Path(str(item.path)).name}::{item.nodeid.split('::', 1)[1]}"
        difference = DIFFERENCES.get(key)
        if difference is not None:
            seen.add(key)
            expected = pytest.mark.xfail(
                reason=f"deliberate: {difference.reason}",
                raises=failures[difference.raises],
                strict=True,
            )
            item.add_marker(expected)
    stale = sorted(set(DIFFERENCES) - seen)
    if stale:
        raise pytest.UsageError(f"differences.py names tests that do not exist: {stale}")


def _failures() -> dict[str, type[BaseException]]:
    from django.tasks.exceptions import TaskResultDoesNotExist

    return {"AssertionError": AssertionError, "TaskResultDoesNotExist": TaskResultDoesNotExist}


def _simple(cls: object) -> TypeGuard[type[SimpleTestCase]]:
    """A SimpleTestCase class that is not a TransactionTestCase (nor a TestCase)."""
    from django.test import SimpleTestCase, TransactionTestCase

    return (
        isinstance(cls, type)
        and issubclass(cls, SimpleTestCase)
        and not issubclass(cls, TransactionTestCase)
    )


@pytest.fixture(autouse=True)
def _own_prefix() -> Iterator[None]:
    """Each test's tasks in a prefix of their own, migrated first and dropped after."""
    from django.test.utils import override_settings

    from venturi.contrib.django import get_queue

    prefix = fresh_prefix("djtasks")
    with override_settings(VENTURI={"PREFIX": prefix}):
        get_queue().migrate()
        yield
    drop_prefix(_dsn[0], prefix)
