"""Connection strings: parsing, the connect timeout venturi adds, and keeping passwords
out of everything venturi prints."""

from __future__ import annotations

import re
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from venturi.errors import ConfigurationError

# Seconds libpq may spend on one connection attempt unless the DSN sets its own.
DEFAULT_CONNECT_TIMEOUT: Final = 5
_QUOTED: Final = re.compile(r'"([^"]*)"')


def parse_dsn(dsn: str, name: str = "dsn") -> dict[str, Any]:
    """The DSN's libpq parameters; `ConfigurationError` (naming ``name``) if unparseable.

    libpq's own message is kept, with every piece of the DSN it quotes hidden."""
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"{name} is not a valid connection string: {scrub(str(exc), dsn)}"
        ) from None


def connect_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """Connect keywords venturi adds to a DSN's ``params``: a connect timeout unless the
    DSN sets one, so an unanswering host fails in seconds rather than hanging."""
    return {} if "connect_timeout" in params else {"connect_timeout": DEFAULT_CONNECT_TIMEOUT}


def redact_dsn(dsn: str) -> str:
    """A DSN fit to print or paste back: the password (and passfile) removed, whatever
    the DSN form."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable DSN>"
    safe = {k: v for k, v in params.items() if k not in ("password", "passfile")}
    return make_conninfo("", **safe) if safe else "(libpq defaults)"


def scrub(text: str, dsn: str) -> str:
    """A message fit to print although it may quote ``dsn``. A parseable DSN's password
    is masked; from an unparseable one (whose password cannot be told apart) every
    quoted piece is hidden, since libpq's parse errors quote all of a malformed URI, or
    the word after an unquoted space, which may hold the password."""
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.ProgrammingError:
        return _QUOTED.sub(
            lambda m: m.group(0) if len(m.group(1)) < 2 or m.group(1) not in dsn else '"…"',
            text,
        )
    return text.replace(str(password), "***") if password else text
