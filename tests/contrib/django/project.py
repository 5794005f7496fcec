"""The example Django project's settings, shared by the in-process tests (through
``settings.configure``) and by ``manage.py`` run as a real worker process."""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import conninfo_to_dict


def database_settings(dsn: str) -> dict[str, Any]:
    """A Django ``DATABASES`` entry for ``dsn`` (its other libpq options in ``OPTIONS``)."""
    params: dict[str, Any] = conninfo_to_dict(dsn)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.pop("dbname", "postgres"),
        "USER": params.pop("user", ""),
        "PASSWORD": params.pop("password", ""),
        "HOST": params.pop("host", ""),
        "PORT": str(params.pop("port", "")),
        "OPTIONS": params,
    }


def build_settings(dsn: str, orders_table: str, prefix: str) -> dict[str, Any]:
    """Settings for the shop project on the database ``dsn``."""
    database = database_settings(dsn)
    return {
        "DEBUG": False,
        "SECRET_KEY": "venturi-tests",
        "ALLOWED_HOSTS": ["testserver"],
        "USE_TZ": True,
        "DATABASES": {"default": database},
        "INSTALLED_APPS": ["venturi.contrib.django", "tests.contrib.django.shop"],
        "ROOT_URLCONF": "tests.contrib.django.shop.urls",
        "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
        "VENTURI": {"PREFIX": prefix},
        "TASKS": {
            "default": {
                "BACKEND": "venturi.contrib.django.VenturiBackend",
                "QUEUES": ["default", "mail"],
                "OPTIONS": {"MAX_ATTEMPTS": 2},
            }
        },
        "SHOP_ORDERS_TABLE": orders_table,
    }
