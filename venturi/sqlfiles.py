"""Loads the SQL files shipped as `venturi.sql` and composes them for a prefix."""

from __future__ import annotations

import functools
from importlib import resources
from typing import LiteralString

from psycopg import sql

from venturi.prefix import Prefix


@functools.cache
def text(name: str) -> LiteralString:
    """The raw text of ``sql/<name>.sql`` (``name`` may include ``migrations/``)."""
    # These files ship inside the package and are written by us, never by users; values
    # always travel as parameters and names through sql.Identifier. So the text is as
    # trusted as a literal in the source, which is what LiteralString promises.
    data: LiteralString = resources.files("venturi.sql").joinpath(f"{name}.sql").read_text("utf-8")
    return data


@functools.cache
def query(name: str, prefix: Prefix) -> sql.Composed:
    """``sql/<name>.sql`` with its placeholders bound to ``prefix``'s names."""
    return sql.SQL(text(name)).format(**prefix.placeholders())


def operation_names() -> list[str]:
    """Every operation file (without ``.sql``), for tests that compose them all."""
    root = resources.files("venturi.sql")
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".sql"))


def migration_names() -> list[str]:
    """Migration files in the order they apply (``0001_initial`` ...)."""
    root = resources.files("venturi.sql").joinpath("migrations")
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".sql"))
