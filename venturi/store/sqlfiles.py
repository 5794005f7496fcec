"""Loads the SQL files shipped as `venturi.sql` and composes them for a prefix.

An operation file may name shared pieces, the fragments of ``sql/fragments/`` (one file
each: the job column list, the ownership fence, ...), as ``{fragment_name}``; the loader
pastes them in before binding the prefix's names, so each shared piece is written once
and every statement still reads as one SQL file. Migrations never use fragments: an
applied migration must not change when a fragment does.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Final, LiteralString

from psycopg import sql

from venturi.prefix import Prefix

_PLACEHOLDER: Final = re.compile(r"\{([a-z_]+)\}")
_MIGRATIONS: Final = "migrations/"
# Deeper than any fragment needs (a fragment may name another); a cycle stops here.
_MAX_NESTING: Final = 4


def _read(name: str) -> str:
    return resources.files("venturi.sql").joinpath(f"{name}.sql").read_text("utf-8")


def _names(folder: str) -> list[str]:
    root = resources.files("venturi.sql")
    if folder:
        root = root.joinpath(folder)
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".sql"))


@functools.cache
def fragments() -> dict[str, str]:
    """Each fragment's SQL (its leading comment lines dropped), by name."""
    pieces = {}
    for name in _names("fragments"):
        lines = _read(f"fragments/{name}").splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        pieces[name] = "\n".join(lines).strip()
    return pieces


def source(name: str) -> str:
    """The text of ``sql/<name>.sql`` as written, fragments still named."""
    return _read(name)


@functools.cache
def text(name: str) -> LiteralString:
    """The text of ``sql/<name>.sql`` (``name`` may include ``migrations/``) with its
    fragments pasted in; prefix placeholders such as ``{jobs}`` are left for `query`."""
    body = _read(name)
    if not name.startswith(_MIGRATIONS):
        body = _expand(body, fragments())
    # These files ship inside the package and are written by us, never by users; values
    # always travel as parameters and names through sql.Identifier. So the text is as
    # trusted as a literal in the source, which is what LiteralString promises.
    trusted: LiteralString = body
    return trusted


def _expand(body: str, pieces: dict[str, str]) -> str:
    def paste(match: re.Match[str]) -> str:
        piece = pieces.get(match.group(1))
        if piece is None:
            return match.group(0)  # a prefix name, bound later
        # Continuation lines take the indent of the line that names the fragment.
        line = body[body.rfind("\n", 0, match.start()) + 1 : match.start()]
        indent = line[: len(line) - len(line.lstrip())]
        return piece.replace("\n", "\n" + indent)

    for _ in range(_MAX_NESTING):
        expanded = _PLACEHOLDER.sub(paste, body)
        if expanded == body:
            return body
        body = expanded
    raise ValueError(f"SQL fragments nest deeper than {_MAX_NESTING} (a cycle?)")


def query(name: str, prefix: Prefix | None = None) -> sql.Composed:
    """``sql/<name>.sql`` with its fragments pasted in and its placeholders bound to
    ``prefix``'s names (a file without placeholders takes no prefix)."""
    names = {} if prefix is None else prefix.placeholders()
    return sql.SQL(text(name)).format(**names)


@functools.cache
def statement(name: str, prefix: Prefix | None = None) -> bytes:
    """The one form in which the store runs a statement: `query` as the bytes psycopg
    sends, composed once (a `sql.Composed` is composed again on every execute,
    microseconds per statement). The files are ASCII (a unit test checks) and a
    prefix's names are too, so these bytes are the same in every client encoding."""
    return query(name, prefix).as_bytes(None)


def operation_names() -> list[str]:
    """Every operation file (without ``.sql``), for tests that compose them all."""
    return _names("")


def migration_names() -> list[str]:
    """Migration files in the order they apply (``0001_initial`` ...)."""
    return _names("migrations")
