"""The ``VENTURI`` setting, and connection parameters taken from a ``DATABASES`` entry."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import attrs
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from psycopg import pq
from psycopg.conninfo import make_conninfo

from venturi.contrib import settings as settings_schema
from venturi.contrib.settings import (
    QueueSettings,
    filled_str,
    flag,
    names,
    optional_filled_str,
    to_names,
)

SETTING: Final = "VENTURI"


class SettingsError(settings_schema.SettingsError, ImproperlyConfigured):
    """``VENTURI`` or the database it names is unusable: the integrations' settings
    error, and Django's `ImproperlyConfigured`."""


@attrs.frozen
class VenturiSettings(QueueSettings):
    """``settings.VENTURI``, checked. Every key is optional.

    ``DATABASE``: the ``DATABASES`` alias holding the queue (default ``"default"``);
    ``LISTEN_DSN``: where workers LISTEN when that alias leads to a transaction-pooling
    proxy (the server itself; default: env ``VENTURI_LISTEN_DSN``, else the alias);
    ``READ_DSN``: where the queue's reads (job, history, stats, kinds, schedules, workflow
    status) go, a replica or a read-only role (default: env ``VENTURI_READ_DSN``, else the
    alias; never in ``TESTING`` mode, whose reads stay in the test's transaction);
    ``PREFIX``: its table-name prefix; ``POOL_SIZE``, ``STRICT``, ``MAX_PAYLOAD_BYTES``:
    as for `venturi.Queue`; ``AUTODISCOVER``: module names imported from every installed
    app before ``manage.py venturi`` runs, so their jobs are registered (``["jobs"]``);
    ``TESTING``: in test settings, ``"inline"`` or ``"manual"`` — the queue then works
    on Django's own connection, inside a ``TestCase``'s transaction (see
    `venturi.contrib.django.testing`). ``DASHBOARD_PERMISSION``: the permission a user
    needs for the dashboard (``venturi.contrib.django.urls``; default: active staff
    users); ``DASHBOARD_READ_ONLY``: True shows it without its actions.
    """

    error: ClassVar[type[settings_schema.SettingsError]] = SettingsError

    database: str = attrs.field(default="default", validator=filled_str)
    autodiscover: tuple[str, ...] = attrs.field(
        default=("jobs",), converter=to_names, validator=names
    )
    dashboard_permission: str | None = attrs.field(default=None, validator=optional_filled_str)
    dashboard_read_only: bool = attrs.field(default=False, validator=flag)

    @classmethod
    def key(cls, name: str) -> str:
        return f"{SETTING}[{name.upper()!r}]"

    @classmethod
    def load(cls) -> VenturiSettings:
        """Read ``settings.VENTURI``; raises `SettingsError` for a bad or unknown key."""
        raw = getattr(settings, SETTING, None)
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise SettingsError(f"settings.VENTURI must be a dict, got {type(raw).__name__}")
        return cls.from_keys(raw, "VENTURI keys")


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
