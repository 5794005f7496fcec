"""Connection strings: a `Dsn` parsed once and handed to every consumer (the pool, the
listener, the read pool, the command line), the connect timeout venturi adds, and
keeping passwords out of everything venturi prints."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from venturi.errors import ConfigurationError

# Seconds libpq may spend on one connection attempt unless the DSN sets its own.
DEFAULT_CONNECT_TIMEOUT: Final = 5
_QUOTED: Final = re.compile(r'"([^"]*)"')
# The environment variable behind each connection string of a queue.
ENVIRONMENT: Final = {
    "dsn": "VENTURI_DSN",
    "listen_dsn": "VENTURI_LISTEN_DSN",
    "read_dsn": "VENTURI_READ_DSN",
}


@attrs.frozen
class Dsn:
    """A connection string as given ("" for libpq's defaults), parsed once.

    ``name`` says which setting it is (``dsn``, ``listen_dsn``, ``read_dsn``), so an
    error names it. Multi-host strings (``host=a,b ... target_session_attrs=primary``)
    pass to libpq unchanged.
    """

    text: str
    params: Mapping[str, Any] = attrs.field(repr=False)
    name: str = "dsn"

    @classmethod
    def parse(cls, value: str | Dsn, name: str = "dsn") -> Dsn:
        """``value`` parsed (a `Dsn` is returned as it is); `ConfigurationError` naming
        ``name`` when libpq cannot parse it, its message free of the DSN's secrets."""
        if isinstance(value, Dsn):
            return value
        if not isinstance(value, str):
            raise ConfigurationError(f"{name} must be a connection string, got {value!r}")
        return cls(value, parse_dsn(value, name), name)

    @classmethod
    def from_environment(cls, name: str = "dsn") -> Dsn | None:
        """The DSN of setting ``name`` from its environment variable (`ENVIRONMENT`), or
        None when that is unset or empty."""
        text = os.environ.get(ENVIRONMENT[name]) or None
        return None if text is None else cls.parse(text, name)

    @classmethod
    def resolve(cls, value: str | Dsn | None, name: str = "dsn") -> Dsn | None:
        """``value`` parsed, else the environment's (`from_environment`), else None."""
        return cls.from_environment(name) if value is None else cls.parse(value, name)

    def connect_kwargs(self) -> dict[str, Any]:
        """Connect keywords venturi adds: a connect timeout unless the DSN sets one, so an
        unanswering host fails in seconds rather than hanging."""
        return connect_defaults(dict(self.params))

    @property
    def redacted(self) -> str:
        """The DSN fit to print: without its password (and passfile)."""
        return redact_dsn(self.text)

    def scrub(self, text: str) -> str:
        """``text`` (an error that may quote this DSN) fit to print."""
        return scrub(text, self.text)

    def __str__(self) -> str:
        return self.redacted


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
