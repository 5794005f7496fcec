"""Unit tests: values, parsing, the SQL loader, layout and pure logic. They need no
database, so the server fixtures refuse here: a test that reaches for PostgreSQL belongs
in the folder of the part it exercises."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def database_dsn() -> str:
    pytest.fail("tests/unit needs no database; move a test that does next to its subject")
