"""The example project's settings: the test's database and venturi prefix come from the
environment (CELERY_EXAMPLE_DSN, CELERY_EXAMPLE_PREFIX)."""

import os

from psycopg.conninfo import conninfo_to_dict

_params = conninfo_to_dict(os.environ["CELERY_EXAMPLE_DSN"])

SECRET_KEY = "venturi-celery-example"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
INSTALLED_APPS = ["venturi.contrib.django", "tests.contrib.celery.djangoproj.demoapp"]
ROOT_URLCONF = "tests.contrib.celery.djangoproj.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _params.pop("dbname", "postgres"),
        "USER": _params.pop("user", ""),
        "PASSWORD": _params.pop("password", ""),
        "HOST": _params.pop("host", ""),
        "PORT": str(_params.pop("port", "")),
        "OPTIONS": _params,
    }
}
VENTURI = {"PREFIX": os.environ["CELERY_EXAMPLE_PREFIX"]}

# Celery settings, as the example names them.
CELERY_BROKER_URL = "redis://localhost:6379/0"
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "count-widgets": {
        "task": "tests.contrib.celery.djangoproj.demoapp.tasks.count_widgets",
        "schedule": 3600.0,
    },
}
