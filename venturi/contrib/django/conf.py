"""The ``VENTURI`` setting, and connection parameters taken from a ``DATABASES`` entry."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import attrs
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from psycopg import pq
from psycopg.conninfo import make_conninfo

from venturi.errors import ConfigurationError
from venturi.payload import DEFAULT_MAX_PAYLOAD_BYTES
from venturi.queue import DEFAULT_PREFIX

SETTING: Final = "VENTURI"


class SettingsError(ConfigurationError, ImproperlyConfigured):
    """``VENTURI`` or the database it names is unusable (both a venturi and a Django error)."""


def _int(name: str, *, optional: bool = False) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SettingsError(f"VENTURI[{name!r}] must be a positive int, got {value!r}")

    return check


def _str(name: str, *, optional: bool = False) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if value is None and optional:
            return
        if not isinstance(value, str) or not value:
            raise SettingsError(f"VENTURI[{name!r}] must be a non-empty str, got {value!r}")

    return check


def _modules(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(m, str) for m in value):
        raise SettingsError(
            f"VENTURI['AUTODISCOVER'] must be a list of module names, got {value!r}"
        )
    return tuple(value)


def _bool(name: str) -> Any:
    def check(_: Any, __: Any, value: Any) -> None:
        if not isinstance(value, bool):
            raise SettingsError(f"VENTURI[{name!r}] must be True or False, got {value!r}")

    return check


@attrs.frozen
class VenturiSettings:
    """``settings.VENTURI``, checked. Every key is optional.

    ``DATABASE``: the ``DATABASES`` alias holding the queue (default ``"default"``);
    ``LISTEN_DSN``: where workers LISTEN when that alias leads to a transaction-pooling
    proxy (the server itself; default: env ``VENTURI_LISTEN_DSN``, else the alias);
    ``PREFIX``: its table-name prefix; ``POOL_SIZE``, ``STRICT``, ``MAX_PAYLOAD_BYTES``:
    as for `venturi.Queue`; ``AUTODISCOVER``: module names imported from every installed
    app before ``manage.py venturi`` runs, so their jobs are registered (``["jobs"]``).
    """

    database: str = attrs.field(default="default", validator=_str("DATABASE"))
    listen_dsn: str | None = attrs.field(default=None, validator=_str("LISTEN_DSN", optional=True))
    prefix: str = attrs.field(default=DEFAULT_PREFIX, validator=_str("PREFIX"))
    pool_size: int | None = attrs.field(default=None, validator=_int("POOL_SIZE", optional=True))
    strict: bool = attrs.field(default=False, validator=_bool("STRICT"))
    max_payload_bytes: int = attrs.field(
        default=DEFAULT_MAX_PAYLOAD_BYTES, validator=_int("MAX_PAYLOAD_BYTES")
    )
    autodiscover: tuple[str, ...] = attrs.field(default=("jobs",), converter=_modules)

    @classmethod
    def load(cls) -> VenturiSettings:
        """Read ``settings.VENTURI``; raises `SettingsError` for a bad or unknown key."""
        raw = getattr(settings, SETTING, None)
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise SettingsError(f"settings.VENTURI must be a dict, got {type(raw).__name__}")
        known = {field.name.upper(): field.name for field in attrs.fields(cls)}
        unknown = sorted(str(k) for k in raw if k not in known)
        if unknown:
            raise SettingsError(
                f"unknown VENTURI keys {', '.join(unknown)}; known: {', '.join(known)}"
            )
        return cls(**{known[key]: value for key, value in raw.items()})


@functools.cache
def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def connection_params(settings_dict: Mapping[str, Any]) -> dict[str, Any]:
    """libpq parameters for a ``DATABASES`` entry, as Django's own backend reads it.

    ``NAME``, ``USER``, ``PASSWORD``, ``HOST`` and ``PORT``, plus every ``OPTIONS`` key
    that libpq knows (``sslmode``, ``sslrootcert``, ``service``, ``connect_timeout``,
    ...); Django-only options (``pool``, ``isolation_level``, ``server_side_binding``,
    ...) do not apply to venturi's own connections and are left out.
    """
    engine = str(settings_dict.get("ENGINE", ""))
    if not engine.endswith("postgresql") and "postgis" not in engine:
        raise SettingsError(
            f"venturi needs a PostgreSQL database; the configured one uses {engine or 'no'} "
            "ENGINE (set VENTURI['DATABASE'] to a PostgreSQL alias)"
        )
    options = settings_dict.get("OPTIONS") or {}
    keywords = _libpq_keywords()
    params: dict[str, Any] = {k: v for k, v in options.items() if k in keywords}
    name = settings_dict.get("NAME")
    if name:
        params["dbname"] = name
    elif name is None and "service" not in params:
        params["dbname"] = "postgres"  # as Django does for NAME = None
    for key, param in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if settings_dict.get(key):
            params[param] = settings_dict[key]
    if settings_dict.get("PORT"):
        params["port"] = str(settings_dict["PORT"])
    return params


def connection_string(settings_dict: Mapping[str, Any]) -> str:
    """`connection_params` as a libpq connection string (for `venturi.Queue`)."""
    return make_conninfo("", **connection_params(settings_dict))
